/**
 * systemd: the service verbs on systemctl. State is read with one
 * `systemctl show` (load, active and unit-file state, and whether the unit's
 * file changed since systemd read it, and the InvocationID of the running
 * instance: a restart is proven by a new one); `reload` runs daemon-reload only
 * when systemd says a reload is needed. Refuses the host's own unit.
 */
import type { ServiceManager, ServiceState } from "../../src/providers.ts";
import { OWN_SERVICES, refuseOwn } from "../_own_service.ts";
import { mustRun, type RunVia } from "../_run.ts";

/** How to reach systemd. */
export interface SystemdOptions {
  /** The program (default "systemctl"). */
  program?: string;
  /** Services never to act on (default: the host's own). */
  own?: readonly string[];
  /** Extra environment, and an argv prefix to run the tool elsewhere (tests: a lab machine). */
  env?: Record<string, string>;
  via?: readonly string[];
}

/** The properties `state` asks for. */
export const SHOW_PROPERTIES = [
  "LoadState",
  "ActiveState",
  "UnitFileState",
  "NeedDaemonReload",
  "InvocationID",
];

/** Unit-file states in which `systemctl is-enabled` succeeds: the unit starts at boot. */
const ENABLED = new Set([
  "enabled",
  "enabled-runtime",
  "static",
  "alias",
  "indirect",
  "generated",
  "transient",
]);

/**
 * Create the systemd adapter.
 *
 * @example
 * ```ts
 * const services = systemd();
 * await services.state("sshd"); // { exists: true, enabled: true, running: true, … }
 * ```
 */
export function systemd(options: SystemdOptions = {}): ServiceManager {
  const program = options.program ?? "systemctl";
  const own = options.own ?? OWN_SERVICES;
  const run: RunVia = { env: options.env, via: options.via };
  const ctl = (...args: string[]) => mustRun([program, ...args], run);
  const guard = (name: string) => refuseOwn(name, own, "the systemd");

  return {
    name: "systemd",

    async state(name: string): Promise<ServiceState> {
      guard(name);
      const r = await ctl("show", `--property=${SHOW_PROPERTIES.join(",")}`, "--", name);
      return parseShow(r.stdout);
    },
    async enable(name: string): Promise<void> {
      guard(name);
      await ctl("enable", "--", name);
    },
    async disable(name: string): Promise<void> {
      guard(name);
      await ctl("disable", "--", name);
    },
    async start(name: string): Promise<void> {
      guard(name);
      await ctl("start", "--", name);
    },
    async stop(name: string): Promise<void> {
      guard(name);
      await ctl("stop", "--", name);
    },
    async restart(name: string): Promise<void> {
      guard(name);
      await ctl("restart", "--", name);
    },
    async reloadService(name: string): Promise<void> {
      guard(name);
      await ctl("reload", "--", name);
    },
    async reload(name: string): Promise<void> {
      guard(name);
      const r = await ctl("show", "--property=NeedDaemonReload", "--", name);
      if (/^NeedDaemonReload=yes$/m.test(r.stdout)) await ctl("daemon-reload");
    },
  };
}

/** Turn `systemctl show --property=…` output (KEY=value lines) into a {@link ServiceState}. */
export function parseShow(stdout: string): ServiceState {
  const props = new Map<string, string>();
  for (const line of stdout.split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) props.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  const load = props.get("LoadState") ?? "";
  const active = props.get("ActiveState") ?? "";
  const file = props.get("UnitFileState") ?? "";
  const running = active === "active" || active === "reloading";
  const invocation = props.get("InvocationID") ?? "";
  return {
    exists: load !== "" && load !== "not-found",
    enabled: ENABLED.has(file),
    running,
    reloadNeeded: props.get("NeedDaemonReload") === "yes",
    process: running && invocation !== "" ? `InvocationID ${invocation}` : null,
    detail: [load, file, active].filter(Boolean).join(", "),
  };
}
