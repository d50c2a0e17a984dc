/**
 * Run by tests/fs_overlap_test.ts as its own process under a narrow permission set (it may
 * read and write only DIR, and run `stat` and the host's own program as another user): two
 * passes of one file system adapter at once,
 * as the service has them (an apply's reads, and the metrics file's write, which ends its
 * own pass with `release()`). Prints one line of JSON: how many looks and writes were
 * done, and the first error of each, if any.
 */
import { posixFileSystem } from "../os/posix-fs/mod.ts";

const [dir, roundsText, readIn] = Deno.args;
const rounds = Number(roundsText);
const fs = posixFileSystem();
// The apply's files: in DIR (root's: the host reads them itself), or in a directory of a
// user's (the test made it and the files: the host reads them as that user, a child each).
const names = Array.from({ length: 24 }, (_, i) => `${readIn ?? dir}/f${i}`);
if (readIn === undefined) { for (const name of names) await Deno.writeTextFile(name, "x\n"); }

let looks = 0;
let writes = 0;
let lookError: string | null = null;
let writeError: string | null = null;

async function applyLike(): Promise<void> {
  for (let r = 0; r < rounds && lookError === null; r++) {
    try {
      await Promise.all(names.map(async (name) => {
        if ((await fs.lstat(name))?.kind !== "file") throw new Error(`${name}: no file seen`);
        looks++;
      }));
    } catch (error) {
      lookError = String(error);
    }
    await fs.release?.();
  }
}

async function metricsLike(): Promise<void> {
  const bytes = new TextEncoder().encode("nox_mesh_host_up 1\n");
  for (let r = 0; r < rounds && writeError === null; r++) {
    try {
      await fs.writeFileAtomic(`${dir}/metrics.prom`, bytes, { mode: 0o644, uid: 0, gid: 0 });
      writes++;
    } catch (error) {
      writeError = String(error);
    } finally {
      await fs.release?.();
    }
  }
}

await Promise.all([applyLike(), metricsLike()]);
console.log(JSON.stringify({ looks, writes, lookError, writeError }));
