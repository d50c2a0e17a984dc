// Steps of the reboot scenarios (reboot-systemd, reboot-openrc): a machine's init stops
// everything and the same root boots again (lab/lib/machine.ts `reboot`); what the node
// does in the new boot is read from that boot only (its journal, or the part of the
// OpenRC log written since).
import { fail, type Step } from "../lib/scenario.ts";
import type { Machine } from "../lib/machine.ts";
import { hostInstall } from "../lib/host.ts";
import { assertLaunched, STATE } from "./_ship.ts";

/** Per machine: when its last reboot began (ms) and how long the OpenRC log was then. */
const boots = new Map<string, { at: number; logBytes: number }>();

const OPENRC_LOG = "/var/log/nox-mesh-host.log";

/**
 * Reboots a machine: its init stops everything, the same root boots again. `halted`: the
 * host's unit is expected to fail in the new boot (systemd "degraded": exit 78); `mayFail`:
 * other systemd units that may fail in it (a network service made to fail).
 */
export function reboot(
  machine: string,
  why: string,
  { halted = false, mayFail = [] }: { halted?: boolean; mayFail?: readonly string[] } = {},
): Step {
  return {
    title: `reboot ${machine} (${why}): its init stops everything, the same root boots again`,
    timeoutS: 180,
    async run(ctx) {
      const m = ctx.machine(machine);
      const size = m.flavour === "systemd"
        ? 0
        : Number((await m.exec(["sh", "-c", `wc -c < ${OPENRC_LOG} 2>/dev/null || echo 0`]))
          .stdout.trim()) || 0;
      boots.set(machine, { at: Date.now(), logBytes: size });
      const ms = await m.reboot({
        mayFail: [...mayFail, ...(halted ? ["nox-mesh-host.service"] : [])],
      });
      ctx.lab.log(`  ${machine} rebooted in ${(ms / 1000).toFixed(1)} s (boot ${m.boots})`);
    },
  };
}

function since(machine: string): { at: number; logBytes: number } {
  const boot = boots.get(machine);
  if (!boot) fail(`${machine} rebooted first`, "no reboot");
  return boot;
}

/** What the service (launcher and host) said in this boot. */
async function saidThisBoot(m: Machine): Promise<string> {
  if (m.flavour === "systemd") {
    return (await m.exec(["journalctl", "-b", "-u", "nox-mesh-host", "--no-pager", "-o", "cat"]))
      .stdout;
  }
  const from = since(m.name).logBytes + 1;
  return (await m.exec(["sh", "-c", `tail -c +${from} ${OPENRC_LOG}`])).stdout;
}

/** The service said `text` in this boot (exactly `count` times, when given). */
export function assertSaidThisBoot(machine: string, text: string, count?: number): Step {
  return {
    title: `assert ${machine}'s nox-mesh-host said in this boot "${text}"` +
      (count === undefined ? "" : ` ${count} time(s)`),
    async run(ctx) {
      const log = await saidThisBoot(ctx.machine(machine));
      const seen = log.split(text).length - 1;
      if (count === undefined ? seen === 0 : seen !== count) {
        fail(count === undefined ? "it" : `${count} time(s)`, `${seen}:\n${log.slice(-1500)}`);
      }
    },
  };
}

/** The installed host is `version` (dpkg's or pacman's database, or the tarball's VERSION file). */
export function assertInstalled(machine: string, version: string): Step {
  return {
    title: `assert ${machine} has nox-mesh-host ${version} installed`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const how = hostInstall(m).how;
      const r = how === "pacman"
        ? await m.exec(["pacman", "-Q", "nox-mesh-host"])
        : how === "apt"
        ? await m.exec(["dpkg-query", "-W", "nox-mesh-host"])
        : await m.exec(["cat", "/usr/local/lib/nox-mesh-host/VERSION"]);
      const seen = r.stdout.trim().replace(/\t/, " ");
      const want = how === "pacman" || how === "apt" ? `nox-mesh-host ${version}-1` : version;
      if (seen !== want) fail(want, seen || r.stderr.trim());
    },
  };
}

/**
 * After a reboot the node came back by itself: the init started the launcher, whose child
 * is the host, and the host confirmed `version` in this boot (known-good written since).
 */
export function assertCameBack(machine: string, version: string): Step[] {
  return [
    {
      title: `assert ${machine} came back: nox-mesh-host ${version} confirmed a reconcile ` +
        "in this boot (known-good written since the reboot)",
      timeoutS: 120,
      async run(ctx) {
        const m = ctx.machine(machine);
        const deadline = Date.now() + 90_000;
        for (;;) {
          const r = await m.exec([
            "sh",
            "-c",
            'printf "%s %s" "$(date -r "$1" +%s%3N)" "$(cat "$1")"',
            "sh",
            `${STATE}/known-good`,
          ]);
          const [time, good] = r.stdout.trim().split(" ");
          if (good === version && Number(time) >= since(machine).at) return;
          if (Date.now() > deadline) {
            fail(
              `known-good ${version} written after the reboot`,
              `${good ?? "none"} written at ${time} ms (the reboot began at ${since(machine).at})`,
            );
          }
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      },
    },
    assertLaunched(machine),
    assertInstalled(machine, version),
  ];
}

/**
 * After a reboot a halted node stays halted and says why: `halted` is still there, the
 * init's start of the launcher printed its reason and refused, and no host runs.
 */
export function assertStaysHalted(machine: string, reason: string): Step[] {
  return [
    {
      title: `assert ${machine} stays halted after the reboot and says why`,
      timeoutS: 60,
      async run(ctx) {
        const m = ctx.machine(machine);
        const deadline = Date.now() + 45_000;
        for (;;) {
          const log = await saidThisBoot(m);
          const said = log.split("\n").some((l) => l.includes("HALTED: ") && l.includes(reason));
          if (said && log.includes("refusing to start")) break;
          if (Date.now() > deadline) fail(`"HALTED: … ${reason}" and "refusing to start"`, log);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
        const halted = await m.exec(["cat", `${STATE}/halted`]);
        if (!halted.stdout.includes(reason)) fail(`halted saying "${reason}"`, halted.stdout);
        const started = `starting ${hostInstall(m).command} run`;
        if ((await saidThisBoot(m)).includes(started)) fail("no start of the host", started);
        // No process runs the host's program (its bundle) in this boot.
        const all = await m.exec([
          "sh",
          "-c",
          'for p in /proc/[0-9]*; do tr "\\000" " " < "$p/cmdline" 2>/dev/null; echo; done',
        ]);
        const hosts = all.stdout.split("\n").filter((l) =>
          l.includes(`${hostInstall(m).bundle} run`)
        );
        if (hosts.length) fail("no host process", hosts.join("; "));
      },
    },
  ];
}
