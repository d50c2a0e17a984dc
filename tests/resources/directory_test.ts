/**
 * The directory kind on a real file system: a file in its way is refused, one it created
 * is removed when no longer declared (after what is inside it, also after a crash cut the
 * removals short) and kept when a person put something in it, and a check pass looks at
 * an ancestor directory once. Moved from tests/apply_test.ts (issue 25: tests mirror src/).
 */
import assert from "node:assert/strict";
import { openEngine } from "../../src/engine/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import type { FileSystem } from "../../src/providers.ts";
import { directory, exists, file, hostOn, scratch } from "../_helpers.ts";
import { apply } from "./_apply.ts";

Deno.test("no longer declared: created things are removed last-first, others forgotten", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  await Deno.writeTextFile(`${s.root}/preexisting.conf`, "a person's file\n");
  await apply(host, [
    directory("d", `${s.root}/d`),
    directory("e", `${s.root}/e`),
    file("in-d", `${s.root}/d/x`, "x"),
    file("pre", `${s.root}/preexisting.conf`, "managed now\n"),
  ]);
  // A person puts a file of their own into a directory the host created.
  await Deno.writeTextFile(`${s.root}/e/persons-notes`, "mine\n");

  const report = await apply(host, []);
  assert.equal(report.outcome, "converged");
  const outcomes = report.results.map((r) => [r.id, r.outcome, r.detail ?? ""]);
  assert.deepEqual(outcomes, [
    ["pre", "forgotten", "not created by the host, left in place"],
    ["in-d", "removed", ""],
    ["e", "forgotten", "not empty, kept"],
    ["d", "removed", ""],
  ]);
  assert.equal(await exists(`${s.root}/d`), false);
  assert.equal(
    await Deno.readTextFile(`${s.root}/e/persons-notes`),
    "mine\n",
    "never removes what it did not create",
  );
  assert.equal(await Deno.readTextFile(`${s.root}/preexisting.conf`), "managed now\n");
  assert.equal(host.store.managedCount(), 0);

  // Forgotten means forgotten: a later apply does not touch e/ again.
  const again = await apply(host, []);
  assert.deepEqual(again.results, []);
  assert.equal(await exists(`${s.root}/e`), true);
});

Deno.test("a file in the way of a directory (and the reverse) is refused, not replaced", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  await Deno.writeTextFile(`${s.root}/x`, "a file");
  await Deno.mkdir(`${s.root}/y`);
  const a = await apply(host, [directory("x", `${s.root}/x`)]);
  assert.match(a.error!, /is a file, not a directory/);
  const b = await apply(host, [file("y", `${s.root}/y`, "x")]);
  assert.match(b.error!, /is a directory, not a file/);
  assert.equal(await Deno.readTextFile(`${s.root}/x`), "a file");
});

Deno.test("a check pass looks at each ancestor directory once, not once per file below it", async () => {
  await using s = await scratch();
  const real = posixFileSystem();
  const looks = new Map<string, number>();
  const counting: FileSystem = {
    ...real,
    lstat: (path) => {
      looks.set(path, (looks.get(path) ?? 0) + 1);
      return real.lstat(path);
    },
  };
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: counting }),
  });
  const resources = [
    directory("d", `${s.root}/d`),
    ...Array.from({ length: 20 }, (_, i) => file(`f${i}`, `${s.root}/d/f${i}`, `${i}`)),
  ];
  assert.equal((await apply(host, resources)).outcome, "converged");
  looks.clear();
  const again = await apply(host, resources);
  assert.equal(again.counts.unchanged, 21);
  // The directory's own check, and once as the files' ancestor.
  assert.ok(
    (looks.get(`${s.root}/d`) ?? 0) <= 2,
    `d was looked at ${looks.get(`${s.root}/d`)} times`,
  );
});

Deno.test("removals cut short by a crash: what is inside a directory is released before it", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  await apply(host, [
    directory("d", `${s.root}/d`),
    directory("d-sub", `${s.root}/d/sub`),
    file("f", `${s.root}/d/sub/f`, "1"),
    file("g", `${s.root}/d/g`, "2"),
  ]);
  // What a process killed in the middle of releasing them leaves: each removal
  // begun (its intent recorded, held no more), nothing removed yet, and the
  // temporary file of a write cut short before that. Intents have no position;
  // the store lists them by key, the directory first.
  for (const held of host.store.managed().reverse()) host.store.beginRelease(held);
  await Deno.writeTextFile(`${s.root}/d/sub/.f.nox-new`, "half");
  assert.equal(host.store.managedCount(), 0);

  const report = await apply(host, []);
  assert.equal(report.outcome, "converged");
  assert.deepEqual(report.results.map((r) => [r.id, r.outcome]), [
    ["g", "removed"],
    ["f", "removed"],
    ["d-sub", "removed"],
    ["d", "removed"],
  ]);
  assert.deepEqual([...Deno.readDirSync(s.root)], [], "nothing the host made is left behind");
  assert.deepEqual(host.store.intents(), []);
});
