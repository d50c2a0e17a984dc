/**
 * A real race for the tests: a process of nobody's (setpriv) swapping two names with
 * renameat2(RENAME_EXCHANGE) as fast as it can (tests/fixtures/flip_names.ts), while the
 * host works on a path through them.
 */

import { NOBODY } from "./_nobody.ts";

export { asNobody, NOBODY } from "./_nobody.ts";

const FLIPPER = new URL("./fixtures/flip_names.ts", import.meta.url).pathname;

/** A running flipper: nobody swapping `a` and `b` (renameat2 RENAME_EXCHANGE). */
export interface Flipper extends AsyncDisposable {
  /** How many swaps it has made so far. */
  flips(): Promise<number>;
  /** What it reported (its count, or why it stopped). */
  report(): Promise<string>;
}

/**
 * Start nobody's flipper over `a` and `b` (both in a directory nobody owns), for at most
 * `seconds`; `asRoot`: root's instead (a swap only root can make, in root's directory).
 */
export async function flipping(
  work: string,
  a: string,
  b: string,
  seconds: number,
  { asRoot = false }: { asRoot?: boolean } = {},
): Promise<Flipper> {
  const report = `${work}/flips`;
  const denoDir = `${work}/deno-dir`;
  // A copy nobody can read wherever the checkout lies (a home directory may be 0700).
  const script = `${work}/flip_names.ts`;
  await Deno.copyFile(FLIPPER, script);
  await Deno.chmod(script, 0o644);
  await Deno.mkdir(denoDir, { recursive: true });
  await Deno.chown(denoDir, NOBODY, NOBODY);
  await Deno.writeTextFile(report, "");
  await Deno.chown(report, NOBODY, NOBODY);
  const as = asRoot ? [] : [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"];
  const child = new Deno.Command("setpriv", {
    args: [
      ...as,
      Deno.execPath(),
      "run",
      "--quiet",
      "--no-config",
      "--allow-ffi",
      `--allow-write=${report}`,
      script,
      a,
      b,
      String(seconds),
      report,
    ],
    env: { DENO_DIR: denoDir, HOME: work, NO_COLOR: "1" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let exited = false;
  const status = child.status.finally(() => exited = true);
  const stop = async () => {
    try {
      child.kill("SIGKILL");
    } catch { /* already exited */ }
    await status;
  };
  // The flipper rewrites its report in place (truncated, then written; it may be
  // descheduled in between on a loaded machine): a read between the two sees it empty,
  // which is not a count of 0. Read again, a moment later, until it is not.
  const counts = async () => {
    for (let i = 0; i < 1000; i++) {
      const text = await Deno.readTextFile(report);
      if (text !== "") return text;
      await new Promise((r) => setTimeout(r, 10));
    }
    return "";
  };
  const flips = async () => Number(((await counts()).split(" ")[0]) || 0);
  // Wait until it runs (it writes its first count), so no apply happens before the swaps.
  for (let i = 0; Deno.readTextFileSync(report) === ""; i++) {
    if (exited || i > 600) {
      await stop();
      const why = new TextDecoder().decode(await new Response(child.stderr).bytes());
      throw new Error(`the flipper did not start: ${why || "nothing said in 60 s"}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    flips,
    report: counts,
    async [Symbol.asyncDispose]() {
      await stop();
      await child.stderr.cancel();
    },
  };
}
