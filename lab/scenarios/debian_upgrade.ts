import type { Scenario } from "../lib/scenario.ts";
import { APT, upgradeSteps } from "./_by_package.ts";

/** A declaration upgrades the host with apt; it exits 0 and the launcher starts the new version. */
export const scenario: Scenario = {
  name: "debian-upgrade",
  summary: "an enrolled Debian node is told over the link to run nox-mesh-host at the next " +
    "version (a build stamped with it, published in the lab's apt repository after the " +
    "machine read its indexes): the host's apt finds it after refreshing them, installs it, " +
    "the host exits 0, the launcher starts the new one without counting a failure, and the " +
    "heartbeat reports the new running version",
  broker: true,
  machines: {
    // Its first start applies the shipped bundle (a container: scenario substrate).
    deb: { flavour: "systemd", hostFrom: "deb", containers: true },
  },
  steps: upgradeSteps(APT),
};
