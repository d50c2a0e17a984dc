/**
 * The container resource: a container of the declared name, created from an
 * image pinned by digest, labelled as the host's (a marker) and with the digest
 * of what its declaration gave the runtime (everything but the resource's `id`
 * and `restartOn`, which name and order it among resources and make no container).
 * A different digest means the declaration changed: the container is replaced. A
 * control plane that names the bundle's container by another id (the first node's
 * handover) or adds a `restartOn` keeps it running. A container of that name
 * without the marker is not the host's: it is never touched, the apply fails.
 * No longer declared: removed, if it still carries the marker.
 *
 * Restart on change (DESIGN.md §19): a running container whose declaration did
 * not change is restarted once, at its own position, when a resource its
 * `restartOn` names (declared before it, e.g. a file it mounts) changed in this
 * apply; the read-back proves a new run by the runtime's State.StartedAt.
 */
import * as v from "valibot";
import { digestOf } from "../declaration/canonical.ts";
import {
  absolutePath,
  lineProblem,
  lineSafe,
  record,
  resourceId,
  restartOn,
} from "../declaration/fields.ts";
import type { ContainerInfo, ContainerRuntime, ContainerSpec } from "../providers.ts";
import {
  type Change,
  change,
  changedDependencies,
  type Diff,
  type KindContext,
  type Release,
  type ReleaseOptions,
  type ResourceKind,
  type RuleScope,
  wants,
} from "./kind.ts";
import { NoProviderError, passState, ResourceError, type Restarted } from "./kind.ts";
import { checkManagedPath } from "./_rules.ts";
import { checkMountSource } from "./_fs.ts";

/** A mount path: absolute, and nothing the runtime's `--mount a=b,c=d` syntax cannot carry. */
const mountPath = v.pipe(
  absolutePath,
  v.check(
    (p) => !/[,"]/.test(p),
    "holds a comma or a double quote, which the container runtime's --mount syntax cannot carry; " +
      "mount a directory whose path has neither",
  ),
);

const mount = v.strictObject({
  source: mountPath,
  target: mountPath,
  readOnly: v.optional(v.boolean()),
});

/** Resource: a container from an image pinned by digest. */
export const ContainerSchema = v.strictObject({
  type: v.literal("container"),
  id: resourceId,
  name: v.pipe(
    v.string(),
    v.regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/, "a container name is letters, digits and _ . -"),
  ),
  image: v.pipe(
    v.string(),
    v.regex(
      /^[a-z0-9][a-z0-9._/:-]*@sha256:[a-f0-9]{64}$/,
      (i) =>
        `image ${
          JSON.stringify(i.input)
        } is not pinned by digest; write it as name@sha256:<64 hex digits> (tags are refused)`,
    ),
  ),
  args: v.array(lineSafe("an argument")),
  env: record<string>(
    "env",
    (name) =>
      /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? undefined : "an env name is letters, digits and _",
    (value) =>
      typeof value !== "string" ? "an env value is a string" : lineProblem("an env value", value),
  ),
  mounts: v.array(mount),
  restart: v.picklist(["no", "always", "on-failure", "unless-stopped"]),
  /** Ids of resources declared before it (a mounted file …) whose change restarts it. */
  restartOn: v.optional(restartOn),
});

/** A container resource. */
export type ContainerResource = v.InferOutput<typeof ContainerSchema>;

/** What a container check can find: missing, made from another declaration, stopped. */
type ContainerChange = Change<"create" | "replace" | "start" | "restart"> & { before?: string };

/** The labels the host puts on every container it creates. */
export const CONTAINER_LABELS = {
  /** Marker: the host created this container. */
  owner: "nox-mesh-host.owner",
  /** The digest of what the declaration gave the runtime ({@link containerDigest}). */
  digest: "nox-mesh-host.digest",
  /** The resource id, for people reading `podman ps`. */
  resource: "nox-mesh-host.resource",
} as const;

/** The marker's value. */
export const OWNER_VALUE = "nox-mesh-host";

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

/**
 * The digest a container is labelled with: of the canonical resource without its `id`
 * and `restartOn`, so that only what the runtime is given tells containers apart.
 */
export function containerDigest(resource: ContainerResource): Promise<string> {
  const { id: _id, restartOn: _restartOn, ...made } = resource;
  return digestOf(made);
}

/**
 * Whether a container's digest label says it was made from `resource`: the digest of
 * {@link containerDigest}, or of the whole resource, as earlier hosts labelled them
 * (a host upgrade replaces no container).
 */
async function madeFrom(label: string | undefined, resource: ContainerResource): Promise<boolean> {
  if (label === undefined) return false;
  return label === await containerDigest(resource) || label === await digestOf(resource);
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
      [CONTAINER_LABELS.digest]: await containerDigest(resource),
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

/** Refuse the container when any of its mount sources could be swapped by someone but root. */
async function checkMountSources(ctx: KindContext, resource: ContainerResource): Promise<void> {
  for (const { source } of resource.mounts) await checkMountSource(ctx, source);
}

/**
 * What this pass started, restarted or reloaded, by resource id, with the process before
 * (the read-back compares against it, so a restart that left the same process running
 * reads back as not done): the kind's own state for the pass.
 */
const restarted = passState(() => new Map<string, Restarted>());

/** The container kind. */
export const containerKind: ResourceKind<ContainerResource, ContainerChange> = {
  type: "container",
  schema: ContainerSchema,
  needs: "containers",

  key: (resource) => `container:${resource.name}`,

  restartOn: (resource) => resource.restartOn ?? [],

  rules(resource: ContainerResource, at: string, scope: RuleScope): void {
    resource.mounts.forEach((m, i) =>
      checkManagedPath(m.source, `${at}.mounts[${i}].source`, scope)
    );
  },

  async check(ctx: KindContext, resource: ContainerResource): Promise<Diff<ContainerChange>> {
    const runtime = containers(ctx);
    await checkMountSources(ctx, resource);
    const info = await runtime.inspect(resource.name);
    if (info === null) return { exists: false, changes: [change("create")] };
    if (!isOurs(info)) throw notOurs(resource.name, runtime.name);
    const have = info.labels[CONTAINER_LABELS.digest];
    if (!await madeFrom(have, resource)) {
      const why = have === undefined ? "its digest label is missing" : "the declaration changed";
      return { exists: true, changes: [change("replace", `replace (${why})`)] };
    }
    if (!info.running) {
      return { exists: true, changes: [change("start", `start (it is ${info.status})`)] };
    }
    const done = restarted(ctx).get(resource.id);
    if (done !== undefined) {
      // The read-back of this pass's restart: a new run has a new start time.
      if (done.how === "restart" && done.before === info.startedAt) {
        return {
          exists: true,
          changes: [{
            ...change("restart", `restart: still the same run (started ${info.startedAt})`),
            before: info.startedAt,
          }],
        };
      }
      return { exists: true, changes: [] };
    }
    const changed = changedDependencies(ctx, resource.restartOn);
    if (changed.length > 0) {
      return {
        exists: true,
        changes: [{
          ...change("restart", `restart (${changed.join(", ")} changed)`),
          before: info.startedAt,
        }],
      };
    }
    return { exists: true, changes: [] };
  },

  async apply(
    ctx: KindContext,
    resource: ContainerResource,
    diff: Diff<ContainerChange>,
  ): Promise<void> {
    const runtime = containers(ctx);
    // Look again right before acting: never remove what is not ours, never hand the
    // runtime a mount source someone else could swap (it resolves them at every start).
    await checkMountSources(ctx, resource);
    const info = await runtime.inspect(resource.name);
    // A new run already: the read-back must not restart it for its restartOn.
    restarted(ctx).set(resource.id, { how: "start", before: null });
    if (info === null) {
      await runtime.create(await containerSpec(resource));
      return;
    }
    if (!isOurs(info)) throw notOurs(resource.name, runtime.name);
    if (wants(diff, "replace")) {
      await runtime.remove(resource.name);
      await runtime.create(await containerSpec(resource));
    } else if (!info.running) {
      await runtime.start(resource.name);
    } else if (wants(diff, "restart")) {
      const before = diff.changes.find((c) => c.what === "restart")?.before ?? info.startedAt;
      // Replaces the "start" mark above: this run must be proven new by its start time.
      restarted(ctx).set(resource.id, { how: "restart", before });
      await runtime.restart(resource.name);
    }
  },

  async release(
    ctx: KindContext,
    { name }: ContainerResource,
    { dryRun }: ReleaseOptions,
  ): Promise<Release> {
    const runtime = containers(ctx);
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
