/**
 * The service resource: enabled and running as declared, asked of the init
 * system's service manager. A service no longer declared is forgotten and left
 * as it is. The host's own service is refused at parse time and again by every
 * service adapter.
 */
import type { ServiceResource } from "../declaration/schema.ts";
import type { ServiceManager } from "../ports.ts";
import type { Check, KindContext, Release, ResourceKind } from "./kind.ts";
import { NoProviderError, ResourceError } from "./kind.ts";

function services(ctx: KindContext): ServiceManager {
  const manager = ctx.providers.services;
  if (!manager) {
    throw new NoProviderError("service", "a running service manager (systemd or OpenRC)");
  }
  return manager;
}

const RELOAD = "reload the changed definition";

/** The service kind. */
export const serviceKind: ResourceKind<ServiceResource> = {
  type: "service",

  async check(ctx: KindContext, resource: ServiceResource): Promise<Check> {
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
    const changes: string[] = [];
    if (state.reloadNeeded) changes.push(RELOAD);
    if (state.enabled !== resource.enabled) changes.push(resource.enabled ? "enable" : "disable");
    if (state.running !== resource.running) changes.push(resource.running ? "start" : "stop");
    return { exists: true, changes };
  },

  async apply(ctx: KindContext, resource: ServiceResource, found: Check): Promise<void> {
    const manager = services(ctx);
    const name = resource.name;
    if (found.changes.includes(RELOAD)) await manager.reload(name);
    if (found.changes.includes("enable")) await manager.enable(name);
    if (found.changes.includes("disable")) await manager.disable(name);
    if (found.changes.includes("start")) await manager.start(name);
    if (found.changes.includes("stop")) await manager.stop(name);
  },

  release(): Promise<Release> {
    return Promise.resolve({
      outcome: "forgotten",
      detail: "services are left as they are when no longer declared",
    });
  },
};
