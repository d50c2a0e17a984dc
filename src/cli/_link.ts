/**
 * What the commands that use the link load when they run (`run`, `enrol`, `status`, `rescue`):
 * the service loop, enrolment, the link's state, and with them the NATS client, the
 * keys and node:crypto. `version`, `apply` and `plan` never load it (main.ts,
 * tests/program_parts_test.ts).
 */
export { runService, wantsRestart } from "../run/loop.ts";
/**
 * The transport `run` reaches the control plane over: the NATS link. Another transport is
 * its own folder and this line (docs/contributing.md, "Add a transport").
 */
export { natsUplink as openUplink } from "../link/nats_uplink.ts";
export { enrol } from "../link/enrol.ts";
export { brokerList, readIdentity } from "../link/identity.ts";
export { linkRows, linkStatus } from "./_link_status.ts";
export { acquireRunLock } from "../lock.ts";
export { journalIsOutput, logLine } from "../log.ts";
