import { join } from "node:path";
import { CgroupSet } from "./cgroup.ts";
import { LabError } from "./errors.ts";
import type { Flavour } from "./base.ts";
import { cutPort, type Port, restorePort } from "./net.ts";
import { exists, run, type RunResult, sleep, tail, until } from "./_process.ts";
import { ENTER_ROOT, LAUNCH, OPENRC_INIT, PLAIN_INIT, WRITE_FILE } from "./_scripts.ts";

/**
 * How the host comes onto a machine: its Debian package from the lab's apt repository
 * (`deb`: a Debian machine, apt its package manager; the systemd machines' default), the Arch
 * package from the lab's pacman repository (`pacman`: the Arch-like machine, Debian with
 * pacman standing in for Arch), the tarball, or the files the Alpine package installs (a
 * machine with no apk: lib/alpine_files.ts).
 */
export type HostFrom = "deb" | "pacman" | "tarball" | "alpine-files";

/** A file placed on a machine before it boots: text, text with a mode, or a symlink. */
export type PlacedFile = string | { content: string; mode?: string } | { symlink: string };

/** Options of {@link Machine.exec}. */
export interface ExecOptions {
  /** Throw a LabError when the exit code is not 0 (default false). */
  check?: boolean;
  /** Text or bytes on the command's stdin. */
  input?: string | Uint8Array;
  /** Extra environment (the machine's environment is otherwise clean). */
  env?: Record<string, string>;
  /** Kill the command after this many milliseconds (default 120 000). */
  timeoutMs?: number;
}

/** How to start one machine; built by the Lab. */
export interface MachinePlan {
  name: string;
  flavour: Flavour;
  /** Unique name for cgroups (prefixed with the lab id). */
  unitName: string;
  netns: string;
  port: Port | undefined;
  dir: string;
  lower: string;
  /** Read-only bind mounts: host path → machine path. */
  binds: ReadonlyArray<readonly [string, string]>;
  /** Files written into the overlay before boot (machine path → what to place). */
  preload: ReadonlyArray<readonly [string, PlacedFile]>;
  bootTimeoutMs: number;
  /** systemd: a cgroup2-only hierarchy inside (for podman); see MachineSpec.containers. */
  unifiedCgroup?: boolean;
  /** How the host comes onto it (see MachineSpec.hostFrom). */
  hostFrom: HostFrom;
  /** Its programs run under QEMU's user-mode emulation (binfmt_misc; MachineSpec.arch). */
  emulated?: boolean;
}

/** Where the deno binary of this host lives; bound read-only into every machine. */
export const DENO_BINARY: string = (() => {
  try {
    return Deno.realPathSync("/usr/bin/deno");
  } catch {
    return Deno.execPath();
  }
})();
/** Where deno appears inside a machine. */
export const MACHINE_DENO = "/usr/local/bin/deno";

const MACHINE_ENV = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: "/root",
  LANG: "C.UTF-8",
  TERM: "dumb",
};

/**
 * PATH of commands run in a machine. The systemd flavour stands in for Arch, where
 * /usr/sbin is /usr/bin: programs are found in /usr/bin first, as on Arch (this is
 * what the Arch permission set's program paths are written for).
 */
const EXEC_PATH: Readonly<Record<Flavour, string>> = {
  systemd: "/usr/local/sbin:/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin",
  openrc: MACHINE_ENV.PATH,
  plain: MACHINE_ENV.PATH,
};

/** One running lab machine: its own namespaces, overlay root and cgroup. */
export class Machine {
  readonly name: string;
  readonly flavour: Flavour;
  /** How the host comes onto it: its package (systemd: Arch's) or the tarball. */
  readonly hostFrom: HostFrom;
  /** Address on the lab switch (undefined without network). */
  readonly address: string | undefined;
  /** Network namespace name (in /run/netns). */
  readonly netns: string;
  /** The switch port, for cutting the link. */
  readonly port: Port | undefined;
  /** PID (in the host's pid namespace) of the machine's PID 1. */
  leader = 0;
  /** Milliseconds from start to booted (systemd: is-system-running answered). */
  raiseMs = 0;
  /** Every exec, for the logs kept on failure. */
  readonly transcript: string[] = [];
  /** How many times the machine was booted (1 after start, one more per reboot). */
  boots = 1;
  private readonly plan: MachinePlan;
  private cgroups: CgroupSet;
  private child: Deno.ChildProcess;
  private exited: Promise<Deno.CommandStatus>;
  private stopped = false;

  private constructor(plan: MachinePlan, cgroups: CgroupSet, child: Deno.ChildProcess) {
    this.name = plan.name;
    this.flavour = plan.flavour;
    this.hostFrom = plan.hostFrom;
    this.address = plan.port?.address;
    this.netns = plan.netns;
    this.port = plan.port;
    this.plan = plan;
    this.cgroups = cgroups;
    this.child = child;
    this.exited = child.status;
  }

  /** Starts the machine and waits until it has booted. Cleans up itself if it cannot. */
  static async start(plan: MachinePlan): Promise<Machine> {
    const started = Date.now();
    for (const d of ["upper", "work", "root"]) {
      await Deno.mkdir(join(plan.dir, d), { recursive: true });
    }
    for (const [path, placed] of plan.preload) await preload(join(plan.dir, "upper"), path, placed);
    const { cgroups, child } = await Machine.spawn(plan);
    const machine = new Machine(plan, cgroups, child);
    await machine.booted();
    machine.raiseMs = Date.now() - started;
    return machine;
  }

  /**
   * Reboots the machine: its init stops everything (systemd: the orderly poweroff nspawn
   * asks for on SIGTERM; OpenRC: `openrc shutdown` stops every service, then PID 1 exits),
   * then the same root, its overlay's upper directory kept as the machine left it, boots
   * again with fresh pid/mount/uts/ipc namespaces, a fresh /run and /tmp, the same network
   * namespace and switch port. An init that has not stopped everything within `graceMs`
   * fails the reboot (what was left is killed first). systemd: the new boot may leave the
   * units in `mayFail` failed ("degraded"; a halted host's unit, say), no others. Returns
   * the milliseconds it took.
   */
  async reboot(
    { graceMs = 60_000, mayFail = [] }: { graceMs?: number; mayFail?: readonly string[] } = {},
  ): Promise<number> {
    if (!this.leader || this.stopped) {
      throw new LabError("usage", `machine ${this.name} is not running; cannot reboot it`);
    }
    const started = Date.now();
    await this.killExecs();
    await this.askShutdown();
    const done = await Promise.race([
      this.exited.then(() => true),
      sleep(graceMs).then(() => false),
    ]);
    if (!done) {
      const tree = await processesIn(this.leader);
      await this.stop(0);
      throw new LabError(
        "machine-failed",
        `machine ${this.name} (${this.flavour}) did not shut down within ${graceMs / 1000} s ` +
          `of its init being asked to; left running:\n${tree}`,
      );
    }
    await this.cgroups.destroy();
    this.leader = 0;
    const { cgroups, child } = await Machine.spawn(this.plan);
    this.cgroups = cgroups;
    this.child = child;
    this.exited = child.status;
    this.boots++;
    await this.booted(mayFail);
    return Date.now() - started;
  }

  /** Waits for a (re)started machine to boot; stops it and throws if it does not. */
  private async booted(mayFail: readonly string[] = []): Promise<void> {
    try {
      await this.waitBooted(mayFail);
    } catch (error) {
      const log = await Deno.readTextFile(join(this.plan.dir, "console.log")).catch(() => "");
      const tree = this.leader ? await processesIn(this.leader) : "";
      await this.stop().catch(() => {});
      throw new LabError(
        "machine-failed",
        `machine ${this.plan.name} (${this.plan.flavour}) did not boot: ${
          error instanceof Error ? error.message : error
        }\nconsole:\n${tail(log, 25)}\nprocesses (pid state wchan command):\n${tree}`,
        { cause: error },
      );
    }
  }

  /** Mounts the overlay in a private mount namespace and execs the machine's init there. */
  private static async spawn(
    plan: MachinePlan,
  ): Promise<{ cgroups: CgroupSet; child: Deno.ChildProcess }> {
    const root = join(plan.dir, "root");
    const cgroups = await CgroupSet.create(plan.unitName);
    const args = [
      "--mount",
      "--propagation",
      "private",
      "/bin/sh",
      "-c",
      LAUNCH,
      "lab-launch",
      join(plan.dir, "console.log"),
      root,
      plan.lower,
      join(plan.dir, "upper"),
      join(plan.dir, "work"),
      cgroups.dirs.join(":"),
      ...(plan.flavour === "systemd" ? nspawnArgv(plan, root) : namespaceArgv(plan, root)),
    ];
    try {
      const child = new Deno.Command("/usr/bin/unshare", {
        args,
        env: {
          // /proc/sys/net writable in the machine's own network namespace (sysctl resources;
          // --network-namespace-path alone leaves it read-only).
          SYSTEMD_NSPAWN_API_VFS_WRITABLE: "network",
          ...(plan.unifiedCgroup ? { SYSTEMD_NSPAWN_UNIFIED_HIERARCHY: "1" } : {}),
        },
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
      return { cgroups, child };
    } catch (error) {
      await cgroups.destroy();
      throw new LabError("missing-tool", `cannot start unshare: ${error} (sh lab/setup.sh)`);
    }
  }

  /**
   * Asks the machine's init to stop everything. An emulated systemd is asked with
   * `systemctl poweroff`: the signal nspawn sends for a poweroff (SIGRTMIN+4) reaches it
   * through QEMU's signal mapping as another one, and it went to emergency mode instead
   * ("maintenance"). Otherwise, or when that fails, {@link signalShutdown}.
   */
  private async askShutdown(): Promise<void> {
    if (this.plan.emulated && this.flavour === "systemd" && this.leader) {
      const r = await run(
        [
          "/usr/bin/nsenter",
          "-t",
          String(this.leader),
          "-a",
          "--",
          "systemctl",
          "poweroff",
          "--no-block",
        ],
        {
          check: false,
          clearEnv: true,
          env: { ...MACHINE_ENV, PATH: EXEC_PATH.systemd },
          timeoutMs: 30_000,
          what: `systemctl poweroff on ${this.name}`,
        },
      ).catch(() => undefined);
      if (r?.code === 0) return;
    }
    this.signalShutdown();
  }

  /** Asks the machine's init to stop everything (nspawn: poweroff; the sh inits trap TERM). */
  private signalShutdown(): void {
    try {
      const target = this.flavour === "systemd" ? this.child.pid : this.leader || this.child.pid;
      if (target) Deno.kill(target, "SIGTERM");
    } catch { /* already gone */ }
  }

  private async waitBooted(mayFail: readonly string[]): Promise<void> {
    let gone = false;
    this.exited.then(() => gone = true);
    const wanted = this.flavour === "systemd" ? "systemd" : "sh";
    const hostPidNs = await Deno.readLink(`/proc/${Deno.pid}/ns/pid`);
    this.leader = await until("machine PID 1 appears", this.plan.bootTimeoutMs, async () => {
      if (gone) throw new Error("the machine's launcher exited");
      const kids = await children(this.child.pid);
      for (const pid of kids) {
        // PID 1 of the machine: the init's name, in a pid namespace of its own (a
        // launcher's child that is about to exec something else is still in ours).
        const comm = (await Deno.readTextFile(`/proc/${pid}/comm`).catch(() => "")).trim();
        const ns = await Deno.readLink(`/proc/${pid}/ns/pid`).catch(() => hostPidNs);
        if (comm === wanted && ns !== hostPidNs) return pid;
      }
      return undefined;
    }, 10);
    if (this.flavour === "systemd") {
      // "offline" until systemd's private socket exists; then --wait blocks until booted.
      const state = await until("systemd answers", this.plan.bootTimeoutMs, async () => {
        if (gone) throw new Error("systemd-nspawn exited");
        const r = await this.exec(["systemctl", "is-system-running", "--wait"], {
          timeoutMs: this.plan.bootTimeoutMs,
        });
        const answer = r.stdout.trim();
        return answer === "offline" || answer === "" ? undefined : answer;
      }, 20);
      if (state !== "running") {
        const failed = await this.exec(["systemctl", "--failed", "--no-legend", "--plain"]);
        const units = failed.stdout.split("\n").map((l) => l.split(" ")[0]).filter(Boolean);
        const expected = state === "degraded" && units.length > 0 &&
          units.every((unit) => mayFail.includes(unit));
        if (!expected) {
          throw new Error(`systemd is "${state}", not "running"; failed units:\n${failed.stdout}`);
        }
      }
      return;
    }
    const rootOf = `/proc/${this.leader}/root/run`;
    await until("the init reports ready", this.plan.bootTimeoutMs, async () => {
      if (gone) throw new Error("the machine's PID 1 exited");
      if (await exists(`${rootOf}/lab-failed`)) throw new Error("the init reports failure");
      return (await exists(`${rootOf}/lab-ready`)) ? true : undefined;
    }, 20);
  }

  /** Runs argv inside the machine (all its namespaces, clean environment). */
  async exec(argv: readonly string[], options: ExecOptions = {}): Promise<RunResult> {
    const { check = false, input, env = {}, timeoutMs = 120_000 } = options;
    if (!this.leader || this.stopped) {
      throw new LabError("usage", `machine ${this.name} is not running; cannot run ${argv[0]}`);
    }
    const result = await run(
      // Own session: a Ctrl-C meant for the runner must not kill nsenter before its
      // command (an orphan there becomes a zombie of the host's PID 1 and stalls shutdown).
      ["/usr/bin/setsid", "/usr/bin/nsenter", "-t", String(this.leader), "-a", "--", ...argv],
      {
        check: false,
        input,
        clearEnv: true,
        env: { ...MACHINE_ENV, PATH: EXEC_PATH[this.flavour], ...env },
        timeoutMs,
        what: `${argv.join(" ")} on ${this.name}`,
      },
    );
    this.transcript.push(
      `$ ${argv.join(" ")}\n[exit ${result.code}]\n${clip(result.stdout)}${clip(result.stderr)}`,
    );
    if (check && result.code !== 0) {
      throw new LabError(
        "command-failed",
        `on ${this.name}: ${argv.join(" ")} exited ${result.code}\n${
          tail(result.stderr || result.stdout)
        }`,
      );
    }
    return result;
  }

  /** Writes a file inside the machine (parents created), atomically, with `mode` (default 0644). */
  async writeFile(path: string, data: string | Uint8Array, mode = "0644"): Promise<void> {
    await this.exec(["/bin/sh", "-c", WRITE_FILE, "lab-write", path, mode], {
      input: data,
      check: true,
    });
  }

  /** Reads a file inside the machine as text. */
  async readFile(path: string): Promise<string> {
    return (await this.exec(["cat", "--", path], { check: true })).stdout;
  }

  /** Copies a host file into the machine. */
  async copyIn(hostPath: string, machinePath: string, mode = "0644"): Promise<void> {
    await this.writeFile(machinePath, await Deno.readFile(hostPath), mode);
  }

  /** Cuts the machine's link to the lab switch (the switch side goes down). */
  cutLink(): Promise<void> {
    if (!this.port) throw new LabError("usage", `machine ${this.name} has no network`);
    return cutPort(this.port);
  }

  /** Restores a cut link. */
  restoreLink(): Promise<void> {
    if (!this.port) throw new LabError("usage", `machine ${this.name} has no network`);
    return restorePort(this.port);
  }

  /** Working-set memory of the machine's cgroup, in bytes (undefined if unreadable). */
  async memoryBytes(): Promise<number | undefined> {
    return (await this.cgroups.memory())?.workingSet;
  }

  /** Memory of the machine's cgroup: all charged (`usage`) and `workingSet`, in bytes. */
  memory(): Promise<{ usage: number; workingSet: number } | undefined> {
    return this.cgroups.memory();
  }

  /** Copies what explains a failure (console, journal or rc-status, exec transcript) to `dir`. */
  async collectLogs(dir: string): Promise<void> {
    await Deno.mkdir(dir, { recursive: true });
    await Deno.copyFile(join(this.plan.dir, "console.log"), join(dir, "console.log")).catch(
      () => {},
    );
    await Deno.writeTextFile(join(dir, "exec.log"), this.transcript.join("\n"));
    // The host's own log where it writes one (the tarball's launcher, OpenRC), read
    // from the machine's upper layer: it is there whether the machine still runs or not.
    await Deno.copyFile(
      join(this.plan.dir, "upper/var/log/nox-mesh-host.log"),
      join(dir, "nox-mesh-host.log"),
    ).catch(() => {});
    if (!this.leader || this.stopped) return;
    const probe = this.flavour === "systemd"
      ? ["journalctl", "-b", "--no-pager", "-o", "short-monotonic"]
      : this.flavour === "openrc"
      ? ["rc-status", "-a"]
      : ["sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < \"$p/cmdline\"; echo; done"];
    const r = await this.exec(probe, { timeoutMs: 20_000 }).catch((e) => ({
      code: -1,
      stdout: "",
      stderr: String(e),
    }));
    await Deno.writeTextFile(join(dir, `${probe[0]}.log`), r.stdout + r.stderr);
  }

  private async killExecs(): Promise<void> {
    if (this.leader) await killExecsIn(this.leader, new Set(await this.cgroups.pids()));
  }

  /** Powers the machine off (SIGKILL after a grace period) and removes its cgroups. */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.killExecs();
    await this.askShutdown();
    const done = await Promise.race([
      this.exited.then(() => true),
      sleep(graceMs).then(() => false),
    ]);
    if (!done) {
      for (const pid of await this.cgroups.pids()) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* gone */ }
      }
      await this.exited;
    }
    await this.cgroups.destroy();
  }
}

/**
 * SIGKILLs what `exec` started and is still running: processes in the machine's pid
 * namespace outside the machine's cgroup (nsenter leaves them in the caller's). Left
 * alone, the init's final SIGSTOP makes their nsenter stop itself too, nobody reaps
 * them, and the machine's shutdown waits for its timeout.
 */
async function killExecsIn(leader: number, own: ReadonlySet<number>): Promise<void> {
  const ns = await Deno.readLink(`/proc/${leader}/ns/pid`).catch(() => undefined);
  if (!ns) return;
  for await (const entry of Deno.readDir("/proc")) {
    const pid = Number(entry.name);
    if (!/^\d+$/.test(entry.name) || pid === leader || own.has(pid)) continue;
    if ((await Deno.readLink(`/proc/${pid}/ns/pid`).catch(() => undefined)) !== ns) continue;
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* gone */ }
  }
}

function nspawnArgv(plan: MachinePlan, root: string): string[] {
  return [
    "/usr/bin/systemd-nspawn",
    "--quiet",
    "--boot",
    `--directory=${root}`,
    `--machine=${plan.name}`,
    "--register=no",
    "--keep-unit",
    "--console=passive",
    "--resolv-conf=off",
    "--timezone=off",
    "--link-journal=no",
    `--network-namespace-path=/run/netns/${plan.netns}`,
    // wireguard-go's tun device (overlay resources; this kernel has no WireGuard module),
    // and CAP_NET_ADMIN in the machine's own network namespace, which nspawn grants with
    // --private-network but not with --network-namespace-path (links, nftables, sysctl).
    "--bind=/dev/net/tun",
    "--capability=CAP_NET_ADMIN",
    // Containers started by a service of the machine (the host under systemd): nspawn's
    // seccomp filter refuses keyctl(2) (runc makes each container a session keyring) and
    // bpf(2) (runc's cgroup v2 device filter) to what the machine's systemd starts;
    // commands the lab runs with nsenter never had that filter.
    ...(plan.unifiedCgroup ? ["--system-call-filter=@keyring bpf"] : []),
    ...plan.binds.map(([src, dst]) => `--bind-ro=${src}:${dst}`),
  ];
}

function namespaceArgv(plan: MachinePlan, root: string): string[] {
  return [
    "/usr/bin/nsenter",
    `--net=/run/netns/${plan.netns}`,
    "--",
    "/usr/bin/unshare",
    "--pid",
    "--fork",
    "--mount",
    "--uts",
    "--ipc",
    "--propagation",
    "private",
    "/bin/sh",
    "-c",
    ENTER_ROOT,
    "lab-enter",
    root,
    plan.name,
    plan.flavour === "openrc" ? OPENRC_INIT : PLAIN_INIT,
    ...plan.binds.flat(),
  ];
}

/** Writes a placed file into an overlay's upper directory (owned by root). */
async function preload(upper: string, path: string, placed: PlacedFile): Promise<void> {
  if (!path.startsWith("/") || path.split("/").includes("..")) {
    throw new LabError("usage", `placed file path "${path}" must be absolute without ".."`);
  }
  const target = join(upper, path);
  await Deno.mkdir(join(target, ".."), { recursive: true });
  if (typeof placed === "object" && "symlink" in placed) {
    await Deno.symlink(placed.symlink, target);
    return;
  }
  const content = typeof placed === "string" ? placed : placed.content;
  const mode = typeof placed === "string" ? "0644" : placed.mode ?? "0644";
  await Deno.writeTextFile(target, content);
  await Deno.chmod(target, parseInt(mode, 8));
}

/** The processes in a machine's pid namespace, read from the host's /proc. */
async function processesIn(leader: number): Promise<string> {
  const ns = await Deno.readLink(`/proc/${leader}/ns/pid`).catch(() => undefined);
  const lines: string[] = [];
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const p = `/proc/${entry.name}`;
    if (!ns || (await Deno.readLink(`${p}/ns/pid`).catch(() => undefined)) !== ns) continue;
    const state = /^State:\s+(\S+)/m.exec(await Deno.readTextFile(`${p}/status`).catch(() => ""));
    const wchan = await Deno.readTextFile(`${p}/wchan`).catch(() => "?");
    const cmd = (await Deno.readTextFile(`${p}/cmdline`).catch(() => "")).replaceAll("\0", " ");
    lines.push(`${entry.name} ${state?.[1] ?? "?"} ${wchan || "-"} ${cmd.slice(0, 100)}`);
  }
  return lines.join("\n");
}

/** Direct children of a process. */
async function children(pid: number): Promise<number[]> {
  const text = await Deno.readTextFile(`/proc/${pid}/task/${pid}/children`).catch(() => "");
  return text.split(" ").filter(Boolean).map(Number);
}

function clip(text: string, max = 4000): string {
  if (!text) return "";
  const body = text.length > max ? text.slice(0, max) + "\n[… clipped]" : text;
  return body.endsWith("\n") ? body : body + "\n";
}
