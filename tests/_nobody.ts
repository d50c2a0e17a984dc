/** A local user who is not root, for the tests that act as one. */

/** nobody, the local user the race and trust tests play. */
export const NOBODY = 65534;

/** Runs a shell snippet (`sh -eu -c`, `args` as $1…) as nobody:nogroup; throws with its stderr. */
export async function asNobody(script: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("setpriv", {
    args: [
      `--reuid=${NOBODY}`,
      `--regid=${NOBODY}`,
      "--clear-groups",
      "sh",
      "-eu",
      "-c",
      script,
      "sh",
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (out.code !== 0) {
    throw new Error(
      `as nobody, \`${script}\` exited ${out.code}: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
}
