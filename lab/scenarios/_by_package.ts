// The upgrade and rollback scenarios, once for every package kind the lab serves (pacman's
// on the Arch-like machines, apt's on the Debian ones): what differs is how the host is
// installed, declared and kept, and how long apt takes; the steps are the same.
import { assertFile, assertPackage, run, type Step, waitFor } from "../lib/scenario.ts";
import { fail } from "../lib/_step.ts";
import {
  CARRIED_RUNTIME,
  carriedRuntimeDigest,
  debFileName,
  type HostBuild,
  packageFileName,
} from "../lib/host_builds.ts";
import {
  assertApplies,
  assertLastApply,
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
  BROKEN,
  CURRENT,
  debAt,
  hostAt,
  NEXT,
  pause,
  publishHost,
  STATE,
  unmaskPodman,
} from "./_ship.ts";

/** One package kind, as the upgrade and rollback scenarios use it. */
export interface PackageKind {
  /** The machine's name in the scenario. */
  machine: string;
  /** Which of the lab's repositories serves it. */
  kind: "pacman" | "apt";
  /** What the package is called in step titles. */
  noun: string;
  /** Installs the current version from the lab's repository. */
  install: Step[];
  /** A declaration of the host at `version`. */
  at(version: string): Record<string, unknown>;
  /** The package file of a build, as the launcher keeps it. */
  fileName(which: HostBuild): string;
  /** Seconds to wait for the first known-good, and for the package to change (apt is slower). */
  waits: { started: number; installed: number };
}

/** pacman, on an Arch-like machine named `arch`. */
export const PACMAN: PackageKind = {
  machine: "arch",
  kind: "pacman",
  noun: "package",
  install: [run("arch", ["pacman", "-Sy", "--noconfirm", "--noprogressbar", "nox-mesh-host"])],
  at: hostAt,
  fileName: packageFileName,
  waits: { started: 60, installed: 90 },
};

/** apt, on a Debian machine named `deb`. */
export const APT: PackageKind = {
  machine: "deb",
  kind: "apt",
  noun: ".deb",
  install: [
    run("deb", ["apt-get", "-q", "update"]),
    run("deb", ["apt-get", "-q", "-y", "install", "nox-mesh-host"]),
  ],
  at: debAt,
  fileName: debFileName,
  waits: { started: 90, installed: 120 },
};

/** Where the launcher keeps the package file of a version. */
export function kept(k: PackageKind, which: HostBuild, version: string): string {
  return `${STATE}/rollback/${version}/${k.fileName(which)}`;
}

/** Installed, enrolled, started by its unit, recorded known-good. */
export function startedKnownGood(k: PackageKind): Step[] {
  const m = k.machine;
  return [
    ...k.install,
    meshUp(),
    enrol(m, m),
    unmaskPodman(m),
    run(m, ["systemctl", "enable", "--now", "nox-mesh-host"]),
    waitFor(assertFile(m, `${STATE}/known-good`, { content: `${CURRENT}\n` }), k.waits.started),
  ];
}

/** A declaration upgrades the host; it exits 0 and the launcher starts the new version. */
export function upgradeSteps(k: PackageKind): Step[] {
  const m = k.machine;
  let declaredAt = 0;
  return [
    ...startedKnownGood(k),
    waitFor(assertRunningVersion(m, CURRENT), 60),
    publishHost("next", k.kind),
    mark((ms) => declaredAt = ms, "note when the upgrade is declared"),
    declare(m, k.at(NEXT)),
    waitFor(assertPackage(m, "nox-mesh-host", { version: `${NEXT}-1` }), k.waits.installed),
    waitFor(assertRunningVersion(m, NEXT, () => declaredAt), 90),
    waitFor(assertFile(m, `${STATE}/known-good`, { content: `${NEXT}\n` }), 60),
    // The old host reported the apply that installed the new version before it exited.
    waitFor(assertApplies(m, [1]), 30),
    assertServiceSaid(m, "run: self-upgrade:", 1),
    assertServiceSaid(m, "exited 0: it upgraded itself; starting the new version (not counted)", 1),
    assertServiceSaid(m, "failed (exit", 0),
    assertFile(m, `${STATE}/failures`, { absent: true }),
    // The launcher, not systemd, started the new version: the unit never restarted.
    assertUnitProperty(m, "nox-mesh-host", "NRestarts", "0"),
    assertLaunched(m),
    // Kept: the package file of the running version, and of the known-good one at its start.
    assertFile(m, kept(k, "next", NEXT), { type: "file" }),
    assertFile(m, kept(k, "current", CURRENT), { type: "file" }),
  ];
}

/**
 * The rollback of a broken upgrade, up to the node refusing to install the broken version
 * again and the control plane pinning the known-good one. `between` runs once the rollback
 * is recorded (what one package kind checks of its own).
 */
export function brokenRolledBack(k: PackageKind, between: Step[] = []): Step[] {
  const m = k.machine;
  const runtime = { knownGood: "" };
  let upgradedAt = 0;
  return [
    runtimesDiffer(k, runtime),
    runtimeIsKnownGood(k, runtime),
    // A bad release: the host installs it, exits 0, and the new version crashes on start.
    publishHost("broken", k.kind),
    mark((ms) => upgradedAt = ms, "note when the upgrade is declared"),
    declare(m, k.at(BROKEN)),
    waitFor(assertPackage(m, "nox-mesh-host", { version: `${BROKEN}-1` }), k.waits.installed),
    waitFor(
      assertServiceSaid(
        m,
        `rolling back to known-good ${CURRENT} from ${kept(k, "current", CURRENT)}`,
      ),
      k.waits.installed,
    ),
    waitFor(assertPackage(m, "nox-mesh-host", { version: `${CURRENT}-1` }), 60),
    waitFor(assertRunningVersion(m, CURRENT, () => upgradedAt), 60),
    // The runtime is the package's: rolled back with it (checked once the host runs again:
    // the package manager names the version while it may still be writing its files).
    runtimeIsKnownGood(k, runtime),
    waitFor(assertFile(m, `${STATE}/failures`, { absent: true }), 30),
    assertFile(m, `${STATE}/rolled-back`, { content: `3 ${CURRENT}\n` }),
    assertFile(m, `${STATE}/rolled-back-from`, { content: `${BROKEN}\n` }),
    assertServiceSaid(m, "(lab: deliberately broken build): crashing on start", 3),
    assertServiceSaid(m, "failed (exit 70)", 3),
    ...between,
    // The declaration still names the broken version: the rolled-back host refuses to
    // install it again (no loop), and its report says why.
    waitFor(
      assertLastApply(m, 1, "failed", "failed to start on this machine and the launcher"),
      60,
    ),
    pause(6, "time for a loop to show, if there were one"),
    assertServiceSaid(m, "rolling back to known-good", 1),
    assertPackage(m, "nox-mesh-host", { version: `${CURRENT}-1` }),
    // The control plane, seeing the node's report, pins the known-good version.
    declare(m, k.at(CURRENT)),
    waitFor(assertApplies(m, [1, 2]), 30),
  ];
}

/** The broken build's package carries another runtime file than the known-good one's. */
function runtimesDiffer(k: PackageKind, runtime: { knownGood: string }): Step {
  return {
    title: `the broken ${k.noun} carries a runtime file of its own at ${CARRIED_RUNTIME}`,
    timeoutS: 300,
    async run(ctx) {
      const log = (line: string) => ctx.lab.log(line);
      runtime.knownGood = await carriedRuntimeDigest("current", log, k.kind);
      const broken = await carriedRuntimeDigest("broken", log, k.kind);
      if (broken === runtime.knownGood) fail("two different runtime files", `both ${broken}`);
    },
  };
}

/** The runtime file installed on the machine is the one the known-good package carries. */
function runtimeIsKnownGood(k: PackageKind, runtime: { knownGood: string }): Step {
  return {
    title: `assert on ${k.machine}: ${CARRIED_RUNTIME} is the known-good ${k.noun}'s`,
    async run(ctx) {
      const r = await ctx.machine(k.machine).exec(["sha256sum", CARRIED_RUNTIME], {
        check: true,
      });
      const seen = r.stdout.split(" ")[0];
      if (seen !== runtime.knownGood) fail(`the known-good runtime ${runtime.knownGood}`, seen);
    },
  };
}
