import { assertFile, run, type Scenario, type Step, waitFor, writeFile } from "../lib/scenario.ts";
import { HOST_VERSIONS, type HostBuild, hostTarball } from "../lib/host_builds.ts";
import { sha256Hex } from "../../src/declaration/canonical.ts";
import { srvFile } from "./_link.ts";
import { installFromReadme } from "./tarball_floor.ts";
import { assertFileSays, BROKEN, CURRENT, NEXT, STATE } from "./_ship.ts";
import {
  assertCameBack,
  assertInstalled,
  assertSaidThisBoot,
  assertStaysHalted,
  reboot,
} from "./_reboot.ts";

/** The bundle host.json names, and its blobs/ (content by digest, beside it). */
const BUNDLE = "/etc/mesh-host/lab-bundle.json";
const BLOBS = "/etc/mesh-host/blobs";
const MARK = srvFile("mark", "/srv/reboot-mark", "held across reboots\n");
const CONFIG = JSON.stringify({ bundle: BUNDLE, driftIntervalSeconds: 10 }) + "\n";
const HALT = "the machine, not the version, needs a look";

/** The bundle: the mark, and the host's own tarball at a version by its digest, when given. */
function bundle(host?: Record<string, unknown>): string {
  return JSON.stringify({ version: 1, resources: host ? [MARK, host] : [MARK] }) + "\n";
}

/**
 * The host is told (by its bundle) to install itself from a build's tarball, which lies in
 * blobs/ beside the bundle under its SHA-256 (as `apply FILE` finds content by reference).
 */
function declareHost(which: HostBuild): Step {
  return {
    title: `the bundle of rc names nox-mesh-host ${HOST_VERSIONS[which]} (${which} build) by ` +
      "its tarball's digest, the tarball in blobs/ beside it",
    timeoutS: 600,
    async run(ctx) {
      const file = await hostTarball(ctx.lab.log, which);
      const bytes = await Deno.readFile(file);
      const sha256 = await sha256Hex(bytes);
      const dir = await ctx.lab.publishTarball(which);
      const m = ctx.machine("rc");
      await m.exec(
        [
          "sh",
          "-c",
          'mkdir -p "$1" && cp "$2" "$1/$3"',
          "sh",
          BLOBS,
          `${dir}/${file.split("/").pop()}`,
          sha256,
        ],
        { check: true },
      );
      await m.writeFile(
        BUNDLE,
        bundle({
          type: "package",
          id: "host",
          name: "nox-mesh-host",
          version: HOST_VERSIONS[which],
          contentSha256: sha256,
          size: bytes.length,
        }),
      );
    },
  };
}

/**
 * An OpenRC machine (the tarball, with no deno) rebooted after its install, after a
 * self-upgrade, after a rollback and while halted: OpenRC starts the service at boot,
 * supervise-daemon the launcher, the launcher the host.
 */
export const scenario: Scenario = {
  name: "reboot-openrc",
  summary: "an OpenRC machine with the tarball (README's lines) is rebooted (`openrc shutdown` " +
    "stops every service, the same root boots again) after the install, after the host staged " +
    "its next tarball and the launcher switched to it, after a broken tarball was rolled back, " +
    "and while halted: each time the node comes back by itself on the version it had confirmed " +
    "(known-good written in the new boot, the broken one not staged again), and a halted node " +
    "stays halted and says why; cleared by a person, it comes back at the next boot",
  machines: {
    rc: {
      flavour: "openrc",
      hostFrom: "tarball",
      deno: false,
      files: {
        "/etc/mesh-host/host.json": CONFIG,
        [BUNDLE]: bundle(),
        // One failure rolls back, one more halts (install-init keeps an existing conf.d).
        "/etc/conf.d/nox-mesh-host": "max_failures=1\n",
      },
    },
  },
  steps: [
    ...installFromReadme("rc"),
    waitFor(assertFile("rc", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    assertFile("rc", "/srv/reboot-mark", { content: "held across reboots\n" }),
    waitFor(
      assertFile("rc", `${STATE}/rollback/${CURRENT}/nox-mesh-host-${CURRENT}.tar.gz`, {
        type: "file",
      }),
      60,
    ),

    reboot("rc", "after the install"),
    ...assertCameBack("rc", CURRENT),
    assertFile("rc", "/srv/reboot-mark", { content: "held across reboots\n" }),

    // A self-upgrade: the host stages the next tarball and exits 0, the launcher switches.
    declareHost("next"),
    waitFor(assertInstalled("rc", NEXT), 120),
    waitFor(assertFile("rc", `${STATE}/known-good`, { content: `${NEXT}\n` }), 90),
    assertSaidThisBoot("rc", `applying the staged upgrade to nox-mesh-host ${NEXT}`, 1),
    assertSaidThisBoot("rc", "exited 0: it upgraded itself; starting the new version", 1),
    reboot("rc", "after a self-upgrade"),
    ...assertCameBack("rc", NEXT),

    // A broken tarball: staged, switched to, crashes, the kept NEXT copy restored.
    declareHost("broken"),
    waitFor(assertSaidThisBoot("rc", `rolling back to known-good ${NEXT} from`, 1), 180),
    waitFor(assertInstalled("rc", NEXT), 60),
    waitFor(assertFile("rc", `${STATE}/failures`, { absent: true }), 60),
    assertFile("rc", `${STATE}/rolled-back-from`, { content: `${BROKEN}\n` }),
    reboot("rc", "after a rollback"),
    ...assertCameBack("rc", NEXT),
    // Its bundle still names the broken tarball: refused, not staged again, no rollback again.
    waitFor(assertSaidThisBoot("rc", "failed to start on this machine and the launcher"), 30),
    assertSaidThisBoot("rc", "rolling back", 0),
    assertFile("rc", `${STATE}/upgrade`, { absent: true }),

    // Halted: the known-good version fails too (a person broke host.json).
    writeFile("rc", "/etc/mesh-host/host.json", '{"typo":true}\n'),
    run("rc", ["rc-service", "nox-mesh-host", "restart"]),
    waitFor(assertFile("rc", `${STATE}/halted`, { type: "file" }), 90),
    reboot("rc", "while halted", { halted: true }),
    ...assertStaysHalted("rc", HALT),

    // A person fixes the cause and removes halted: the next boot brings the node back.
    writeFile("rc", "/etc/mesh-host/host.json", CONFIG),
    run("rc", ["rm", `${STATE}/halted`]),
    reboot("rc", "after a person cleared the halt"),
    ...assertCameBack("rc", NEXT),
    assertFileSays("rc", `${STATE}/rolled-back-from`, BROKEN),
  ],
};
