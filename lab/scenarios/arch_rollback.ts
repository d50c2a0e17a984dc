import { assertFile, assertUnit, run, type Scenario, waitFor, writeFile } from "../lib/scenario.ts";
import { ARCH_LIKE_CONFIG } from "../lib/host.ts";
import { assertHostExited, assertRunningVersion, mark } from "../mesh_steps/link_steps.ts";
import {
  assertFileSays,
  assertServiceSaid,
  assertUnitProperty,
  CURRENT,
  pause,
  STATE,
} from "./_ship.ts";
import { brokenRolledBack, kept, PACMAN, startedKnownGood } from "./_by_package.ts";

/** Small back-off (launcher/README.md) so that six failed starts take seconds: 2, 3, 3 s. */
const LAUNCH_ENV = "NOX_MESH_HOST_BACKOFF=2\nNOX_MESH_HOST_BACKOFF_MAX=3\n";
const HALT = "the machine, not the version, needs a look";
let clearedAt = 0;

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
      hostFrom: "pacman",
      containers: true,
      files: {
        [ARCH_LIKE_CONFIG.path]: ARCH_LIKE_CONFIG.text,
        "/etc/mesh-host/launch.env": LAUNCH_ENV,
      },
    },
  },
  steps: [
    ...startedKnownGood(PACMAN),
    assertFile("arch", kept(PACMAN, "current", CURRENT), { type: "file" }),
    ...brokenRolledBack(PACMAN),
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
