/**
 * The container resource: a container of the declared name, created from an
 * image pinned by digest, labelled as the host's (a marker) and with the digest
 * of the canonical resource declaration that made it. A different digest means
 * the declaration changed: the container is replaced. A container of that name
 * without the marker is not the host's: it is never touched, the apply fails.
 * No longer declared: removed, if it still carries the marker.
 */
import { digestOf } from "../declaration/canonical.ts";
import type { ContainerResource } from "../declaration/schema.ts";
import type { ContainerInfo, ContainerRuntime, ContainerSpec } from "../ports.ts";
import type { HeldResource } from "../store/store.ts";
import type { Check, KindContext, Release, ResourceKind } from "./kind.ts";
import { NoProviderError, ResourceError } from "./kind.ts";

/** The labels the host puts on every container it creates. */
export const CONTAINER_LABELS = {
  /** Marker: the host created this container. */
  owner: "nox-mesh-host.owner",
  /** The digest of the canonical resource declaration that made it. */
  digest: "nox-mesh-host.digest",
  /** The resource id, for people reading `podman ps`. */
  resource: "nox-mesh-host.resource",
} as const;

/** The marker's value. */
export const OWNER_VALUE = "nox-mesh-host";

const REPLACE = "replace";
const START = "start";

function containers(ctx: KindContext): ContainerRuntime {
  const runtime = ctx.providers.containers;
  if (!runtime) {
    throw new NoProviderError("container", "a working container runtime (podman or docker)");
  }
  return runtime;
}

/** Whether the host made this container (it carries the marker). */
export function isOurs(info: ContainerInfo): boolean {
  return info.labels[CONTAINER_LABELS.owner] === OWNER_VALUE;
}

/** What the runtime is asked to create for a resource. */
export async function containerSpec(resource: ContainerResource): Promise<ContainerSpec> {
  return {
    name: resource.name,
    image: resource.image,
    args: resource.args,
    env: resource.env,
    mounts: resource.mounts,
    restart: resource.restart,
    labels: {
      [CONTAINER_LABELS.owner]: OWNER_VALUE,
      [CONTAINER_LABELS.digest]: await digestOf(resource),
      [CONTAINER_LABELS.resource]: resource.id,
    },
  };
}

function notOurs(name: string, runtime: string): ResourceError {
  return new ResourceError(
    "resource.container-not-ours",
    `a container named "${name}" exists in ${runtime} but was not created by this host ` +
      `(it has no ${CONTAINER_LABELS.owner}=${OWNER_VALUE} label); the host never touches it`,
    { hint: "remove or rename that container by hand, or give the resource another name" },
  );
}

/** The container kind. */
export const containerKind: ResourceKind<ContainerResource> = {
  type: "container",

  async check(ctx: KindContext, resource: ContainerResource): Promise<Check> {
    const runtime = containers(ctx);
    const info = await runtime.inspect(resource.name);
    if (info === null) return { exists: false, changes: ["create"] };
    if (!isOurs(info)) throw notOurs(resource.name, runtime.name);
    const have = info.labels[CONTAINER_LABELS.digest];
    if (have !== await digestOf(resource)) {
      const why = have === undefined ? "its digest label is missing" : "the declaration changed";
      return { exists: true, changes: [`${REPLACE} (${why})`] };
    }
    if (!info.running) return { exists: true, changes: [`${START} (it is ${info.status})`] };
    return { exists: true, changes: [] };
  },

  async apply(ctx: KindContext, resource: ContainerResource, found: Check): Promise<void> {
    const runtime = containers(ctx);
    // Look again right before acting: never remove what is not ours.
    const info = await runtime.inspect(resource.name);
    if (info === null) {
      await runtime.create(await containerSpec(resource));
      return;
    }
    if (!isOurs(info)) throw notOurs(resource.name, runtime.name);
    if (found.changes.some((c) => c.startsWith(REPLACE))) {
      await runtime.remove(resource.name);
      await runtime.create(await containerSpec(resource));
    } else if (!info.running) {
      await runtime.start(resource.name);
    }
  },

  async release(ctx: KindContext, held: HeldResource, dryRun: boolean): Promise<Release> {
    const runtime = containers(ctx);
    const name = (held.spec as ContainerResource).name;
    const info = await runtime.inspect(name);
    if (info === null) return { outcome: "removed", detail: "already gone" };
    if (!isOurs(info)) {
      return {
        outcome: "forgotten",
        detail: `the container named "${name}" no longer carries the host's label; left in place`,
      };
    }
    if (!dryRun) await runtime.remove(name);
    return { outcome: "removed" };
  },
};
