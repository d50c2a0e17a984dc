import { assertFile, assertPackage, run, type Scenario, waitFor } from "../lib/scenario.ts";
import { ARCH_LIKE_CONFIG } from "../lib/host.ts";
import { packageFileName } from "../lib/host_builds.ts";
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
  hostAt,
  NEXT,
  publishHost,
  STATE,
  unmaskPodman,
} from "./_ship.ts";

let declaredAt = 0;

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
      containers: true,
      files: { [ARCH_LIKE_CONFIG.path]: ARCH_LIKE_CONFIG.text },
    },
  },
  steps: [
    run("arch", ["pacman", "-Sy", "--noconfirm", "--noprogressbar", "nox-mesh-host"]),
    meshUp(),
    enrol("arch", "arch"),
    unmaskPodman("arch"),
    run("arch", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    waitFor(assertFile("arch", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 60),
    waitFor(assertRunningVersion("arch", CURRENT), 60),
    publishHost("next"),
    mark((ms) => declaredAt = ms, "note when the upgrade is declared"),
    declare("arch", hostAt(NEXT)),
    waitFor(assertPackage("arch", "nox-mesh-host", { version: `${NEXT}-1` }), 90),
    waitFor(assertRunningVersion("arch", NEXT, () => declaredAt), 90),
    waitFor(assertFile("arch", `${STATE}/known-good`, { content: `${NEXT}\n` }), 60),
    // The old host reported the apply that installed the new version before it exited.
    waitFor(assertApplies("arch", [1]), 30),
    assertServiceSaid("arch", "run: self-upgrade:", 1),
    assertServiceSaid(
      "arch",
      "exited 0: it upgraded itself; starting the new version (not counted)",
      1,
    ),
    assertServiceSaid("arch", "failed (exit", 0),
    assertFile("arch", `${STATE}/failures`, { absent: true }),
    // The launcher, not systemd, started the new version: the unit never restarted.
    assertUnitProperty("arch", "nox-mesh-host", "NRestarts", "0"),
    assertLaunched("arch"),
    // Kept: the package file of the running version, and of the known-good one at its start.
    assertFile("arch", `${STATE}/rollback/${NEXT}/${packageFileName("next")}`, {
      type: "file",
    }),
    assertFile("arch", `${STATE}/rollback/${CURRENT}/${packageFileName("current")}`, {
      type: "file",
    }),
  ],
};
