import { assertFile, assertPackage, assertUnit, type Scenario, waitFor } from "../lib/scenario.ts";
import { run } from "../lib/scenario.ts";
import { CARRIED_RUNTIME, carriedRuntimeDigest, debFileName, hostDeb } from "../lib/host_builds.ts";
import { fail, type Step } from "../lib/_step.ts";
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
  assertServiceSaid,
  BROKEN,
  CURRENT,
  debAt,
  pause,
  publishHost,
  STATE,
  unmaskPodman,
} from "./_ship.ts";

/** Small back-off (launcher/README.md) so that the failed starts take seconds: 2, 3, 3 s. */
const LAUNCH_ENV = "NOX_MESH_HOST_BACKOFF=2\nNOX_MESH_HOST_BACKOFF_MAX=3\n";
const KEPT = `${STATE}/rollback/${CURRENT}/${debFileName("current")}`;
let upgradedAt = 0;
/** The sha256 of the runtime the known-good (current) package carries. */
let knownGoodRuntime = "";

/** The broken build's package carries another runtime file than the known-good one's. */
function runtimesDiffer(): Step {
  return {
    title: `the broken .deb carries a runtime file of its own at ${CARRIED_RUNTIME}`,
    timeoutS: 300,
    async run(ctx) {
      const log = (line: string) => ctx.lab.log(line);
      knownGoodRuntime = await carriedRuntimeDigest("current", log, "apt");
      const broken = await carriedRuntimeDigest("broken", log, "apt");
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
 * The kept .deb is the very file the lab repository published for the known-good version,
 * and its recorded checksum that file's SHA-256 (as apt's signed indexes give it).
 */
function keptIsPublished(machine: string): Step {
  return {
    title: `assert on ${machine}: ${KEPT} is the published ${CURRENT} .deb, its checksum recorded`,
    async run(ctx) {
      const published = await hostDeb("current", (l) => ctx.lab.log(l));
      const hex = Array.from(
        new Uint8Array(await crypto.subtle.digest("SHA-256", await Deno.readFile(published))),
        (b) => b.toString(16).padStart(2, "0"),
      ).join("");
      const m = ctx.machine(machine);
      const kept = (await m.exec(["sha256sum", KEPT], { check: true })).stdout.split(" ")[0];
      const recorded = (await m.readFile(`${STATE}/rollback/${CURRENT}/checksum`)).trim();
      if (kept !== hex || recorded !== hex) {
        fail(`the published ${hex}`, `kept ${kept}, recorded ${recorded}`);
      }
    },
  };
}

/**
 * A broken upgrade is rolled back once, by the launcher's apt path, to the kept known-good
 * .deb, which then reports again; the declaration that still names the broken version does
 * not make the host install it again.
 */
export const scenario: Scenario = {
  name: "debian-rollback",
  summary: "an upgrade by declaration to a build that crashes on start (and carries another " +
    "runtime file) is installed by the host's apt and fails 3 times; the launcher's apt path " +
    "rolls back once to the .deb it kept (checked against the checksum recorded from apt's " +
    "signed indexes), whose runtime comes back with it; the node heartbeats its old " +
    "version, refuses to reinstall the broken one the declaration still names, and takes the " +
    "known-good version when the control plane pins it",
  broker: true,
  machines: {
    deb: {
      flavour: "systemd",
      hostFrom: "deb",
      containers: true,
      files: { "/etc/mesh-host/launch.env": LAUNCH_ENV },
    },
  },
  steps: [
    run("deb", ["apt-get", "-q", "update"]),
    run("deb", ["apt-get", "-q", "-y", "install", "nox-mesh-host"]),
    meshUp(),
    enrol("deb", "deb"),
    unmaskPodman("deb"),
    run("deb", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    waitFor(assertFile("deb", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    waitFor(assertFile("deb", KEPT, { type: "file" }), 30),
    keptIsPublished("deb"),
    runtimesDiffer(),
    runtimeIsKnownGood("deb"),

    // A bad release: the host installs it with apt, exits 0, and the new version crashes.
    publishHost("broken", "apt"),
    mark((ms) => upgradedAt = ms, "note when the upgrade is declared"),
    declare("deb", debAt(BROKEN)),
    waitFor(assertPackage("deb", "nox-mesh-host", { version: `${BROKEN}-1` }), 120),
    waitFor(assertServiceSaid("deb", `rolling back to known-good ${CURRENT} from ${KEPT}`), 120),
    waitFor(assertPackage("deb", "nox-mesh-host", { version: `${CURRENT}-1` }), 60),
    waitFor(assertRunningVersion("deb", CURRENT, () => upgradedAt), 60),
    // The runtime is the package's: rolled back with it.
    runtimeIsKnownGood("deb"),
    waitFor(assertFile("deb", `${STATE}/failures`, { absent: true }), 30),
    assertFile("deb", `${STATE}/rolled-back`, { content: `3 ${CURRENT}\n` }),
    assertFile("deb", `${STATE}/rolled-back-from`, { content: `${BROKEN}\n` }),
    assertServiceSaid("deb", "(lab: deliberately broken build): crashing on start", 3),
    assertServiceSaid("deb", "failed (exit 70)", 3),
    // dpkg's own record: one downgrade, by the launcher.
    run("deb", [
      "grep",
      "-c",
      `upgrade nox-mesh-host:amd64 ${BROKEN}-1 ${CURRENT}-1`,
      "/var/log/dpkg.log",
    ], {
      stdoutIncludes: "1\n",
    }),
    // The declaration still names the broken version: the rolled-back host refuses to
    // install it again (no loop), and its report says why.
    waitFor(
      assertLastApply("deb", 1, "failed", "failed to start on this machine and the launcher"),
      60,
    ),
    pause(6, "time for a loop to show, if there were one"),
    assertServiceSaid("deb", "rolling back to known-good", 1),
    assertPackage("deb", "nox-mesh-host", { version: `${CURRENT}-1` }),
    // The control plane, seeing the node's report, pins the known-good version.
    declare("deb", debAt(CURRENT)),
    waitFor(assertApplies("deb", [1, 2]), 30),
    assertUnit("deb", "nox-mesh-host", { running: true }),
  ],
};
