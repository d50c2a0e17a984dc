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
