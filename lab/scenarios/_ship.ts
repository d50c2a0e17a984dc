// Shared steps of the install/upgrade/rollback scenarios (arch-*, openrc-install): the
// host installed from its real package, started by its init through the launcher.
import { RUNTIME_FLAGS, runtimeArgs } from "../../packaging/build.ts";
import { loadPermissionSet, permissionFlags } from "../../packaging/permissions.ts";
import { hostInstall } from "../lib/host.ts";
import type { HostBuild } from "../lib/host_builds.ts";
import { HOST_VERSIONS } from "../lib/host_builds.ts";
import type { Machine } from "../lib/machine.ts";
import { fail, type Step } from "../lib/scenario.ts";

/** The host's state directory (launcher files: known-good, failures, halted, rollback/). */
export const STATE = "/var/lib/mesh-host";

/** The versions of the lab's host builds. */
export const CURRENT = HOST_VERSIONS.current;
export const NEXT = HOST_VERSIONS.next;
export const BROKEN = HOST_VERSIONS.broken;

/** A declaration naming the host's own package at an exact (pacman) version. */
export function hostAt(version: string): Record<string, unknown> {
  return {
    version: 1,
    // A fleet upgrade: the build was published after the machine's sync database
    // was made, and the host never refreshes it alone (a partial upgrade on Arch).
    resources: [{
      type: "package",
      id: "host",
      name: "nox-mesh-host",
      version: `${version}-1`,
      upgrade: "full",
    }],
  };
}

/**
 * A declaration naming the host's own package at an exact Debian version. No "upgrade":
 * apt's indexes predate the build, and refreshing them alone is safe on Debian: the host
 * does it (apt-get update) when apt does not find the version, then installs it.
 */
export function debAt(version: string): Record<string, unknown> {
  return {
    version: 1,
    resources: [{ type: "package", id: "host", name: "nox-mesh-host", version: `${version}-1` }],
  };
}

/** The lab repository (/lab/repo; `apt`: the apt repository) starts offering a build of the host. */
export function publishHost(which: HostBuild, kind: "pacman" | "apt" = "pacman"): Step {
  return {
    title: `the lab's ${kind === "apt" ? "apt " : ""}repository offers nox-mesh-host ${
      HOST_VERSIONS[which]
    } (${which} build)`,
    timeoutS: 300,
    run: (ctx) => ctx.lab.publishHost(which, kind),
  };
}

interface Process {
  pid: number;
  ppid: number;
  argv: string[];
}

/** Every process of a machine, read from its own /proc. */
async function processes(m: Machine): Promise<Process[]> {
  const r = await m.exec([
    "/bin/sh",
    "-c",
    'for p in /proc/[0-9]*; do s=$(cat "$p/stat" 2>/dev/null) || continue; ' +
    'printf "%s\\036" "$s"; tr "\\000" "\\037" < "$p/cmdline"; printf "\\n"; done',
  ], { check: true });
  return r.stdout.split("\n").filter(Boolean).map((line) => {
    const [stat, cmdline = ""] = line.split("\x1e");
    const after = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const argv = (cmdline.endsWith("\x1f") ? cmdline.slice(0, -1) : cmdline).split("\x1f");
    return {
      pid: Number(stat.split(" ")[0]),
      ppid: Number(after[1]),
      // On an emulated machine (binfmt_misc, flag P) the kernel shows QEMU's interpreter,
      // the program's path, then the program's own argv: the machine's view is the latter.
      argv: EMULATOR.test(argv[0]) && argv.length > 2 ? argv.slice(2) : argv,
    };
  });
}

/** QEMU's user-mode interpreters as binfmt_misc names them (Debian's qemu-user-static). */
const EMULATOR = /^\/usr\/libexec\/qemu-binfmt\/[a-z0-9_]+-binfmt-P$/;

const shown = (p: Process) => `${p.pid}: ${p.argv.join(" ").slice(0, 160)}`;

/**
 * The init runs the launcher (systemd as PID 1, or OpenRC's supervise-daemon), and the
 * launcher's one child (its own subshells aside: the start deadline's watch of a version
 * not confirmed yet) is the host's `run` on the deno its package carries (Arch's and
 * Alpine's in /usr/lib/nox-mesh-host, the tarball's in /usr/local/lib/nox-mesh-host; Alpine's
 * and the tarball's started through the glibc loader beside it) with exactly the flags of the
 * machine's permission set (packaging/<os>/permissions).
 */
export function assertLaunched(machine: string): Step {
  return {
    title: `assert on ${machine}: the init runs the launcher, the launcher runs the host ` +
      "(run) as its child, under its OS's permission set",
    async run(ctx) {
      const m = ctx.machine(machine);
      const install = hostInstall(m);
      const all = await processes(m);
      const isLauncher = (p: Process | undefined) =>
        p?.argv[0] === "/bin/sh" && p.argv[1] === install.command + "-launch" &&
        p.argv[2] === "run";
      // A subshell of the launcher (its start-deadline watch, a command substitution) has
      // the launcher's argv: it is the launcher's, not a second launcher.
      const byPid = new Map(all.map((p) => [p.pid, p]));
      const launchers = all.filter((p) => isLauncher(p) && !isLauncher(byPid.get(p.ppid)));
      if (launchers.length !== 1) fail("one launcher process", all.map(shown).join("; "));
      const parent = all.find((p) => p.pid === launchers[0].ppid);
      // systemd is PID 1; OpenRC's supervise-daemon; a plain machine has no init, and the
      // launcher started in the background by a step is its PID 1's once that step ended.
      const init = m.flavour === "openrc"
        ? parent?.argv[0] === "supervise-daemon"
        : parent?.pid === 1;
      if (!init) fail("the init as the launcher's parent", parent ? shown(parent) : "none");
      const children = all.filter((p) => p.ppid === launchers[0].pid && !isLauncher(p));
      if (children.length !== 1) fail("one child of the launcher", children.map(shown).join("; "));
      const host = children[0];
      const flags = permissionFlags(await loadPermissionSet(install.os));
      // The runtime, through the glibc loader its package carries where it has one (the
      // tarball, Alpine): the loader of the machine's architecture.
      const uname = (await m.exec(["uname", "-m"], { check: true })).stdout.trim();
      const arch = uname === "aarch64" ? "aarch64" : "x86_64";
      const want = [
        ...runtimeArgs(install.set, arch),
        "run",
        "--no-config",
        ...RUNTIME_FLAGS,
        ...flags,
        install.bundle,
        "run",
      ];
      if (JSON.stringify(host.argv) !== JSON.stringify(want)) {
        const start = want.slice(0, want.indexOf("run") + 2).join(" ");
        fail(`the child to be ${start} <${install.os} set> …`, shown(host));
      }
    },
  };
}

/** No process of the host or its launcher is left on a machine. */
export function assertNoHostProcess(machine: string): Step {
  return {
    title: `assert no nox-mesh-host process is left on ${machine}`,
    async run(ctx) {
      const left = (await processes(ctx.machine(machine)))
        .filter((p) => p.argv.some((a) => a.includes("nox-mesh-host")));
      if (left.length) fail("none", left.map(shown).join("; "));
    },
  };
}

/** The output of the service so far: its journal (systemd) or its log file (OpenRC). */
async function serviceLog(m: Machine): Promise<string> {
  const argv = m.flavour === "systemd"
    ? ["journalctl", "-u", "nox-mesh-host", "--no-pager", "-o", "cat"]
    : ["cat", "/var/log/nox-mesh-host.log"];
  return (await m.exec(argv)).stdout;
}

/** The service's output (launcher and host) contains `text`, exactly `count` times if given. */
export function assertServiceSaid(machine: string, text: string, count?: number): Step {
  return {
    title: `assert the nox-mesh-host service on ${machine} said "${text}"${
      count === undefined ? "" : ` ${count} time(s)`
    }`,
    async run(ctx) {
      const log = await serviceLog(ctx.machine(machine));
      const seen = log.split(text).length - 1;
      if (count === undefined ? seen === 0 : seen !== count) {
        fail(count === undefined ? "it" : `${count} time(s)`, `${seen}:\n${log.slice(-1500)}`);
      }
    },
  };
}

/** A file on a machine contains `text`. */
export function assertFileSays(machine: string, path: string, text: string): Step {
  return {
    title: `assert ${path} on ${machine} says "${text}"`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(["cat", "--", path]);
      if (r.code !== 0 || !r.stdout.includes(text)) {
        fail(`"${text}"`, r.code === 0 ? JSON.stringify(r.stdout) : r.stderr.trim());
      }
    },
  };
}

/** A systemd unit's property has a value (`systemctl show -p NAME`). */
export function assertUnitProperty(
  machine: string,
  unit: string,
  property: string,
  value: string,
): Step {
  return {
    title: `assert ${unit} on ${machine} has ${property}=${value}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(["systemctl", "show", "-p", property, unit]);
      if (r.stdout.trim() !== `${property}=${value}`) fail(`${property}=${value}`, r.stdout.trim());
    },
  };
}

/** Waits `seconds` (to let something that must NOT happen have its chance). */
export function pause(seconds: number, why: string): Step {
  return {
    title: `wait ${seconds} s (${why})`,
    run: () => new Promise((resolve) => setTimeout(resolve, seconds * 1000)),
  };
}

/**
 * The lab's systemd image masks podman's units (lab/lib/base.ts: they only cost boot
 * time in machines that do not use them), and Debian's podman package enabled
 * podman.socket when the image was made; Arch's podman package neither masks nor
 * enables them. The shipped Arch bundle enables and starts podman.socket, so a machine
 * that applies it is first put as Arch ships podman: unmasked, not enabled.
 */
export function unmaskPodman(machine: string): Step {
  return {
    title: `unmask and disable podman.service and podman.socket on ${machine} ` +
      "(the lab image masks them, and Debian's package enables the socket: the bundle starts " +
      "from neither, as on a fresh Arch install)",
    async run(ctx) {
      for (const verb of ["unmask", "disable"]) {
        const r = await ctx.machine(machine).exec([
          "systemctl",
          verb,
          "podman.service",
          "podman.socket",
        ]);
        if (r.code !== 0) {
          fail(`systemctl ${verb} to succeed`, `exit ${r.code}: ${r.stderr.trim()}`);
        }
      }
    },
  };
}

/** What each container was when first seen (id and start time), by machine and name. */
const firstSeen = new Map<string, string>();

/**
 * The container `name` on `machine` runs from `image`, labelled as the host's; "record"
 * notes its id and start time, "same" asserts they are still those (nothing re-made or
 * restarted it).
 */
export function assertHostContainer(
  name: string,
  image: string,
  machine: string,
  same: "record" | "same",
): Step {
  return {
    title: `assert container ${name} on ${machine} runs ${image.slice(0, 48)}…, ` +
      `labelled as the host's${
        same === "same" ? ", the same container started at the same time" : ""
      }`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec([
        "podman",
        "container",
        "inspect",
        "--format",
        '{{.State.Running}} {{index .Config.Labels "nox-mesh-host.owner"}} {{.ImageName}} ' +
        "{{.Id}} {{.State.StartedAt}}",
        name,
      ]);
      const [running, owner, found, ...identity] = r.stdout.trim().split(" ");
      if (running !== "true" || owner !== "nox-mesh-host" || found !== image) {
        fail(`running, owner nox-mesh-host, image ${image}`, `${r.stdout}${r.stderr}`);
      }
      const key = `${machine}/${name}`;
      if (same === "record") firstSeen.set(key, identity.join(" "));
      else if (identity.join(" ") !== firstSeen.get(key)) {
        fail(firstSeen.get(key) ?? "(not recorded)", identity.join(" "));
      }
    },
  };
}
