/**
 * A script of the test's own, run by this Deno with the repository's configuration under
 * strace (following its threads and children, descriptors shown with their paths), only the
 * system calls `calls`: the trace's lines. Fails the test when the script fails.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";

const REPO = new URL("..", import.meta.url).pathname;

/** Absolute path of `relative` in the repository, as a JSON string for a script's import. */
export const repoModule = (relative: string) => JSON.stringify(posix.join(REPO, relative));

export async function straced(
  dir: string,
  script: string,
  calls: string,
  args: string[],
): Promise<string[]> {
  const file = posix.join(dir, "traced.ts");
  await Deno.writeTextFile(file, script);
  const trace = posix.join(dir, "trace");
  const out = await new Deno.Command("strace", {
    args: [
      "-f",
      "-y",
      "-o",
      trace,
      "-e",
      `trace=${calls}`,
      Deno.execPath(),
      "run",
      "-A",
      "--quiet",
      "--config",
      posix.join(REPO, "deno.json"),
      file,
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return (await Deno.readTextFile(trace)).split("\n");
}
