import { assertFile, fail, run, type Scenario, type Step, waitFor } from "../lib/scenario.ts";
import { installFromReadme } from "./tarball_floor.ts";
import {
  assertFileSays,
  assertLaunched,
  assertServiceSaid,
  BROKEN,
  CURRENT,
  STATE,
} from "./_ship.ts";

const TARBALL = `nox-mesh-host-${BROKEN}-${Deno.build.arch}.tar.gz`;

/** A person unpacks a build's tarball over the running one, as the README says. */
function unpackBroken(machine: string): Step {
  return {
    title: `on ${machine}: a person unpacks the tarball of ${BROKEN} (a broken build) over it`,
    timeoutS: 300,
    async run(ctx) {
      const dir = await ctx.lab.publishTarball("broken");
      const r = await ctx.machine(machine).exec([
        "sh",
        "-c",
        'cd "$1" && sha256sum -c --quiet SHA256SUMS && tar -xz -C /usr/local < "$2"',
        "unpack",
        dir,
        TARBALL,
      ]);
      if (r.code !== 0) fail("the tarball to unpack", `exit ${r.code}: ${r.stderr.trim()}`);
    },
  };
}

/** The tarball form upgrades by its files and rolls back once to the kept previous tarball. */
export const scenario: Scenario = {
  name: "tarball-rollback",
  summary: "an OpenRC machine with no deno runs the tarball (README's lines); the tarball of a " +
    "broken next build is unpacked over it: the host sees its program replaced and exits 0, the " +
    "launcher starts the new one uncounted, it fails 3 times, and the launcher restores the " +
    "kept copy of the previous tarball's files once; the old version runs and confirms again",
  machines: {
    rc: {
      flavour: "openrc",
      deno: false,
      // A short heartbeat: the host checks its program file at each one.
      files: { "/etc/mesh-host/host.json": '{ "heartbeatIntervalSeconds": 5 }\n' },
    },
  },
  steps: [
    ...installFromReadme("rc"),
    waitFor(assertFile("rc", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    waitFor(
      assertFile("rc", `${STATE}/rollback/${CURRENT}/nox-mesh-host-${CURRENT}.tar.gz`, {
        type: "file",
      }),
      60,
    ),
    unpackBroken("rc"),
    waitFor(assertServiceSaid("rc", "run: self-upgrade:", 1), 60),
    waitFor(
      assertServiceSaid("rc", `rolling back to known-good ${CURRENT} from ${STATE}/rollback/`, 1),
      120,
    ),
    assertServiceSaid("rc", "exited 0: it upgraded itself; starting the new version", 1),
    assertServiceSaid("rc", "(lab: deliberately broken build): crashing on start", 3),
    // The old version runs and completes a reconcile (it clears the failure count) …
    waitFor(
      run("rc", ["sh", "-c", `[ "$(cat ${STATE}/failures 2>/dev/null || echo 0)" = 0 ]`]),
      60,
    ),
    assertLaunched("rc"),
    // … from the previous tarball's files, which are back: the program, bundle and runtime.
    run("rc", ["/usr/local/bin/nox-mesh-host", "version"], {
      stdoutIncludes: `nox-mesh-host ${CURRENT}\n`,
    }),
    assertFileSays("rc", `${STATE}/rolled-back-from`, BROKEN),
    assertFile("rc", `${STATE}/halted`, { absent: true }),
    assertFile("rc", `${STATE}/known-good`, { content: `${CURRENT}\n` }),
  ],
};
