import { assertFile, run, type Scenario, type Step, waitFor, writeFile } from "../lib/scenario.ts";
import { assertHostExited } from "../mesh_steps/link_steps.ts";
import { srvFile } from "./_link.ts";
import {
  assertFileSays,
  assertUnitProperty,
  BROKEN,
  CURRENT,
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
/** The Arch-like host.json, its bundle the lab's (a drift check every 10 s re-reads it). */
const CONFIG =
  JSON.stringify({ packageManager: "pacman", bundle: BUNDLE, driftIntervalSeconds: 10 }) +
  "\n";
/** One failure rolls back, one more halts; 1 s back-off: a rollback and a halt take seconds. */
const LAUNCH_ENV =
  "NOX_MESH_HOST_MAX_FAILURES=1\nNOX_MESH_HOST_BACKOFF=1\nNOX_MESH_HOST_BACKOFF_MAX=1\n";
const HALT = "the machine, not the version, needs a look";

/** The bundle: the mark, and the host's own package at `version` when given (a self-upgrade). */
function bundle(version?: string): string {
  const host = {
    type: "package",
    id: "host",
    name: "nox-mesh-host",
    version: `${version}-1`,
    // The build was published after the machine's sync database was made.
    upgrade: "full",
  };
  return JSON.stringify({ version: 1, resources: version ? [MARK, host] : [MARK] }) + "\n";
}

/** The host is told (by its bundle) to install itself at `version`. */
function declareHost(version: string): Step {
  return writeFile("arch", BUNDLE, bundle(version));
}

/**
 * A systemd machine (the Arch package) rebooted after its install, after a self-upgrade, after
 * a rollback and while halted: systemd starts the unit at boot, the launcher the host.
 */
export const scenario: Scenario = {
  name: "reboot-systemd",
  summary: "an Arch-like systemd machine is rebooted (systemd stops everything, the same root " +
    "boots again) after `pacman -S` + `enable --now`, after the host upgraded itself by its " +
    "bundle, after a broken upgrade was rolled back, and while halted: each time the node comes " +
    "back by itself on the version it had confirmed (known-good written in the new boot, the " +
    "broken one not reinstalled), and a halted node stays halted, exit 78, and says why; " +
    "cleared by a person, it comes back at the next boot",
  machines: {
    // Arch-like: the reboots follow the Arch package's own upgrade and rollback (pacman, the
    // launcher's pacman path); the Debian package's are debian-upgrade and debian-rollback.
    arch: {
      flavour: "systemd",
      hostFrom: "pacman",
      files: {
        "/etc/mesh-host/host.json": CONFIG,
        "/etc/mesh-host/launch.env": LAUNCH_ENV,
        [BUNDLE]: bundle(),
      },
    },
  },
  steps: [
    run("arch", ["pacman", "-Sy", "--noconfirm", "--noprogressbar", "nox-mesh-host"]),
    run("arch", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    waitFor(assertFile("arch", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 60),
    assertFile("arch", "/srv/reboot-mark", { content: "held across reboots\n" }),
    waitFor(assertFile("arch", `${STATE}/rollback/${CURRENT}/checksum`, { type: "file" }), 30),

    reboot("arch", "after the install"),
    ...assertCameBack("arch", CURRENT),
    assertFile("arch", "/srv/reboot-mark", { content: "held across reboots\n" }),

    // A self-upgrade: the bundle names the next version; the host installs it, exits 0.
    publishHost("next"),
    declareHost(NEXT),
    waitFor(assertInstalled("arch", NEXT), 90),
    waitFor(assertFile("arch", `${STATE}/known-good`, { content: `${NEXT}\n` }), 90),
    assertSaidThisBoot("arch", "exited 0: it upgraded itself; starting the new version", 1),
    reboot("arch", "after a self-upgrade"),
    ...assertCameBack("arch", NEXT),

    // A broken upgrade: installed, crashes, rolled back to the kept NEXT package.
    publishHost("broken"),
    declareHost(BROKEN),
    waitFor(assertSaidThisBoot("arch", `rolling back to known-good ${NEXT} from`, 1), 120),
    waitFor(assertInstalled("arch", NEXT), 60),
    waitFor(assertFile("arch", `${STATE}/failures`, { absent: true }), 60),
    assertFile("arch", `${STATE}/rolled-back-from`, { content: `${BROKEN}\n` }),
    reboot("arch", "after a rollback"),
    ...assertCameBack("arch", NEXT),
    // Its bundle still names the broken version: refused, not reinstalled, no rollback again.
    waitFor(assertSaidThisBoot("arch", "failed to start on this machine and the launcher"), 30),
    assertSaidThisBoot("arch", "rolling back", 0),
    assertInstalled("arch", NEXT),

    // Halted: the known-good version fails too (a person broke host.json).
    writeFile("arch", "/etc/mesh-host/host.json", '{"packageManager":"pacman","typo":true}\n'),
    run("arch", ["systemctl", "restart", "nox-mesh-host"]),
    waitFor(assertFile("arch", `${STATE}/halted`, { type: "file" }), 90),
    waitFor(assertHostExited("arch", 78), 30),
    reboot("arch", "while halted", { halted: true }),
    ...assertStaysHalted("arch", HALT),
    waitFor(assertHostExited("arch", 78), 30),
    assertUnitProperty("arch", "nox-mesh-host", "NRestarts", "0"),

    // A person fixes the cause and removes halted: the next boot brings the node back.
    writeFile("arch", "/etc/mesh-host/host.json", CONFIG),
    run("arch", ["rm", `${STATE}/halted`]),
    reboot("arch", "after a person cleared the halt"),
    ...assertCameBack("arch", NEXT),
    assertFileSays("arch", `${STATE}/rolled-back-from`, BROKEN),
  ],
};
