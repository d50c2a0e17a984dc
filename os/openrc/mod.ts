/**
 * OpenRC: the service verbs on rc-update (runlevels) and rc-service (state).
 * A service is "enabled" when it is in the configured runlevel (default
 * "default"). Refuses the host's own service.
 */
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
        return { exists: false, enabled: false, running: false, reloadNeeded: false, detail: "" };
      }
      const levels = await mustRun([rcUpdate, "show", runlevel], run);
      const enabled = parseRcUpdateShow(levels.stdout).get(name)?.includes(runlevel) ?? false;
      const status = await runProgram([rcService, name, "status"], run);
      const word = /status:\s*(\S+)/.exec(status.stdout + status.stderr)?.[1] ??
        `exit ${status.code}`;
      return {
        exists: true,
        enabled,
        running: status.code === STARTED,
        reloadNeeded: false,
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
