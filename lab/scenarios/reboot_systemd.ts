import { assertFile, run, type Scenario, type Step, waitFor, writeFile } from "../lib/scenario.ts";
import { assertHostExited } from "../mesh_steps/link_steps.ts";
import { srvFile } from "./_link.ts";
import {
  assertFileSays,
  assertUnitProperty,
  BROKEN,
  CURRENT,
  debAt,
  NEXT,
  publishHost,
  STATE,
} from "./_ship.ts";
import {
  assertCameBack,
  assertInstalled,
  assertSaidThisBoot,
  assertStaysHalted,
  reboot,
} from "./_reboot.ts";

/** The bundle host.json names: what the host holds with no mesh (read again at each reconcile). */
const BUNDLE = "/etc/mesh-host/lab-bundle.json";
const MARK = srvFile("mark", "/srv/reboot-mark", "held across reboots\n");
/** host.json: its bundle the lab's (a drift check every 10 s re-reads it). */
const CONFIG = JSON.stringify({ bundle: BUNDLE, driftIntervalSeconds: 10 }) + "\n";
/** One failure rolls back, one more halts; 1 s back-off: a rollback and a halt take seconds. */
const LAUNCH_ENV =
  "NOX_MESH_HOST_MAX_FAILURES=1\nNOX_MESH_HOST_BACKOFF=1\nNOX_MESH_HOST_BACKOFF_MAX=1\n";
const HALT = "the machine, not the version, needs a look";

/**
 * The bundle: the mark, and the host's own package at `version` when given (a self-upgrade;
 * the build is published after apt read its indexes, and the host refreshes them: debAt).
 */
function bundle(version?: string): string {
  const host = version ? (debAt(version).resources as Record<string, unknown>[]) : [];
  return JSON.stringify({ version: 1, resources: [MARK, ...host] }) + "\n";
}

/** The host is told (by its bundle) to install itself at `version`. */
function declareHost(version: string): Step {
  return writeFile("node", BUNDLE, bundle(version));
}

/**
 * A systemd machine (Debian, the .deb) rebooted after its install, after a self-upgrade, after
 * a rollback and while halted: systemd starts the unit at boot, the launcher the host.
 */
export const scenario: Scenario = {
  name: "reboot-systemd",
  summary: "a Debian systemd machine is rebooted (systemd stops everything, the same root " +
    "boots again) after `apt-get install` + `enable --now`, after the host upgraded itself by its " +
    "bundle, after a broken upgrade was rolled back, and while halted: each time the node comes " +
    "back by itself on the version it had confirmed (known-good written in the new boot, the " +
    "broken one not reinstalled), and a halted node stays halted, exit 78, and says why; " +
    "cleared by a person, it comes back at the next boot",
  machines: {
    node: {
      flavour: "systemd",
      files: {
        "/etc/mesh-host/host.json": CONFIG,
        "/etc/mesh-host/launch.env": LAUNCH_ENV,
        [BUNDLE]: bundle(),
      },
    },
  },
  steps: [
    run("node", ["apt-get", "-q", "update"]),
    run("node", ["apt-get", "-q", "-y", "install", "nox-mesh-host"]),
    run("node", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    waitFor(assertFile("node", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 60),
    assertFile("node", "/srv/reboot-mark", { content: "held across reboots\n" }),
    waitFor(assertFile("node", `${STATE}/rollback/${CURRENT}/checksum`, { type: "file" }), 30),

    reboot("node", "after the install"),
    ...assertCameBack("node", CURRENT),
    assertFile("node", "/srv/reboot-mark", { content: "held across reboots\n" }),

    // A self-upgrade: the bundle names the next version; the host installs it, exits 0.
    publishHost("next", "apt"),
    declareHost(NEXT),
    waitFor(assertInstalled("node", NEXT), 90),
    waitFor(assertFile("node", `${STATE}/known-good`, { content: `${NEXT}\n` }), 90),
    assertSaidThisBoot("node", "exited 0: it upgraded itself; starting the new version", 1),
    reboot("node", "after a self-upgrade"),
    ...assertCameBack("node", NEXT),

    // A broken upgrade: installed, crashes, rolled back to the kept NEXT .deb.
    publishHost("broken", "apt"),
    declareHost(BROKEN),
    waitFor(assertSaidThisBoot("node", `rolling back to known-good ${NEXT} from`, 1), 120),
    waitFor(assertInstalled("node", NEXT), 60),
    waitFor(assertFile("node", `${STATE}/failures`, { absent: true }), 60),
    assertFile("node", `${STATE}/rolled-back-from`, { content: `${BROKEN}\n` }),
    reboot("node", "after a rollback"),
    ...assertCameBack("node", NEXT),
    // Its bundle still names the broken version: refused, not reinstalled, no rollback again.
    waitFor(assertSaidThisBoot("node", "failed to start on this machine and the launcher"), 30),
    assertSaidThisBoot("node", "rolling back", 0),
    assertInstalled("node", NEXT),

    // Halted: the known-good version fails too (a person broke host.json).
    writeFile("node", "/etc/mesh-host/host.json", '{"typo":true}\n'),
    run("node", ["systemctl", "restart", "nox-mesh-host"]),
    waitFor(assertFile("node", `${STATE}/halted`, { type: "file" }), 90),
    waitFor(assertHostExited("node", 78), 30),
    reboot("node", "while halted", { halted: true }),
    ...assertStaysHalted("node", HALT),
    waitFor(assertHostExited("node", 78), 30),
    assertUnitProperty("node", "nox-mesh-host", "NRestarts", "0"),

    // A person fixes the cause and removes halted: the next boot brings the node back.
    writeFile("node", "/etc/mesh-host/host.json", CONFIG),
    run("node", ["rm", `${STATE}/halted`]),
    reboot("node", "after a person cleared the halt"),
    ...assertCameBack("node", NEXT),
    assertFileSays("node", `${STATE}/rolled-back-from`, BROKEN),
  ],
};
