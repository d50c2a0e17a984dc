import { assertFile, assertUnit, run, type Scenario, waitFor } from "../lib/scenario.ts";
import { hostDeb } from "../lib/host_builds.ts";
import { fail, type Step } from "../lib/_step.ts";
import { BROKEN, CURRENT, STATE } from "./_ship.ts";
import { APT, brokenRolledBack, kept, startedKnownGood } from "./_by_package.ts";

/** Small back-off (launcher/README.md) so that the failed starts take seconds: 2, 3, 3 s. */
const LAUNCH_ENV = "NOX_MESH_HOST_BACKOFF=2\nNOX_MESH_HOST_BACKOFF_MAX=3\n";
const KEPT = kept(APT, "current", CURRENT);

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
    ...startedKnownGood(APT),
    waitFor(assertFile("deb", KEPT, { type: "file" }), 30),
    keptIsPublished("deb"),
    ...brokenRolledBack(APT, [
      // dpkg's own record: one downgrade, by the launcher.
      run("deb", [
        "grep",
        "-c",
        `upgrade nox-mesh-host:amd64 ${BROKEN}-1 ${CURRENT}-1`,
        "/var/log/dpkg.log",
      ], { stdoutIncludes: "1\n" }),
    ]),
    assertUnit("deb", "nox-mesh-host", { running: true }),
  ],
};
