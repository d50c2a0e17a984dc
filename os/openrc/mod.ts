/**
 * OpenRC: the service verbs on rc-update (runlevels) and rc-service (state,
 * start, stop, restart, reload). A service is "enabled" when it is in the
 * configured runlevel (default "default"). Refuses the host's own service.
 *
 * The running instance (what proves a restart) is the daemon's pid, read where
 * OpenRC keeps it: supervise-daemon's `child_pid` in /run/openrc/options/NAME/,
 * else the pidfile the script named (/run/openrc/options/NAME/pidfile, or a
 * start-stop-daemon record in /run/openrc/daemons/NAME/; only one under /run). A service that has neither (no pidfile, no supervisor)
 * has no identity (`process: null`), and OpenRC offers nothing else to prove it.
 */
import { closeSync, constants, fstatSync, openSync, readdirSync, readSync } from "node:fs";
import type { ServiceManager, ServiceState } from "../../src/providers.ts";
import { OWN_SERVICES, refuseOwn } from "../_own_service.ts";
import { mustRun, programFailed, runProgram, type RunVia } from "../_run.ts";

/** How to reach OpenRC. */
export interface OpenRcOptions {
  /** The runlevel "enabled" means (default "default"). */
  runlevel?: string;
  /** Programs (default "rc-service" and "rc-update"). */
  rcService?: string;
  rcUpdate?: string;
  /** Services never to act on (default: the host's own). */
  own?: readonly string[];
  /** Extra environment, and an argv prefix to run the tool elsewhere (tests: a lab machine). */
  env?: Record<string, string>;
  via?: readonly string[];
  /** Where the machine's root is, for the files read (default "": this machine; tests: /proc/PID/root). */
  root?: string;
}

/** rc-service's exit code for `status` of a started service. */
const STARTED = 0;

/**
 * Create the OpenRC adapter.
 *
 * @example
 * ```ts
 * const services = openrc({ runlevel: "default" });
 * await services.enable("sshd"); // rc-update add sshd default
 * ```
 *
 * Long because: a provider is one object of verbs over rc-service and rc-update; each verb is
 * short.
 */
export function openrc(options: OpenRcOptions = {}): ServiceManager {
  const runlevel = options.runlevel ?? "default";
  const rcService = options.rcService ?? "rc-service";
  const rcUpdate = options.rcUpdate ?? "rc-update";
  const own = options.own ?? OWN_SERVICES;
  const run: RunVia = { env: options.env, via: options.via };
  const guard = (name: string) => refuseOwn(name, own, "the OpenRC");

  return {
    name: "openrc",

    async state(name: string): Promise<ServiceState> {
      guard(name);
      const exists = await runProgram([rcService, "--exists", name], run);
      if (exists.code !== 0) {
        if (exists.stderr.trim() !== "") throw programFailed(exists);
        return {
          exists: false,
          enabled: false,
          running: false,
          reloadNeeded: false,
          process: null,
          detail: "",
        };
      }
      const levels = await mustRun([rcUpdate, "show", runlevel], run);
      const enabled = parseRcUpdateShow(levels.stdout).get(name)?.includes(runlevel) ?? false;
      const status = await runProgram([rcService, name, "status"], run);
      const word = /status:\s*(\S+)/.exec(status.stdout + status.stderr)?.[1] ??
        `exit ${status.code}`;
      const running = status.code === STARTED;
      const pid = running ? daemonPid(options.root ?? "", name) : null;
      return {
        exists: true,
        enabled,
        running,
        reloadNeeded: false,
        process: pid === null ? null : `pid ${pid}`,
        detail: `${enabled ? `in runlevel ${runlevel}` : `not in runlevel ${runlevel}`}, ${word}`,
      };
    },
    async enable(name: string): Promise<void> {
      guard(name);
      await mustRun([rcUpdate, "add", name, runlevel], run);
    },
    async disable(name: string): Promise<void> {
      guard(name);
      await mustRun([rcUpdate, "del", name, runlevel], run);
    },
    async start(name: string): Promise<void> {
      guard(name);
      await mustRun([rcService, name, "start"], run);
    },
    async stop(name: string): Promise<void> {
      guard(name);
      await mustRun([rcService, name, "stop"], run);
    },
    async restart(name: string): Promise<void> {
      guard(name);
      await mustRun([rcService, name, "restart"], run);
    },
    async reloadService(name: string): Promise<void> {
      guard(name);
      // Only scripts that offer it (extra_started_commands="reload"); rc-service says otherwise.
      await mustRun([rcService, name, "reload"], run);
    },
    reload(name: string): Promise<void> {
      guard(name);
      return Promise.resolve(); // OpenRC reads the init script on every use.
    },
  };
}

/** Parse `rc-update show [RUNLEVEL]` lines (" name | level1 level2") into name → runlevels. */
export function parseRcUpdateShow(stdout: string): Map<string, string[]> {
  const services = new Map<string, string[]>();
  for (const line of stdout.split("\n")) {
    const match = /^\s*(\S+)\s+\|\s*(.*)$/.exec(line);
    if (match) services.set(match[1], match[2].trim().split(/\s+/).filter(Boolean));
  }
  return services;
}

/** Read a small regular file without following a symlink or blocking on a FIFO; null if absent. */
function readSmall(path: string): string | null {
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;
  let fd: number;
  try {
    fd = openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    if (!fstatSync(fd).isFile()) return null;
    const buffer = new Uint8Array(4096);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    return new TextDecoder().decode(buffer.subarray(0, n));
  } finally {
    closeSync(fd);
  }
}

function pidIn(text: string | null): number | null {
  const match = /^\s*([1-9][0-9]{0,9})\s*$/.exec(text ?? "");
  return match ? Number(match[1]) : null;
}

/**
 * The pid of a started OpenRC service's daemon (see the module's comment), or null.
 * `root` prefixes every path read (the machine's root as seen from here).
 */
export function daemonPid(root: string, name: string): number | null {
  if (name.includes("/") || name.startsWith(".")) return null;
  const options = `${root}/run/openrc/options/${name}`;
  const supervised = pidIn(readSmall(`${options}/child_pid`));
  if (supervised !== null) return supervised;
  // openrc-run keeps the script's pidfile there; start-stop-daemon's records name it too.
  const pidfiles = [readSmall(`${options}/pidfile`)?.trim()];
  try {
    for (const record of readdirSync(`${root}/run/openrc/daemons/${name}`).sort()) {
      const text = readSmall(`${root}/run/openrc/daemons/${name}/${record}`) ?? "";
      pidfiles.push(/^pidfile=(.+)$/m.exec(text)?.[1]);
    }
  } catch { /* no records */ }
  for (const pidfile of pidfiles) {
    // Only a pidfile under /run: the adapter reads nothing else (permission set: /run).
    if (!pidfile || !/^\/(var\/)?run\//.test(pidfile) || pidfile.includes("/../")) continue;
    const pid = pidIn(readSmall(`${root}${pidfile.replace(/^\/var\/run\//, "/run/")}`));
    if (pid !== null) return pid;
  }
  return null;
}
