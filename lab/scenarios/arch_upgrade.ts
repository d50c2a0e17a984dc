import type { Scenario } from "../lib/scenario.ts";
import { ARCH_LIKE_CONFIG } from "../lib/host.ts";
import { PACMAN, upgradeSteps } from "./_by_package.ts";

/** A declaration upgrades the host; it exits 0 and the launcher starts the new version. */
export const scenario: Scenario = {
  name: "arch-upgrade",
  summary: "an enrolled node is told over the link to run nox-mesh-host at the next version " +
    "(a build stamped with it); after the apply the host exits 0, the launcher starts the new " +
    "one without counting a failure, and the heartbeat reports the new running version",
  broker: true,
  machines: {
    // Its first start applies the shipped bundle (a container: scenario substrate).
    arch: {
      flavour: "systemd",
      hostFrom: "pacman",
      containers: true,
      files: { [ARCH_LIKE_CONFIG.path]: ARCH_LIKE_CONFIG.text },
    },
  },
  steps: upgradeSteps(PACMAN),
};
