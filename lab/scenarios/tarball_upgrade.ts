import { assertFile, run, type Scenario, type Step, waitFor } from "../lib/scenario.ts";
import type { HostBuild } from "../lib/host_builds.ts";
import { assertRunningVersion, declare, enrol, mark, meshUp } from "../mesh_steps/link_steps.ts";
import { installFromReadme } from "./tarball_floor.ts";
import { putHostTarball, putTarball } from "../mesh_steps/rollout_steps.ts";
import {
  assertFileSays,
  assertLaunched,
  assertServiceSaid,
  BROKEN,
  CURRENT,
  NEXT,
  STATE,
} from "./_ship.ts";
import { HOST_VERSIONS } from "../lib/host_builds.ts";

let declaredAt = 0;

/** The control plane declares the host's own package at a build's version, by its tarball's digest. */
function declareHost(node: string, which: HostBuild): Step {
  return {
    title: `the control plane declares nox-mesh-host ${HOST_VERSIONS[which]} to ${node} by ` +
      "its tarball's digest",
    async run(ctx) {
      const tarball = putTarball(which);
      await declare(node, {
        version: 1,
        resources: [{
          type: "package",
          id: "host",
          name: "nox-mesh-host",
          version: HOST_VERSIONS[which],
          contentSha256: tarball.sha256,
          size: tarball.size,
        }],
      }).run(ctx);
    },
  };
}

/** The installed program says it is `version`. */
function assertInstalled(machine: string, version: string): Step {
  return run(machine, ["/usr/local/bin/nox-mesh-host", "version"], {
    stdoutIncludes: `nox-mesh-host ${version}\n`,
  });
}

/** A tarball node upgrades by declaration (issue 15): by digest, switched, rolled back once. */
export const scenario: Scenario = {
  name: "tarball-upgrade",
  summary: "an enrolled OpenRC node with no deno runs the tarball (README's lines); the control " +
    "plane puts the next build's tarball into the object store and declares the host's package " +
    "at that version with its digest: the host fetches it, checks it, stages it and exits 0, " +
    "the launcher unpacks the stage and starts it uncounted and the heartbeat shows it; a broken build declared the " +
    "same way crashes 3 times and the launcher restores the kept copy of the previous tarball once",
  broker: true,
  machines: {
    rc: {
      flavour: "openrc",
      hostFrom: "tarball",
      deno: false,
      // A short heartbeat: the host checks its program file at each one.
      files: { "/etc/mesh-host/host.json": '{ "heartbeatIntervalSeconds": 5 }\n' },
    },
  },
  steps: [
    ...installFromReadme("rc"),
    waitFor(assertFile("rc", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    meshUp(),
    enrol("rc", "rc"),
    waitFor(assertRunningVersion("rc", CURRENT), 60),
    putHostTarball("next"),
    mark((ms) => declaredAt = ms, "note when the upgrade is declared"),
    declareHost("rc", "next"),
    waitFor(assertRunningVersion("rc", NEXT, () => declaredAt), 180),
    assertInstalled("rc", NEXT),
    waitFor(assertFile("rc", `${STATE}/known-good`, { content: `${NEXT}\n` }), 60),
    assertServiceSaid("rc", "run: self-upgrade:", 1),
    assertServiceSaid("rc", "exited 0: it upgraded itself; starting the new version", 1),
    assertServiceSaid("rc", "failed (exit", 0),
    assertFile("rc", `${STATE}/failures`, { absent: true }),
    assertLaunched("rc"),
    // The host staged it (it may not write its installation); the launcher unpacked it.
    assertServiceSaid("rc", "applying the staged upgrade to nox-mesh-host", 1),
    assertFile("rc", `${STATE}/upgrade`, { absent: true }),
    assertFile("rc", `${STATE}/upgrade-refused`, { absent: true }),
    // Nothing staged is left beside the installation.
    run("rc", [
      "sh",
      "-c",
      "! ls -d /usr/local/lib/nox-mesh-host.* /usr/local/share/nox-mesh-host.* " +
      "/usr/local/bin/.nox-mesh-host* 2>/dev/null",
    ]),
    // The launcher kept the new version's files, as it keeps every version it starts.
    waitFor(
      assertFile("rc", `${STATE}/rollback/${NEXT}/nox-mesh-host-${NEXT}.tar.gz`, { type: "file" }),
      60,
    ),
    // A broken build, declared the same way: installed, crashes, rolled back once.
    putHostTarball("broken"),
    declareHost("rc", "broken"),
    waitFor(
      assertServiceSaid("rc", `rolling back to known-good ${NEXT} from ${STATE}/rollback/`, 1),
      240,
    ),
    assertServiceSaid("rc", "(lab: deliberately broken build): crashing on start", 3),
    assertServiceSaid("rc", "exited 0: it upgraded itself; starting the new version", 2),
    assertServiceSaid("rc", "applying the staged upgrade to nox-mesh-host", 2),
    waitFor(
      run("rc", ["sh", "-c", `[ "$(cat ${STATE}/failures 2>/dev/null || echo 0)" = 0 ]`]),
      90,
    ),
    assertLaunched("rc"),
    assertInstalled("rc", NEXT),
    waitFor(assertRunningVersion("rc", NEXT), 60),
    assertFileSays("rc", `${STATE}/rolled-back-from`, BROKEN),
    assertFile("rc", `${STATE}/halted`, { absent: true }),
    assertFile("rc", `${STATE}/known-good`, { content: `${NEXT}\n` }),
  ],
};
