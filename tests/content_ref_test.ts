/**
 * Content by reference (DESIGN.md §19): a file declared by contentSha256 + size gets
 * its bytes from the blobs/ directory beside its declaration (the bundle's way), is
 * verified, cached by digest under the state directory, and pruned when nothing held
 * names it. The host program is run as a real process for the CLI path.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { applyText } from "../src/engine/mod.ts";
import { sha256Hex } from "../src/declaration/canonical.ts";
import { DeclarationRefused } from "../src/declaration/envelope.ts";
import { writePending } from "../src/store/confirm_records.ts";
import { exists, file, hostOn, runHost, type Scratch, scratch } from "./_helpers.ts";

const BYTES = new Uint8Array(300_000).map((_, i) => (i * 31 + 7) & 0xff);

function byRef(id: string, path: string, sha256: string, size: number): Record<string, unknown> {
  return {
    type: "file",
    id,
    path,
    contentSha256: sha256,
    size,
    mode: "0640",
    owner: "root",
    group: "root",
  };
}

/** A declaration file with a blobs/ directory beside it holding `blobs`. */
async function withBlobs(
  s: Scratch,
  resources: unknown[],
  blobs: Record<string, Uint8Array>,
): Promise<string> {
  const path = await s.declaration(resources);
  await Deno.mkdir(posix.join(s.dir, "blobs"), { recursive: true });
  for (const [name, bytes] of Object.entries(blobs)) {
    await Deno.writeFile(posix.join(s.dir, "blobs", name), bytes);
  }
  return path;
}

const applyFile = async (s: Scratch, path: string) => {
  using host = await hostOn(s);
  return await applyText(host, await Deno.readFile(path), { source: "file", origin: path });
};

Deno.test("a file by reference is fetched from blobs/ beside its declaration, verified and cached", async () => {
  await using s = await scratch();
  const sha = await sha256Hex(BYTES);
  const target = `${s.root}/big.bin`;
  const path = await withBlobs(s, [byRef("big", target, sha, BYTES.length)], { [sha]: BYTES });
  // The real program, as `apply FILE` runs.
  const run = await runHost(["apply", "--json", path], { env: s.env });
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(await Deno.readFile(target), BYTES);
  assert.equal(((await Deno.stat(target)).mode ?? 0) & 0o777, 0o640);
  assert.deepEqual(await Deno.readFile(`${s.stateDir}/content/${sha}`), BYTES, "cached by digest");
  assert.equal(((await Deno.stat(`${s.stateDir}/content`)).mode ?? 0) & 0o777, 0o700);

  // Converged: the check hashes the file and needs no source at all.
  await Deno.remove(`${s.dir}/blobs`, { recursive: true });
  const again = await applyFile(s, path);
  assert.equal(again.outcome, "converged");
  assert.equal(again.counts.unchanged, 1);
});

Deno.test("a second apply needing the same content uses the cache, not the source", async () => {
  await using s = await scratch();
  const sha = await sha256Hex(BYTES);
  const first = await withBlobs(s, [byRef("a", `${s.root}/a.bin`, sha, BYTES.length)], {
    [sha]: BYTES,
  });
  assert.equal((await applyFile(s, first)).outcome, "converged");
  // The source is gone; the file is edited on the machine and a second path needs it too.
  await Deno.remove(`${s.dir}/blobs`, { recursive: true });
  await Deno.writeTextFile(`${s.root}/a.bin`, "edited\n");
  const second = await s.declaration([
    byRef("a", `${s.root}/a.bin`, sha, BYTES.length),
    byRef("b", `${s.root}/b.bin`, sha, BYTES.length),
  ]);
  const report = await applyFile(s, second);
  assert.equal(report.outcome, "converged", report.error);
  assert.deepEqual(await Deno.readFile(`${s.root}/a.bin`), BYTES);
  assert.deepEqual(await Deno.readFile(`${s.root}/b.bin`), BYTES);
});

Deno.test("content whose digest is not the declared one is refused, naming the file; nothing written or cached", async () => {
  await using s = await scratch();
  const sha = await sha256Hex(BYTES);
  const tampered = BYTES.slice();
  tampered[1000] ^= 1;
  const target = `${s.root}/conf.bin`;
  const path = await withBlobs(s, [byRef("conf", target, sha, BYTES.length)], {
    [sha]: tampered,
  });
  const report = await applyFile(s, path);
  assert.equal(report.outcome, "failed");
  assert.match(
    report.error!,
    /file "conf" failed: the content of .*\/conf\.bin from blobs\/ beside .* is not what was declared: its sha256 is [0-9a-f]{64}, the declaration names/,
  );
  assert.equal(await exists(target), false);
  assert.equal(await exists(`${s.stateDir}/content/${sha}`), false);

  // Of another size: refused without reading it.
  await Deno.writeFile(`${s.dir}/blobs/${sha}`, BYTES.subarray(1));
  const short = await applyFile(s, path);
  assert.match(short.error!, /is not what was declared: not 300000 bytes/);

  // A tampered cache entry is not used: it is dropped and the content fetched again.
  await Deno.writeFile(`${s.dir}/blobs/${sha}`, BYTES);
  await Deno.mkdir(`${s.stateDir}/content`, { recursive: true });
  await Deno.writeFile(`${s.stateDir}/content/${sha}`, tampered);
  const repaired = await applyFile(s, path);
  assert.equal(repaired.outcome, "converged", repaired.error);
  assert.deepEqual(await Deno.readFile(target), BYTES);
  assert.deepEqual(await Deno.readFile(`${s.stateDir}/content/${sha}`), BYTES);
});

Deno.test("content no source holds is refused, naming the file and where it was looked for", async () => {
  await using s = await scratch();
  const sha = "ab".repeat(32);
  const path = await withBlobs(s, [byRef("gone", `${s.root}/gone.bin`, sha, 10)], {});
  const report = await applyFile(s, path);
  assert.equal(report.outcome, "failed");
  assert.match(
    report.error!,
    new RegExp(
      `the content of .*/gone\\.bin \\(sha256 ${sha}, 10 bytes\\) is in none of its sources: blobs/ beside`,
    ),
  );
  assert.equal(await exists(`${s.root}/gone.bin`), false);
  // From standard input there is no blobs/ directory to look in.
  using host = await hostOn(s);
  const stdin = await applyText(host, await Deno.readFile(path), {
    source: "file",
    origin: "stdin",
  });
  assert.match(stdin.error!, /is in none of its sources \(none for this apply\)/);
});

Deno.test("cached content nothing held names any more is pruned after a converged apply", async () => {
  await using s = await scratch();
  const sha = await sha256Hex(BYTES);
  const path = await withBlobs(s, [byRef("a", `${s.root}/a.bin`, sha, BYTES.length)], {
    [sha]: BYTES,
  });
  assert.equal((await applyFile(s, path)).outcome, "converged");
  assert.equal(await exists(`${s.stateDir}/content/${sha}`), true);
  const inline = await s.declaration([file("a", `${s.root}/a.bin`, "inline now\n")]);
  assert.equal((await applyFile(s, inline)).outcome, "converged");
  assert.equal(await exists(`${s.stateDir}/content/${sha}`), false);
});

Deno.test("content the declaration an open confirm window goes back to names is kept by the prune", async () => {
  await using s = await scratch();
  const sha = await sha256Hex(BYTES);
  const resources = [byRef("a", `${s.root}/a.bin`, sha, BYTES.length)];
  const path = await withBlobs(s, resources, { [sha]: BYTES });
  assert.equal((await applyFile(s, path)).outcome, "converged");
  {
    // A window pushed over the link would go back to the declaration by reference.
    using host = await hostOn(s);
    const body = JSON.stringify({ version: 1, resources });
    writePending(host.store, {
      serial: 2,
      digest: "sha256:pushed",
      origin: "mesh.decl.n",
      openedAt: new Date().toISOString(),
      deadline: null,
      restore: { source: "file", origin: path, digest: "sha256:before", body },
      changed: [],
      network: [],
    });
  }
  const inline = await s.declaration([file("a", `${s.root}/a.bin`, "inline now\n")]);
  assert.equal((await applyFile(s, inline)).outcome, "converged");
  assert.equal(await exists(`${s.stateDir}/content/${sha}`), true, "kept for going back");
  {
    using host = await hostOn(s);
    writePending(host.store, undefined);
  }
  const other = await s.declaration([file("a", `${s.root}/a.bin`, "inline again\n")]);
  assert.equal((await applyFile(s, other)).outcome, "converged");
  assert.equal(await exists(`${s.stateDir}/content/${sha}`), false, "the window closed: pruned");
});

Deno.test("a reference is contentSha256 (lowercase hex) with size, instead of inline content", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const refused = async (resource: Record<string, unknown>, message: RegExp) => {
    const text = JSON.stringify({ version: 1, resources: [resource] });
    await assert.rejects(
      applyText(host, text, { source: "file", origin: "test" }),
      (error: unknown) => error instanceof DeclarationRefused && message.test(error.message),
    );
  };
  const sha = "0".repeat(64);
  const base = byRef("x", `${s.root}/x`, sha, 1);
  await refused({ ...base, content: "x" }, /exactly one of content/);
  await refused({ ...base, size: undefined }, /size goes with contentSha256/);
  await refused({ ...file("x", `${s.root}/x`, "x"), size: 1 }, /size goes with contentSha256/);
  await refused({ ...base, contentSha256: "A".repeat(64) }, /not a SHA-256 in lowercase hex/);
  await refused({ ...base, size: -1 }, /size/);
  await refused({ ...base, size: 2 ** 40 }, /over the limit of \d+ bytes per file by reference/);
});
