/**
 * The service resource: enabled and running as declared, asked of the init
 * system's service manager. A service no longer declared is forgotten and left
 * as it is. The host's own service is refused at parse time and again by every
 * service adapter.
 *
 * Restart on change (DESIGN.md §19): a running service is restarted once, at its
 * own position, when any resource its `restartOn` names (all declared before it)
 * changed in this apply, or when its definition changed on disk (systemd's
 * NeedDaemonReload: daemon-reload, then restart). With `reload: true` a change of
 * what `restartOn` names reloads it instead (the same process re-reads its
 * configuration); a changed definition always restarts. The read-back proves a
 * restart by a new process identity (systemd InvocationID, OpenRC pid): a restart
 * that left the same process reads back as not done and fails the apply.
 */
import * as v from "valibot";
import { resourceId, restartOn } from "../declaration/fields.ts";
import type { ServiceManager } from "../providers.ts";
import {
  type Change,
  change,
  changedDependencies,
  type Diff,
  type KindContext,
  type Release,
  type ResourceKind,
  type RuleScope,
  wants,
} from "./kind.ts";
import { NoProviderError, passState, ResourceError, type Restarted } from "./kind.ts";
import { describeError } from "../errors.ts";

/** systemd's unit types: a name ending in one of them names a unit of that type. */
export const UNIT_TYPES: readonly string[] = [
  "service",
  "socket",
  "target",
  "device",
  "mount",
  "automount",
  "swap",
  "timer",
  "path",
  "slice",
  "scope",
];

/**
 * What reboots, powers off, suspends or isolates the node, for both inits, with what it
 * does: systemd's targets (refused as targets anyway) and the services behind them,
 * systemd's rescue and emergency modes and its debug shell, and OpenRC's shutdown
 * services. A service resource naming one of them started or enabled is refused over the
 * link (the bundle, or host.json's permit.services, may allow it): one message could take
 * every node of a mesh off it, and with it the link that would repair them.
 */
export const STOPS_THE_NODE: ReadonlyMap<string, string> = new Map([
  ...([
    ["reboot", "reboots the node"],
    ["soft-reboot", "restarts the node's whole user space"],
    ["kexec", "reboots the node into another kernel"],
    ["poweroff", "powers the node off"],
    ["halt", "halts the node"],
    ["suspend", "suspends the node"],
    ["hibernate", "hibernates the node"],
    ["hybrid-sleep", "suspends the node"],
    ["suspend-then-hibernate", "suspends the node"],
  ] as const).flatMap(([what, does]): [string, string][] => [
    [`${what}.target`, does],
    [`systemd-${what}`, does],
  ]),
  ["sleep.target", "suspends the node"],
  ["ctrl-alt-del.target", "reboots the node"],
  ["emergency.target", "isolates the node in emergency mode (no network)"],
  ["rescue.target", "isolates the node in rescue mode (no network)"],
  ["emergency", "isolates the node in emergency mode (no network)"],
  ["rescue", "isolates the node in rescue mode (no network)"],
  ["debug-shell", "opens a root shell on a console that asks for no password"],
  ["killprocs", "(OpenRC) kills every process of the node"],
  ["mount-ro", "(OpenRC) remounts every file system read-only"],
  [
    "savecache",
    "(OpenRC) runs only as the node shuts down: it saves the init's state for the next boot",
  ],
]);

/**
 * What `name` (any unit of the name: its .service, .socket, .timer or .path, an OpenRC
 * name.x) does to the node when started, when it is in {@link STOPS_THE_NODE}.
 */
export function stopsTheNode(name: string): string | undefined {
  return STOPS_THE_NODE.get(name) ?? STOPS_THE_NODE.get(name.split(/[.@]/, 1)[0]);
}

/** The unit types a service resource may name: services and what starts them. */
export const SERVICE_UNIT_TYPES: readonly string[] = ["service", "socket", "timer", "path"];

/** The unit type a service name names: its suffix when that is a unit type, else "service". */
export function unitType(name: string): string {
  const suffix = name.slice(name.lastIndexOf(".") + 1);
  return name.includes(".") && UNIT_TYPES.includes(suffix) ? suffix : "service";
}

/** Resource: a service of the init system, enabled and/or running as declared. */
export const ServiceSchema = v.strictObject({
  type: v.literal("service"),
  id: resourceId,
  name: v.pipe(
    v.string(),
    v.regex(
      /^[A-Za-z0-9][A-Za-z0-9@._:\\-]{0,250}$/,
      "a service name is letters, digits and @ . _ : - \\",
    ),
    v.check(
      (n) => SERVICE_UNIT_TYPES.includes(unitType(n)),
      (i) =>
        `"${i.input}" is a .${unitType(i.input)} unit` +
        (stopsTheNode(i.input) ? ` (it ${stopsTheNode(i.input)})` : "") +
        `; a service resource names a service ` +
        `(or its .socket, .timer or .path unit), never a target, mount, device, swap, slice or scope`,
    ),
  ),
  enabled: v.boolean(),
  running: v.boolean(),
  /** Ids of resources declared before it whose change restarts it. */
  restartOn: v.optional(restartOn),
  /** Reload instead of restart when what `restartOn` names changed (the service supports it). */
  reload: v.optional(v.boolean()),
});

/** A service resource. */
export type ServiceResource = v.InferOutput<typeof ServiceSchema>;

/** A service name without the ".service" suffix systemd allows. */
export function serviceBaseName(name: string): string {
  return name.endsWith(".service") ? name.slice(0, -".service".length) : name;
}

/** What a service check can find; a restart or reload carries the process identity before it. */
type ServiceChange =
  & Change<"reload" | "enable" | "disable" | "start" | "stop" | "restart" | "reload-service">
  & { before?: string | null };

function services(ctx: KindContext): ServiceManager {
  const manager = ctx.providers.services;
  if (!manager) {
    throw new NoProviderError("service", "a running service manager (systemd or OpenRC)");
  }
  return manager;
}

/**
 * What this pass started, restarted or reloaded, by resource id, with the process before
 * (the read-back compares against it, so a restart that left the same process running
 * reads back as not done): the kind's own state for the pass.
 */
const restarted = passState(() => new Map<string, Restarted>());

/** The service kind. */
export const serviceKind: ResourceKind<ServiceResource, ServiceChange> = {
  type: "service",
  schema: ServiceSchema,
  needs: "services",

  key: (resource) => `service:${serviceBaseName(resource.name)}`,

  restartOn: (resource) => resource.restartOn ?? [],

  rules(resource: ServiceResource, at: string, scope: RuleScope): void {
    // Every unit of the host's name: its .service, .socket, .timer, .path, instances (@), and
    // OpenRC's multiplexed names (name.x), all start or stop the host.
    const base = resource.name.split(/[.@]/, 1)[0];
    if (scope.ownServices.some((own) => serviceBaseName(own) === base)) {
      scope.problems.push({
        path: `${at}.name`,
        message: `"${resource.name}" is a unit of the host's own service ${base}; the ` +
          "installation owns every unit of that name, never a declaration",
      });
    }
    const does = stopsTheNode(resource.name);
    if (
      does && (resource.running || resource.enabled) && !scope.trusted &&
      !scope.permit.services.has(base) && !scope.permit.services.has(resource.name)
    ) {
      scope.problems.push({
        path: `${at}.${resource.running ? "running" : "enabled"}`,
        message: `"${resource.name}" ${does}; a declaration from the link or a file may not ` +
          "start or enable it (it could take the node, and the link that repairs it, off the " +
          `mesh): declare it in the bundle the host carries, or name "${base}" in the ` +
          "permit.services of this machine's host.json",
      });
    }
  },

  async check(ctx: KindContext, resource: ServiceResource): Promise<Diff<ServiceChange>> {
    const manager = services(ctx);
    const state = await manager.state(resource.name);
    if (!state.exists) {
      throw new ResourceError(
        "resource.no-such-service",
        `${manager.name} has no service named "${resource.name}"`,
        {
          hint: "install the package that ships it, or declare its unit file / init script " +
            "before this service (the order is stated, never derived)",
        },
      );
    }
    const changes: ServiceChange[] = [];
    if (state.reloadNeeded) changes.push(change("reload", "reload the changed definition"));
    if (state.enabled !== resource.enabled) {
      changes.push(change(resource.enabled ? "enable" : "disable"));
    }
    if (state.running !== resource.running) {
      changes.push(change(resource.running ? "start" : "stop"));
    } else if (state.running) {
      const restart = restartChange(ctx, resource, state.reloadNeeded, state.process);
      if (restart) changes.push(restart);
    }
    return { exists: true, changes };
  },

  async apply(
    ctx: KindContext,
    resource: ServiceResource,
    diff: Diff<ServiceChange>,
  ): Promise<void> {
    const manager = services(ctx);
    const name = resource.name;
    if (wants(diff, "reload")) await manager.reload(name);
    if (wants(diff, "enable")) await manager.enable(name);
    if (wants(diff, "disable")) await manager.disable(name);
    if (wants(diff, "start")) {
      restarted(ctx).set(resource.id, { how: "start", before: null });
      await manager.start(name);
    }
    if (wants(diff, "stop")) await manager.stop(name);
    for (const c of diff.changes) {
      if (c.what !== "restart" && c.what !== "reload-service") continue;
      const how = c.what === "restart" ? "restart" : "reload";
      restarted(ctx).set(resource.id, { how, before: c.before ?? null });
      try {
        await (how === "restart" ? manager.restart(name) : manager.reloadService(name));
      } catch (cause) {
        throw new ResourceError(
          "resource.restart-failed",
          `${how}ing ${manager.name} service "${name}" failed: ${describeError(cause)}`,
          { hint: `see the service's log; ${c.text}` },
        );
      }
    }
  },

  release(): Promise<Release> {
    return Promise.resolve({
      outcome: "forgotten",
      detail: "services are left as they are when no longer declared",
    });
  },
};

/**
 * Whether a running service, declared running, is to be restarted (or reloaded) now;
 * after this pass restarted it, whether the restart read back (a new process).
 */
function restartChange(
  ctx: KindContext,
  resource: ServiceResource,
  definitionChanged: boolean,
  process: string | null,
): ServiceChange | undefined {
  if (!resource.running) return undefined;
  const done = restarted(ctx).get(resource.id);
  if (done !== undefined) {
    // The read-back of a restart made in this pass: a new process, or it was not done.
    // (With no identity before, as an OpenRC daemon without a pidfile, the init's word is all.)
    if (
      done.how !== "restart" || done.before === null || (process ?? done.before) !== done.before
    ) {
      return undefined;
    }
    const text = process === null
      ? `restart: no process to be seen after the restart (it was ${done.before})`
      : `restart: still the same process after the restart (${process})`;
    return { ...change("restart", text), before: process };
  }
  const changed = changedDependencies(ctx, resource.restartOn);
  const because = changed.length ? `${changed.join(", ")} changed` : "";
  if (definitionChanged) {
    const why = ["its definition changed on disk", because].filter(Boolean).join("; ");
    return { ...change("restart", `restart (${why})`), before: process };
  }
  if (changed.length === 0) return undefined;
  return resource.reload
    ? { ...change("reload-service", `reload (${because})`), before: process }
    : { ...change("restart", `restart (${because})`), before: process };
}
