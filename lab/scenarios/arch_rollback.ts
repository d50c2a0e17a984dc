import {
  assertFile,
  assertPackage,
  assertUnit,
  run,
  type Scenario,
  waitFor,
  writeFile,
} from "../lib/scenario.ts";
import { ARCH_LIKE_CONFIG } from "../lib/host.ts";
import { CARRIED_RUNTIME, carriedRuntimeDigest, packageFileName } from "../lib/host_builds.ts";
import { fail, type Step } from "../lib/_step.ts";
import {
  assertApplies,
  assertHostExited,
  assertLastApply,
  assertRunningVersion,
  declare,
  enrol,
  mark,
  meshUp,
} from "../mesh_steps/link_steps.ts";
import {
  assertFileSays,
  assertServiceSaid,
  assertUnitProperty,
  BROKEN,
  CURRENT,
  hostAt,
  pause,
  publishHost,
  STATE,
  unmaskPodman,
} from "./_ship.ts";

/** Small back-off (launcher/README.md) so that six failed starts take seconds: 2, 3, 3 s. */
const LAUNCH_ENV = "NOX_MESH_HOST_BACKOFF=2\nNOX_MESH_HOST_BACKOFF_MAX=3\n";
const KEPT = `${STATE}/rollback/${CURRENT}/${packageFileName("current")}`;
const HALT = "the machine, not the version, needs a look";
let upgradedAt = 0;
let clearedAt = 0;
/** The sha256 of the runtime the known-good (current) package carries. */
let knownGoodRuntime = "";

/** The broken build's package carries another runtime file than the known-good one's. */
function runtimesDiffer(): Step {
  return {
    title: `the broken package carries a runtime file of its own at ${CARRIED_RUNTIME}`,
    timeoutS: 300,
    async run(ctx) {
      const log = (line: string) => ctx.lab.log(line);
      knownGoodRuntime = await carriedRuntimeDigest("current", log);
      const broken = await carriedRuntimeDigest("broken", log);
      if (broken === knownGoodRuntime) fail("two different runtime files", `both ${broken}`);
    },
  };
}

/** The runtime file installed on `machine` is the one the known-good package carries. */
function runtimeIsKnownGood(machine: string): Step {
  return {
    title: `assert on ${machine}: ${CARRIED_RUNTIME} is the known-good package's`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(["sha256sum", CARRIED_RUNTIME], { check: true });
      const seen = r.stdout.split(" ")[0];
      if (seen !== knownGoodRuntime) fail(`the known-good runtime ${knownGoodRuntime}`, seen);
    },
  };
}

/**
 * A broken upgrade is rolled back once to the known-good version, which then reports
 * again; when the known-good version fails too, the launcher halts and stays halted.
 */
export const scenario: Scenario = {
  name: "arch-rollback",
  summary: "an upgrade to a build that crashes on start (and carries another runtime file) " +
    "fails 3 times; the launcher rolls back once to the kept known-good package, whose runtime " +
    "comes back with it, and the node heartbeats its old version, refusing to " +
    "reinstall the broken one the declaration still names; then the " +
    "known-good version fails too (bad host.json): one more rollback, 3 failures, HALTED, " +
    "and the unit stays stopped (exit 78) until a person fixes the cause and removes halted",
  broker: true,
  machines: {
    // Its first start applies the shipped bundle (a container: scenario substrate).
    arch: {
      flavour: "systemd",
      containers: true,
      files: {
        [ARCH_LIKE_CONFIG.path]: ARCH_LIKE_CONFIG.text,
        "/etc/mesh-host/launch.env": LAUNCH_ENV,
      },
    },
  },
  steps: [
    run("arch", ["pacman", "-Sy", "--noconfirm", "--noprogressbar", "nox-mesh-host"]),
    meshUp(),
    enrol("arch", "arch"),
    unmaskPodman("arch"),
    run("arch", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    waitFor(assertFile("arch", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 60),
    assertFile("arch", KEPT, { type: "file" }),
    runtimesDiffer(),
    runtimeIsKnownGood("arch"),

    // A bad release: the host installs it, exits 0, and the new version crashes on start.
    publishHost("broken"),
    mark((ms) => upgradedAt = ms, "note when the upgrade is declared"),
    declare("arch", hostAt(BROKEN)),
    waitFor(assertPackage("arch", "nox-mesh-host", { version: `${BROKEN}-1` }), 90),
    waitFor(assertServiceSaid("arch", `rolling back to known-good ${CURRENT} from ${KEPT}`), 90),
    waitFor(assertPackage("arch", "nox-mesh-host", { version: `${CURRENT}-1` }), 60),
    waitFor(assertRunningVersion("arch", CURRENT, () => upgradedAt), 60),
    // The runtime is the package's: rolled back with it (checked once the host runs again:
    // pacman -Q names the version while pacman may still be writing its files).
    runtimeIsKnownGood("arch"),
    waitFor(assertFile("arch", `${STATE}/failures`, { absent: true }), 30),
    assertFile("arch", `${STATE}/rolled-back`, { content: `3 ${CURRENT}\n` }),
    assertFile("arch", `${STATE}/rolled-back-from`, { content: `${BROKEN}\n` }),
    assertServiceSaid("arch", "(lab: deliberately broken build): crashing on start", 3),
    assertServiceSaid("arch", "failed (exit 70)", 3),
    // The declaration still names the broken version: the rolled-back host refuses to
    // install it again (no loop), and its report says why.
    waitFor(
      assertLastApply("arch", 1, "failed", "failed to start on this machine and the launcher"),
      60,
    ),
    pause(6, "time for a loop to show, if there were one"),
    assertServiceSaid("arch", "rolling back to known-good", 1),
    assertPackage("arch", "nox-mesh-host", { version: `${CURRENT}-1` }),
    // The control plane, seeing the node's report, pins the known-good version.
    declare("arch", hostAt(CURRENT)),
    waitFor(assertApplies("arch", [1, 2]), 30),
    assertUnit("arch", "nox-mesh-host", { running: true }),

    // Now the known-good version fails too: a person breaks the host's configuration.
    // (No control plane race here: 1 s back-off.)
    writeFile(
      "arch",
      "/etc/mesh-host/launch.env",
      "NOX_MESH_HOST_BACKOFF=1\nNOX_MESH_HOST_BACKOFF_MAX=1\n",
    ),
    writeFile("arch", ARCH_LIKE_CONFIG.path, '{"packageManager":"pacman","typo":true}\n'),
    run("arch", ["systemctl", "restart", "nox-mesh-host"]),
    waitFor(assertFile("arch", `${STATE}/halted`, { type: "file" }), 120),
    assertFileSays("arch", `${STATE}/halted`, HALT),
    waitFor(assertHostExited("arch", 78), 30),
    assertServiceSaid("arch", "rolling back to known-good", 2),
    assertServiceSaid("arch", `HALTED: nox-mesh-host failed 3 more times after rolling back`, 1),
    pause(6, "longer than the unit's RestartSec=5"),
    assertUnitProperty("arch", "nox-mesh-host", "NRestarts", "0"),
    assertUnit("arch", "nox-mesh-host", { running: false }),
    // Started again by hand, it refuses at once and says which file to remove.
    run("arch", ["systemctl", "start", "nox-mesh-host"]),
    waitFor(
      assertServiceSaid(
        "arch",
        `refusing to start nox-mesh-host: fix the cause, then remove ${STATE}/halted`,
        1,
      ),
      30,
    ),
    waitFor(assertHostExited("arch", 78), 30),
    // The counters went into the halted record: fixing the cause and removing that one
    // file is a fresh start.
    assertFile("arch", `${STATE}/failures`, { absent: true }),
    assertFile("arch", `${STATE}/rolled-back`, { absent: true }),
    writeFile("arch", ARCH_LIKE_CONFIG.path, ARCH_LIKE_CONFIG.text),
    run("arch", ["rm", `${STATE}/halted`]),
    mark((ms) => clearedAt = ms, "note when a person cleared the halt"),
    run("arch", ["systemctl", "start", "nox-mesh-host"]),
    waitFor(assertRunningVersion("arch", CURRENT, () => clearedAt), 60),
    assertUnit("arch", "nox-mesh-host", { running: true }),
    assertFile("arch", `${STATE}/halted`, { absent: true }),
  ],
};
