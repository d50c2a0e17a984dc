/**
 * Two passes of the file system adapter at once (the service's apply and its metrics file,
 * which ends its own pass), in a process whose permission set does not let it read `/` or
 * /tmp, as the packaged host's does not: the directories above its reading roots are looked
 * at with stat(1), and a release() by one pass must not make the other's walk look at them
 * with Deno (which the set refuses: "Requires read access to "/""). Found by the lab's
 * hold-rescue scenario, where a rescue's apply failed one file in two runs out of five.
 */
import assert from "node:assert/strict";
import { NOBODY } from "./_nobody.ts";

/** Runs tests/_fs_overlap.ts under the narrow set; returns what it printed. */
async function overlap(dir: string, rounds: number, readIn?: string) {
  const shim = new URL("../packaging/dev/nox-mesh-host", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      `--allow-read=${dir},/etc/passwd,/etc/group`,
      `--allow-write=${dir}`,
      `--allow-run=stat,${shim}`,
      "--allow-sys=uid,gid",
      "--allow-env",
      new URL("./_fs_overlap.ts", import.meta.url).pathname,
      dir,
      String(rounds),
      ...(readIn === undefined ? [] : [readIn]),
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, stderr);
  const got = JSON.parse(new TextDecoder().decode(out.stdout));
  assert.deepEqual(
    { lookError: got.lookError, writeError: got.writeError },
    { lookError: null, writeError: null },
  );
  assert.equal(got.looks, rounds * 24);
  assert.equal(got.writes, rounds);
}

Deno.test("posix-fs: a pass's release() does not pull the directories above the reading roots from under another pass's walk (narrow permission set, as a process)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "nox-overlap-" });
  try {
    await overlap(dir, 200);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("posix-fs: a pass's release() does not end the child another pass is acting through as a user (narrow permission set, as a process)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "nox-overlap-" });
  try {
    await Deno.chmod(dir, 0o755);
    const home = `${dir}/home`;
    await Deno.mkdir(home);
    for (let i = 0; i < 24; i++) await Deno.writeTextFile(`${home}/f${i}`, "x\n");
    await new Deno.Command("chown", { args: ["-R", `${NOBODY}:${NOBODY}`, home] }).output();
    await overlap(dir, 30, home);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
