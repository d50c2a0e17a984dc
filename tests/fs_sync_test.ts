/**
 * How root's writes reach the disk (os/posix-fs, issue 37 item 5), seen by strace in a real
 * process: a write made with `deferSync` is not fsynced by itself when a `syncWrites` pass
 * ran after it and before its rename (one `sync -f` for all of them), and IS fsynced before
 * its rename when no such pass covered it; a plain write fsyncs its file, as before.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { scratch } from "./_helpers.ts";
import { repoModule, straced } from "./_strace.ts";

/**
 * Write `count` files into `dir` the way `mode` says, under strace; what it saw: the temporary
 * files fsynced (by name) and the programs run.
 */
async function traced(
  dir: string,
  mode: "synced-together" | "deferred-uncovered" | "plain",
  count = 3,
): Promise<{ fsynced: string[]; ran: string[]; files: string[] }> {
  const script = `
    import { posixFileSystem } from ${repoModule("os/posix-fs/mod.ts")};
    const fs = posixFileSystem();
    const [dir, mode, count] = Deno.args;
    const arrived = Promise.withResolvers();
    let waiting = Number(count);
    const turn = async () => {
      if (--waiting === 0) arrived.resolve();
      await arrived.promise;
      if (mode === "synced-together") await (turn.synced ??= fs.syncWrites());
    };
    await Promise.all(Array.from({ length: Number(count) }, (_, i) =>
      fs.writeFileAtomic(dir + "/f" + i, new TextEncoder().encode("data " + i + "\\n"),
        { mode: 0o644, uid: 0, gid: 0 }, mode === "plain" ? undefined : turn,
        { deferSync: mode !== "plain" })));
    await fs.release();
  `;
  const lines = await straced(dir, script, "fsync,fdatasync,execve", [
    `${dir}/out`,
    mode,
    String(count),
  ]);
  const fsynced = lines.flatMap((l) => {
    const m = /\bf(?:data)?sync\(\d+<([^>]+)>/.exec(l);
    return m ? [m[1]] : [];
  });
  const ran = lines.flatMap((l) => {
    const m = /execve\("([^"]+)"/.exec(l);
    return m && !l.includes("= -1") ? [posix.basename(m[1])] : [];
  });
  const files = [...Deno.readDirSync(`${dir}/out`)].map((e) => e.name).sort();
  return { fsynced, ran, files };
}

const temps = (fsynced: string[]) => fsynced.filter((p) => p.endsWith(".nox-new")).sort();
const expected = (dir: string, count = 3) =>
  Array.from({ length: count }, (_, i) => `${dir}/out/.f${i}.nox-new`).sort();

Deno.test("deferred writes synced together: one sync -f, no fsync of each file, then renamed", async () => {
  await using s = await scratch();
  await Deno.mkdir(`${s.root}/out`);
  const seen = await traced(s.root, "synced-together");
  assert.deepEqual(temps(seen.fsynced), [], `each file fsynced: ${seen.fsynced}`);
  assert.deepEqual(seen.ran.filter((p) => p === "sync"), ["sync"], `ran ${seen.ran}`);
  assert.deepEqual(seen.files, ["f0", "f1", "f2"]);
  for (let i = 0; i < 3; i++) {
    assert.equal(Deno.readTextFileSync(`${s.root}/out/f${i}`), `data ${i}\n`);
  }
});

Deno.test("a deferred write no sync pass covered is fsynced by itself before its rename", async () => {
  await using s = await scratch();
  await Deno.mkdir(`${s.root}/out`);
  const seen = await traced(s.root, "deferred-uncovered");
  assert.deepEqual(temps(seen.fsynced), expected(s.root));
  assert.deepEqual(seen.ran.filter((p) => p === "sync"), [], `ran ${seen.ran}`);
  assert.deepEqual(seen.files, ["f0", "f1", "f2"]);
});

Deno.test("a plain write fsyncs its own file before its rename", async () => {
  await using s = await scratch();
  await Deno.mkdir(`${s.root}/out`);
  const seen = await traced(s.root, "plain");
  assert.deepEqual(temps(seen.fsynced), expected(s.root));
  assert.deepEqual(seen.files, ["f0", "f1", "f2"]);
});
