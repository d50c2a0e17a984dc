/**
 * Two passes of the file system adapter at once (the service's apply and its metrics file,
 * which ends its own pass), in a process whose permission set does not let it read `/` or
 * /tmp, as the packaged host's does not: the directories above its reading roots are looked
 * at with stat(1), and a release() by one pass must not make the other's walk look at them
 * with Deno (which the set refuses: "Requires read access to "/""). Found by the lab's
 * hold-rescue scenario, where a rescue's apply failed one file in two runs out of five.
 */
import assert from "node:assert/strict";

Deno.test("posix-fs: a pass's release() does not pull the directories above the reading roots from under another pass's walk (narrow permission set, as a process)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "nox-overlap-" });
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        `--allow-read=${dir},/etc/passwd,/etc/group`,
        `--allow-write=${dir}`,
        "--allow-run=stat",
        "--allow-sys=uid,gid",
        "--allow-env",
        new URL("./_fs_overlap.ts", import.meta.url).pathname,
        dir,
        "200",
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
    assert.equal(got.looks, 200 * 24);
    assert.equal(got.writes, 200);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
