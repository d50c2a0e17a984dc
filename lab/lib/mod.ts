// The lab library: raise machines (systemd, OpenRC, plain), a TLS NATS broker, and
// drive them from tests or scenarios. See lab/README.md.
export { Lab, type LabOptions, type MachineSpec, type ProbeResult } from "./lab.ts";
export { type ExecOptions, Machine, MACHINE_DENO, type PlacedFile } from "./machine.ts";
export { Broker, BROKER_NAME, BROKER_PORT, type BrokerOptions } from "./lab_broker.ts";
export { ensureBase, type Flavour, RECIPES } from "./base.ts";
export { LabError, type LabErrorCode } from "./errors.ts";
export {
  DEB_INSTALL,
  HOST_INSTALLS,
  HOST_PATH,
  hostCommand,
  hostFlags,
  type HostInstall,
  hostInstall,
  PACMAN_INSTALL,
  TARBALL_INSTALL,
} from "./host.ts";
export { HOST_VERSIONS, type HostBuild, pacmanVersion } from "./host_builds.ts";
export { TEST_PACKAGE } from "./repo.ts";
export { cleanStale, isClean, type Leftovers, leftovers } from "./clean.ts";
export { bundle, CHECKOUT } from "./bundle.ts";
export type { RunResult } from "./_process.ts";

import type { Lab } from "./lab.ts";
import type { Machine } from "./machine.ts";

/** Raises a machine in a lab (same as `lab.raise`). */
export function raiseMachine(lab: Lab, spec: Parameters<Lab["raise"]>[0]): Promise<Machine> {
  return lab.raise(spec);
}

/** Cuts a machine's link to the lab switch. */
export function cutLink(machine: Machine): Promise<void> {
  return machine.cutLink();
}

/** Restores a cut link. */
export function restoreLink(machine: Machine): Promise<void> {
  return machine.restoreLink();
}
