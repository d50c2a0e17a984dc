/** The version of this host, compiled in. The heartbeat reports this, the running one. */
export const VERSION = "0.1.0";

/** The program's name, as installed and as a service. */
export const PROGRAM = "nox-mesh-host";

/**
 * How this copy was built: "compiled" (deno compile), "bundled" (deno bundle + the system
 * deno) or "source" (run from a checkout). packaging/build.ts stamps it, like VERSION.
 */
export const FORM: "compiled" | "bundled" | "source" = "source";

/** The commit this copy was built from (stamped by packaging/build.ts), or "unknown". */
export const COMMIT = "unknown";

/**
 * The Deno version this build is tested on (packaging/tarball/runtime.json pins it, and the
 * build stamps it here like VERSION); null when run from a checkout, where any runtime goes.
 * A built host refuses to start on another (runtimeProblem): every package carries exactly
 * this runtime and its program runs it, so only a bundle started by hand on another deno
 * meets the refusal.
 */
export const RUNTIME_TESTED: string | null = null;

/** The version of the Deno runtime this process runs on (version --json, heartbeat, inventory). */
export function runtimeVersion(): string {
  return Deno.version.deno;
}

/**
 * Why this process must not run on `running`, or undefined when it may: a built host runs
 * only on the Deno version it was tested on (any build of it: "2.9.6" accepts "2.9.6" and
 * "2.9.6.1", as apk's `deno~2.9.6` would, never 2.9.7 or 2.10.0).
 */
export function runtimeProblem(
  running: string = runtimeVersion(),
  tested: string | null = RUNTIME_TESTED,
): string | undefined {
  if (tested === null || running === tested || running.startsWith(`${tested}.`)) return undefined;
  return `${PROGRAM} ${VERSION} is tested on Deno ${tested} and refuses to run on Deno ${running}: ` +
    `start it with the program its package installs (${PROGRAM}, which runs the Deno ${tested} ` +
    `the package carries), or install a ${PROGRAM} tested on Deno ${running}`;
}
