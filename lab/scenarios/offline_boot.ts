import {
  assertFile,
  assertUnit,
  cutLink,
  fail,
  restoreLink,
  run,
  type Scenario,
  type Step,
  waitFor,
  writeFile,
} from "../lib/scenario.ts";
import { NET_FAILS_MARK } from "../lib/lab.ts";
import {
  assertApplies,
  assertHeartbeat,
  declare,
  enrol,
  mark,
  meshUp,
} from "../mesh_steps/link_steps.ts";
import { files, srvFile } from "./_link.ts";
import { CURRENT, STATE } from "./_ship.ts";
import { assertCameBack, reboot } from "./_reboot.ts";
import { installFromReadme } from "./tarball_floor.ts";

/** What each node holds: one file, at serial `n`'s content. */
const held = (n: number) => srvFile("held", "/srv/held", `declared ${n}\n`);
/** host.json of both nodes: a drift check every 10 s, a heartbeat every 5 s. */
const CONFIG = JSON.stringify({ driftIntervalSeconds: 10, heartbeatIntervalSeconds: 5 }) + "\n";

/**
 * The systemd machine's network service, as a distribution's that brings the interfaces up
 * (the lab sets the link up from outside): required by network-online.target, so the target
 * fails with it; it fails while NET_FAILS_MARK exists.
 */
const LAB_NETWORK = `[Unit]
Description=the lab machine's network (its link is set up from outside by the lab)
Before=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'if [ -e ${NET_FAILS_MARK} ]; then echo "failed: ${NET_FAILS_MARK} says so" >&2; exit 1; fi'
`;

/** When each node's link came back (ms), for the heartbeat that must follow it. */
const restored: Record<string, number> = {};

/** The network service failed in this boot, and the init started the host all the same. */
function assertNetworkFailed(machine: string): Step {
  return {
    title: `assert ${machine}'s network service failed at boot, and the init started the host`,
    timeoutS: 60,
    async run(ctx) {
      const m = ctx.machine(machine);
      if (m.flavour === "systemd") {
        const failed = await m.exec(["systemctl", "is-failed", "lab-network.service"]);
        if (failed.stdout.trim() !== "failed") fail("lab-network.service failed", failed.stdout);
        const online = await m.exec(["systemctl", "is-active", "network-online.target"]);
        if (online.code === 0) fail("network-online.target not reached", online.stdout);
      } else {
        const net = await m.exec(["rc-service", "lab-net", "status"]);
        if (net.code === 0) fail("lab-net not started", net.stdout + net.stderr);
      }
    },
  };
}

/** No link in this boot: the host says it could not reach the broker (it holds from its store). */
function assertUnlinked(machine: string): Step {
  return {
    title: `assert ${machine}'s host has no link (the machine has no network)`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const r = await m.exec(["nox-mesh-host", "status", "--json"]);
      const status = JSON.parse(r.stdout || "{}") as {
        service?: { running?: boolean };
        link?: { state?: string };
      };
      if (!status.service?.running || !["connecting", "down"].includes(status.link?.state ?? "")) {
        fail(
          "the service running, its link connecting or down",
          r.stdout.slice(0, 600) || r.stderr,
        );
      }
    },
  };
}

/** One node: installed, enrolled and holding its declaration; then rebooted with no network. */
function offline(machine: string): Step[] {
  return [
    // Stopped, so that the drift a person leaves is the boot's to repair, then the
    // network service told to fail at the next boot and the link cut.
    run(
      machine,
      machine === "sd"
        ? ["systemctl", "stop", "nox-mesh-host"]
        : ["rc-service", "nox-mesh-host", "stop"],
    ),
    writeFile(machine, "/srv/held", "edited by a person\n"),
    writeFile(machine, NET_FAILS_MARK, "the network service fails at boot\n"),
    cutLink(machine),
    reboot(machine, "its network service fails, its link is cut", {
      mayFail: machine === "sd" ? ["lab-network.service"] : [],
    }),
    assertNetworkFailed(machine),
    assertUnit(machine, "nox-mesh-host", { running: true }),
    ...assertCameBack(machine, CURRENT),
    // Repaired from the store: nothing can reach the broker.
    waitFor(assertFile(machine, "/srv/held", { content: "declared 1\n" }), 60),
    assertUnlinked(machine),
  ];
}

/** The network comes back: the node links, takes what was published meanwhile, heartbeats. */
function online(machine: string): Step[] {
  return [
    declare(machine, files(held(2))),
    mark((ms) => restored[machine] = ms, `note when ${machine}'s link comes back`),
    restoreLink(machine),
    waitFor(assertFile(machine, "/srv/held", { content: "declared 2\n" }), 120),
    waitFor(assertApplies(machine, [1, 2]), 60),
    waitFor(assertHeartbeat(machine, 2, () => restored[machine]), 60),
  ];
}

/**
 * A boot with no network, on both inits: the host is started by its init whatever the
 * network did (systemd: Wants= network-online.target; OpenRC: `use net`), holds the machine
 * from its store, and links once the network returns.
 */
export const scenario: Scenario = {
  name: "offline-boot",
  summary: "an enrolled node on systemd (Debian, the .deb) and one on OpenRC (the tarball) are " +
    "rebooted with their network service failing and their link cut (systemd: " +
    "network-online.target fails; OpenRC: the service providing net fails): the init starts " +
    "the host all the same, it confirms a reconcile, repairs a person's edit from its store " +
    "with no link, and once the link is restored it links, applies the declaration published " +
    "meanwhile and heartbeats",
  broker: true,
  machines: {
    sd: {
      flavour: "systemd",
      files: {
        "/etc/mesh-host/host.json": CONFIG,
        "/etc/systemd/system/lab-network.service": LAB_NETWORK,
        "/etc/systemd/system/network-online.target.requires/lab-network.service": {
          symlink: "/etc/systemd/system/lab-network.service",
        },
      },
    },
    rc: {
      flavour: "openrc",
      hostFrom: "tarball",
      deno: false,
      files: { "/etc/mesh-host/host.json": CONFIG },
    },
  },
  steps: [
    run("sd", ["apt-get", "-q", "update"]),
    run("sd", ["apt-get", "-q", "-y", "install", "nox-mesh-host"]),
    run("sd", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    ...installFromReadme("rc"),
    waitFor(assertFile("sd", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    waitFor(assertFile("rc", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    meshUp(),
    enrol("sd", "sd"),
    enrol("rc", "rc"),
    declare("sd", files(held(1))),
    declare("rc", files(held(1))),
    waitFor(assertFile("sd", "/srv/held", { content: "declared 1\n" }), 90),
    waitFor(assertFile("rc", "/srv/held", { content: "declared 1\n" }), 90),
    ...offline("sd"),
    ...offline("rc"),
    ...online("sd"),
    ...online("rc"),
  ],
};
