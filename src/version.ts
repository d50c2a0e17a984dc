/** The version of this host, compiled in. The heartbeat reports this, the running one. */
export const VERSION = "0.1.0";

/** The program's name, as installed and as a service. */
export const PROGRAM = "nox-mesh-host";
