/** The apply engine with files and directories, on a real file system. */
import assert from "node:assert/strict";
import { admit, applyText, openEngine, planText } from "../src/engine/mod.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { sha256Hex } from "../src/declaration/canonical.ts";
import type { FileSystem } from "../src/providers.ts";
import { directory, exists, file, hostOn, modeOf, scratch } from "./_helpers.ts";
import { apply } from "./resources/_apply.ts";

Deno.test("a first apply creates, a second changes nothing and says so", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const resources = [
    directory("app", `${s.root}/app`, "0750"),
    file("conf", `${s.root}/app/app.conf`, "listen = 1\n", "0640"),
    {
      ...file("bin", `${s.root}/app/blob`, ""),
      content: undefined,
      contentBase64: btoa("\u0000\u0001\u00ff"),
    },
  ];
  const first = await apply(host, resources);
  assert.equal(first.outcome, "converged");
  assert.deepEqual(first.counts, { changed: 3, unchanged: 0, removed: 0, forgotten: 0, failed: 0 });
  assert.equal(await Deno.readTextFile(`${s.root}/app/app.conf`), "listen = 1\n");
  assert.deepEqual(await Deno.readFile(`${s.root}/app/blob`), new Uint8Array([0, 1, 255]));
  assert.equal(await modeOf(`${s.root}/app`), "0750");
  assert.equal(await modeOf(`${s.root}/app/app.conf`), "0640");

  const before = (await Deno.lstat(`${s.root}/app/app.conf`)).ino;
  const second = await apply(host, resources);
  assert.equal(second.outcome, "converged");
  assert.deepEqual(second.counts, {
    changed: 0,
    unchanged: 3,
    removed: 0,
    forgotten: 0,
    failed: 0,
  });
  assert.equal(
    (await Deno.lstat(`${s.root}/app/app.conf`)).ino,
    before,
    "an in-sync file is not rewritten",
  );
  assert.equal(host.store.managedCount(), 3);
});

Deno.test("drift is restored: content, mode, owner, a deleted file and a deleted directory", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const resources = [
    directory("d", `${s.root}/d`, "0755"),
    file("a", `${s.root}/d/a`, "A\n", "0600"),
    file("b", `${s.root}/d/b`, "B\n"),
    file("c", `${s.root}/c`, "C\n"),
  ];
  await apply(host, resources);
  await Deno.writeTextFile(`${s.root}/d/a`, "edited by a person\n");
  await Deno.chmod(`${s.root}/d/b`, 0o666);
  await Deno.chown(`${s.root}/d/b`, 1, 1);
  await Deno.remove(`${s.root}/c`);
  await Deno.chmod(`${s.root}/d`, 0o700);

  const plan = await planText(host, JSON.stringify({ version: 1, resources }), {
    source: "file",
    origin: "test",
  });
  assert.deepEqual(plan.map((e) => [e.id, e.status]), [["d", "change"], ["a", "change"], [
    "b",
    "change",
  ], ["c", "create"]]);
  assert.equal(await modeOf(`${s.root}/d`), "0700", "plan changes nothing");

  const report = await apply(host, resources);
  assert.equal(report.outcome, "converged");
  assert.deepEqual(report.counts, {
    changed: 4,
    unchanged: 0,
    removed: 0,
    forgotten: 0,
    failed: 0,
  });
  assert.deepEqual(report.results.find((r) => r.id === "b")?.changes, [
    "mode 0666 → 0644",
    "owner 1 → 0 (root)",
    "group 1 → 0 (root)",
  ]);
  assert.equal(await Deno.readTextFile(`${s.root}/d/a`), "A\n");
  assert.equal(await modeOf(`${s.root}/d/b`), "0644");
  assert.equal((await Deno.lstat(`${s.root}/d/b`)).uid, 0);
  assert.equal(await Deno.readTextFile(`${s.root}/c`), "C\n");
  assert.equal(await modeOf(`${s.root}/d`), "0755");
});

Deno.test("a path moved to another resource id keeps the fact that the host created it", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  await apply(host, [file("old-id", `${s.root}/f`, "1")]);
  const renamed = await apply(host, [file("new-id", `${s.root}/f`, "1")]);
  assert.deepEqual(renamed.results.map((r) => [r.id, r.outcome]), [["new-id", "unchanged"]]);
  const dropped = await apply(host, []);
  assert.deepEqual(dropped.results.map((r) => [r.id, r.outcome]), [["new-id", "removed"]]);
});

Deno.test("a parent swapped for a symlink between two resources is refused", async () => {
  await using s = await scratch();
  await Deno.mkdir(`${s.dir}/attacker`);
  const real = posixFileSystem();
  // As soon as the first file is written, replace d/ by a symlink to somewhere else (the
  // files are written together, so this is before the second one's commit).
  const racing: FileSystem = {
    ...real,
    writeFileAtomic: async (path, data, attributes, beforeRename) => {
      await real.writeFileAtomic(path, data, attributes, beforeRename);
      if (path.endsWith("/first")) {
        Deno.renameSync(`${s.root}/d`, `${s.root}/d-moved`);
        Deno.symlinkSync(`${s.dir}/attacker`, `${s.root}/d`);
      }
    },
  };
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: racing }),
  });
  const resources = [
    directory("d", `${s.root}/d`),
    file("first", `${s.root}/d/first`, "1"),
    file("second", `${s.root}/d/second`, "2"),
  ];
  const report = await apply(host, resources);
  assert.equal(report.outcome, "failed");
  // The first file's read-back (after both commits) finds its path behind a symlink now.
  assert.deepEqual(report.results.map((r) => [r.id, r.outcome]), [
    ["d", "changed"],
    ["first", "failed"],
    ["second", "skipped"],
  ]);
  assert.match(report.results[1].detail!, /is a symlink/);
  // The second file's temporary file stays in the directory it was written in: removing
  // it by name would go through the symlink.
  assert.deepEqual(
    [...Deno.readDirSync(`${s.root}/d-moved`)].map((e) => e.name).sort(),
    [".second.nox-new", "first"],
  );
  assert.deepEqual(
    [...Deno.readDirSync(`${s.dir}/attacker`)],
    [],
    "nothing was written through the symlink",
  );
});

Deno.test("the first failure stops the apply; the report names the resource and the reason", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const report = await apply(host, [
    file("ok", `${s.root}/ok`, "1"),
    file("orphan", `${s.root}/missing-dir/f`, "2"),
    file("never", `${s.root}/never`, "3"),
    { type: "package", id: "pkg", name: "vim" },
  ]);
  assert.equal(report.outcome, "failed");
  assert.match(
    report.error!,
    /file "orphan" failed: the directory .*missing-dir does not exist.*declare it as a directory resource/,
  );
  assert.deepEqual(report.results.map((r) => [r.id, r.outcome]), [
    ["ok", "changed"],
    ["orphan", "failed"],
    ["never", "skipped"],
    ["pkg", "skipped"],
  ]);
  assert.equal(await exists(`${s.root}/never`), false, "nothing after the failure was applied");
  assert.deepEqual(host.store.managed().map((h) => h.id), ["ok"]);
  const last = host.store.lastApply()!;
  assert.equal(last.outcome, "failed");
  assert.equal(host.store.results(last.id).length, 4);
});

Deno.test("a partial apply never reports success, and nothing held is released after a failure", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  await apply(host, [file("keep", `${s.root}/keep`, "1")]);
  const report = await apply(host, [file("bad", `${s.root}/no/such/dir`, "x")]);
  assert.equal(report.outcome, "failed");
  assert.equal(await exists(`${s.root}/keep`), true, "removals wait for a converged apply");
});

Deno.test("kinds whose providers have not landed fail with 'no provider on this machine'", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const report = await apply(host, [{ type: "package", id: "wg", name: "wireguard-tools" }]);
  assert.equal(report.outcome, "failed");
  assert.match(report.error!, /no provider on this machine for package resources/);
});

Deno.test("an aborted apply stops between steps and is recorded as interrupted", async () => {
  await using s = await scratch();
  const aborter = new AbortController();
  const real = posixFileSystem();
  // Aborted once the first file is written: the second, written with it, is not committed.
  const aborting: FileSystem = {
    ...real,
    writeFileAtomic: async (path, data, attributes, beforeRename) => {
      await real.writeFileAtomic(path, data, attributes, beforeRename);
      aborter.abort();
    },
  };
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: aborting }),
  });
  const report = await applyText(
    host,
    JSON.stringify({
      version: 1,
      resources: [
        file("a", `${s.root}/a`, "1"),
        file("b", `${s.root}/b`, "2"),
        directory("c", `${s.root}/c`),
      ],
    }),
    { source: "file", origin: "test", signal: aborter.signal },
  );
  assert.equal(report.outcome, "interrupted");
  assert.deepEqual(report.results.map((r) => r.outcome), ["changed", "skipped", "skipped"]);
  assert.equal(await exists(`${s.root}/b`), false, "the second file was not committed");
  assert.deepEqual([...Deno.readDirSync(s.root)].map((e) => e.name), ["a"], "no temporary file");
  assert.equal(host.store.lastApply()?.outcome, "interrupted");
  // Between two resources applied one at a time, too.
  const between = new AbortController();
  const report2 = await applyText(
    host,
    JSON.stringify({
      version: 1,
      resources: [directory("x", `${s.root}/x`), directory("y", `${s.root}/y`)],
    }),
    { source: "file", origin: "test", signal: between.signal, onResult: () => between.abort() },
  );
  assert.equal(report2.outcome, "interrupted");
  assert.deepEqual(report2.results.map((r) => r.outcome), ["changed", "skipped"]);
});

Deno.test("files written together commit in declared order: nothing after a failed one is committed", async () => {
  await using s = await scratch();
  const real = posixFileSystem();
  const failing: FileSystem = {
    ...real,
    writeFileAtomic: (path, data, attributes, beforeRename) =>
      real.writeFileAtomic(path, data, attributes, async () => {
        await beforeRename?.();
        if (path.endsWith("/b")) throw new Error("refused for the test");
      }),
  };
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: failing }),
  });
  const report = await apply(host, [
    file("a", `${s.root}/a`, "1"),
    file("b", `${s.root}/b`, "2"),
    file("c", `${s.root}/c`, "3"),
  ]);
  assert.equal(report.outcome, "failed");
  assert.deepEqual(report.results.map((r) => [r.id, r.outcome]), [
    ["a", "changed"],
    ["b", "failed"],
    ["c", "skipped"],
  ]);
  assert.match(report.error!, /file "b" failed: refused for the test/);
  assert.deepEqual([...Deno.readDirSync(s.root)].map((e) => e.name), ["a"]);
  assert.deepEqual(host.store.managedIndex().size, 1, "only what was committed is held");
  assert.deepEqual(host.store.intents(), [], "no intent is left for what was not made");
});

Deno.test("a first apply of many files syncs each directory once, writing them in waves; a failed write stops the later waves and leaves no intent for them", async () => {
  await using s = await scratch();
  const real = posixFileSystem();
  const syncs = new Map<string, number>();
  let open = 0;
  let most = 0;
  const failing: { at?: string } = {};
  const counting: FileSystem = {
    ...real,
    syncDirectory: (path) => {
      syncs.set(path, (syncs.get(path) ?? 0) + 1);
      return real.syncDirectory(path);
    },
    writeFileAtomic: async (path, data, attributes, beforeRename) => {
      most = Math.max(most, ++open);
      try {
        await real.writeFileAtomic(path, data, attributes, async () => {
          await beforeRename?.();
          if (path === failing.at) throw new Error("refused for the test");
        });
      } finally {
        open--;
      }
    },
  };
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: counting }),
  });
  const dirs = [0, 1, 2, 3].map((d) => directory(`d${d}`, `${s.root}/d${d}`));
  const files = Array.from(
    { length: 300 },
    (_, i) => file(`f${i}`, `${s.root}/d${i % 4}/f${i}`, `${i}\n`),
  );
  const report = await apply(host, [...dirs, ...files]);
  assert.equal(report.outcome, "converged", report.error);
  assert.equal(report.counts.changed, 304);
  for (const d of [0, 1, 2, 3]) {
    assert.equal(
      syncs.get(`${s.root}/d${d}`),
      1,
      `d${d} synced ${syncs.get(`${s.root}/d${d}`)} times`,
    );
  }
  // Waves of 256 where the file system syncs a wave's writes at once (syncWrites).
  assert.ok(most <= 256, `${most} writes held a temporary file at once`);
  assert.ok(most > 64, `the writes overlapped in waves of 256: ${most} at most`);

  // Another 300 (in other directories), the 100th refused at its commit: the first wave is
  // committed up to it, nothing later is, and the later waves were never started.
  const more = [4, 5].map((d) => directory(`d${d}`, `${s.root}/d${d}`));
  const later = Array.from(
    { length: 300 },
    (_, i) => file(`g${i}`, `${s.root}/d${4 + (i % 2)}/g${i}`, `${i}\n`),
  );
  failing.at = `${s.root}/d5/g99`;
  const failed = await apply(host, [...dirs, ...files, ...more, ...later]);
  assert.equal(failed.outcome, "failed");
  assert.match(failed.error!, /file "g99" failed: refused for the test/);
  const made = (d: number) => [...Deno.readDirSync(`${s.root}/d${d}`)].map((e) => e.name);
  assert.deepEqual(
    [...made(4), ...made(5)].sort(),
    Array.from({ length: 99 }, (_, i) => `g${i}`).sort(),
  );
  assert.deepEqual(host.store.intents(), [], "no intent is left for what was not made");
  assert.equal(failed.results.filter((r) => r.outcome === "skipped").length, 200);
});

Deno.test("a window's writes are synced once per wave, after the last write and before the first rename; a file system that cannot sync them together is never asked", async () => {
  await using s = await scratch();
  const acts: string[] = [];
  const real = posixFileSystem({ beforeAct: (act, path) => acts.push(`${act} ${path}`) });
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: real }),
  });
  const files = Array.from({ length: 300 }, (_, i) => file(`f${i}`, `${s.root}/f${i}`, `${i}\n`));
  const report = await apply(host, files);
  assert.equal(report.outcome, "converged", report.error);
  const at = (act: string) => acts.flatMap((a, i) => a.startsWith(`${act} `) ? [i] : []);
  const [creates, allSyncs, renames] = [at("create"), at("sync"), at("rename")];
  assert.equal(creates.length, 300);
  assert.equal(renames.length, 300);
  // The directory's own sync comes after every rename (the names); the others are the waves'.
  const syncs = allSyncs.filter((i) => i < renames.at(-1)!);
  assert.deepEqual(allSyncs.filter((i) => i > renames.at(-1)!).map((i) => acts[i]), [
    `sync ${s.root}`,
  ]);
  // Two waves (256 + 44): one sync each, after all of its writes, before any of its renames.
  assert.equal(
    syncs.length,
    2,
    `synced ${syncs.length} times: ${acts.filter((a) => a.startsWith("sync"))}`,
  );
  for (const [wave, sync] of syncs.entries()) {
    const [from, to] = wave === 0 ? [0, 256] : [256, 300];
    assert.ok(
      creates.slice(from, to).every((c) => c < sync),
      `wave ${wave}: a write after its sync`,
    );
    assert.ok(
      renames.slice(from, to).every((r) => r > sync),
      `wave ${wave}: a rename before its sync`,
    );
  }
  for (let i = 0; i < 300; i++) assert.equal(Deno.readTextFileSync(`${s.root}/f${i}`), `${i}\n`);

  // Without syncWrites, each write syncs itself (waves of 64, no sync of the file system).
  acts.length = 0;
  const { syncWrites: _, ...alone } = real;
  using other = await openEngine({
    stateDir: `${s.stateDir}-2`,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: alone }),
  });
  const more = Array.from({ length: 100 }, (_, i) => file(`g${i}`, `${s.root}/g${i}`, `${i}\n`));
  assert.equal((await apply(other, more)).outcome, "converged");
  assert.equal(at("rename").length, 100);
  assert.deepEqual(at("sync").map((i) => acts[i]), [`sync ${s.root}`], "only the directory's sync");
});

Deno.test("the same text from the same place is parsed once per engine (the drift timer's re-admission)", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const text = JSON.stringify({ version: 1, resources: [file("a", `${s.root}/a`, "1")] });
  const from = { source: "file", origin: "test" } as const;
  const first = await admit(host, text, from);
  assert.equal(await admit(host, text.slice(0), from), first, "an equal string: the same value");
  assert.notEqual(await admit(host, text, { ...from, origin: "other" }), first);
  const changed = text.replace('"1"', '"2"');
  const second = await admit(host, changed, from);
  assert.notEqual(second, first);
  assert.equal((second.resources[0] as { content?: string }).content, "2");
  // Bytes (the link's, a file's) are parsed every time.
  const bytes = new TextEncoder().encode(text);
  assert.notEqual(await admit(host, bytes, from), await admit(host, bytes, from));
  // A refused text is refused again.
  const bad = JSON.stringify({ version: 1, resources: [file("x", "/outside/x", "1")] });
  await assert.rejects(admit(host, bad, from));
  await assert.rejects(admit(host, bad, from));
});

Deno.test("an apply builds the canonical JSON of its declaration once: the digest's text is the stored body", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const resources = Array.from(
    { length: 20 },
    (_, i) => file(`f${i}`, `${s.root}/f${i}`, `${i}\n`),
  );
  // Count what JSON.stringify is asked of a whole declaration (an object with `resources`).
  const stringify = JSON.stringify;
  let wholes = 0;
  JSON.stringify = ((value: unknown, ...rest: never[]) => {
    if (value !== null && typeof value === "object" && "resources" in value) wholes++;
    return stringify(value, ...rest);
  }) as typeof JSON.stringify;
  let report;
  try {
    report = await applyText(host, stringify({ version: 1, resources }), {
      source: "file",
      origin: "test",
    });
  } finally {
    JSON.stringify = stringify;
  }
  assert.equal(report.outcome, "converged");
  assert.equal(wholes, 1, "the parse's canonical JSON, for the digest and the stored body");
  const stored = host.store.current()!;
  assert.equal(`sha256:${await sha256Hex(stored.body)}`, report.digest);
  assert.deepEqual(JSON.parse(stored.body).resources.length, 20);
});
