/** A local user who is not root, for the tests that act as one. */

/** nobody, the local user the race and trust tests play. */
export const NOBODY = 65534;

/** `setpriv` running a shell snippet (`sh -c`, `args` as $1…) as nobody:nogroup. */
function nobodyShell(flags: string, script: string, args: string[], out: "piped" | "null") {
  return new Deno.Command("setpriv", {
    args: [
      `--reuid=${NOBODY}`,
      `--regid=${NOBODY}`,
      "--clear-groups",
      "sh",
      flags,
      script,
      "sh",
      ...args,
    ],
    stdout: out,
    stderr: out,
  }).output();
}

/** Runs a shell snippet (`sh -eu -c`, `args` as $1…) as nobody:nogroup; throws with its stderr. */
export async function asNobody(script: string, ...args: string[]): Promise<void> {
  const out = await nobodyShell("-euc", script, args, "piped");
  if (out.code !== 0) {
    throw new Error(
      `as nobody, \`${script}\` exited ${out.code}: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
}

/** Runs a shell snippet (`sh -c`, `args` as $1…) as nobody:nogroup; its exit code. */
export async function nobodyExit(script: string, ...args: string[]): Promise<number> {
  return (await nobodyShell("-c", script, args, "null")).code;
}
