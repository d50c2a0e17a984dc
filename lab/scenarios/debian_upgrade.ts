import { assertFile, assertPackage, run, type Scenario, waitFor } from "../lib/scenario.ts";
import { debFileName } from "../lib/host_builds.ts";
import {
  assertApplies,
  assertRunningVersion,
  declare,
  enrol,
  mark,
  meshUp,
} from "../mesh_steps/link_steps.ts";
import {
  assertLaunched,
  assertServiceSaid,
  assertUnitProperty,
  CURRENT,
  debAt,
  NEXT,
  publishHost,
  STATE,
  unmaskPodman,
} from "./_ship.ts";

let declaredAt = 0;

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
  steps: [
    run("deb", ["apt-get", "-q", "update"]),
    run("deb", ["apt-get", "-q", "-y", "install", "nox-mesh-host"]),
    meshUp(),
    enrol("deb", "deb"),
    unmaskPodman("deb"),
    run("deb", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    waitFor(assertFile("deb", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    waitFor(assertRunningVersion("deb", CURRENT), 60),
    publishHost("next", "apt"),
    mark((ms) => declaredAt = ms, "note when the upgrade is declared"),
    declare("deb", debAt(NEXT)),
    waitFor(assertPackage("deb", "nox-mesh-host", { version: `${NEXT}-1` }), 120),
    waitFor(assertRunningVersion("deb", NEXT, () => declaredAt), 90),
    waitFor(assertFile("deb", `${STATE}/known-good`, { content: `${NEXT}\n` }), 60),
    // The old host reported the apply that installed the new version before it exited.
    waitFor(assertApplies("deb", [1]), 30),
    assertServiceSaid("deb", "run: self-upgrade:", 1),
    assertServiceSaid(
      "deb",
      "exited 0: it upgraded itself; starting the new version (not counted)",
      1,
    ),
    assertServiceSaid("deb", "failed (exit", 0),
    assertFile("deb", `${STATE}/failures`, { absent: true }),
    // The launcher, not systemd, started the new version: the unit never restarted.
    assertUnitProperty("deb", "nox-mesh-host", "NRestarts", "0"),
    assertLaunched("deb"),
    // Kept: the .deb of the running version, and of the known-good one at its start.
    assertFile("deb", `${STATE}/rollback/${NEXT}/${debFileName("next")}`, { type: "file" }),
    assertFile("deb", `${STATE}/rollback/${CURRENT}/${debFileName("current")}`, {
      type: "file",
    }),
  ],
};
