/**
 * The list of resource kinds: the only place that names them all. Adding a kind is its
 * module, its adapter, and its line in ALL (with its import); `Resource` follows from it.
 */
import { actionKind } from "./action.ts";
import { containerKind } from "./container.ts";
import { directoryKind } from "./directory.ts";
import { fileKind } from "./file.ts";
import { firewallKind } from "./firewall.ts";
import { overlayKind } from "./overlay.ts";
import { sysctlKind } from "./sysctl.ts";
import { mountKind } from "./mount.ts";
import type { Place, ResourceKind } from "./kind.ts";
import { MAX_PATH_BYTES } from "../declaration/paths.ts";
import { packageKind } from "./package.ts";
import { serviceKind } from "./service.ts";
import { groupKind } from "./group.ts";
import { userKind } from "./user.ts";

/** Every kind, in the order messages list them. */
const ALL = [
  directoryKind,
  fileKind,
  packageKind,
  serviceKind,
  containerKind,
  actionKind,
  overlayKind,
  firewallKind,
  sysctlKind,
  groupKind,
  userKind,
  mountKind,
] as const;

/** The resource a kind manages. */
type ResourceOf<K> = K extends ResourceKind<infer R, infer _C> ? R : never;

/** Any resource. */
export type Resource = ResourceOf<typeof ALL[number]>;

/** The name of a resource type. */
export type ResourceType = Resource["type"];

/** The kinds by type (a Map: no type name reaches Object.prototype). */
export const KINDS: ReadonlyMap<string, ResourceKind<Resource>> = new Map(
  ALL.map((kind) => [kind.type, kind as unknown as ResourceKind<Resource>]),
);

/** The kind for one resource (or a held record of one). */
export function kindOf<R extends Resource>(resource: { type: R["type"] }): ResourceKind<R> {
  const kind = KINDS.get(resource.type);
  if (!kind) throw new Error(`no resource kind "${resource.type}"`); // the parse admits none
  return kind as unknown as ResourceKind<R>;
}

/** Whether a change to resources of `type` can cut the node off its broker (kind.ts `mayCutLink`). */
export function mayCutLink(type: string): boolean {
  return KINDS.get(type)?.mayCutLink === true;
}

/** The one thing a resource manages, shared by resources that would fight over it. */
export function resourceKey(resource: Resource): string {
  return kindOf(resource).key(resource);
}

/**
 * Where a resource (or a held record of one) lies among paths, from its kind's `place`;
 * `undefined` for kinds that manage no path, and for a record that is not one the parse
 * could accept (a path longer than any path, or no path at all: a store edited by hand),
 * which then encloses nothing and lies inside nothing.
 */
export function placeOf(resource: { type: string }): Place | undefined {
  const fits = (path: unknown) =>
    typeof path === "string" && path.startsWith("/") && path.length <= MAX_PATH_BYTES;
  try {
    const place = KINDS.get(resource.type)?.place?.(resource as Resource);
    if (place === undefined || !fits(place.path)) return undefined;
    if (place.uses !== undefined && !(Array.isArray(place.uses) && place.uses.every(fits))) {
      return undefined;
    }
    return place;
  } catch {
    return undefined; // a record whose fields are not what its kind reads
  }
}

/**
 * The content digests a resource (or a held record of one) declares by reference, from its
 * kind's `references`: only strings, and nothing for a record whose fields are not what its
 * kind reads (a store edited by hand).
 */
export function referencesOf(resource: { type: string }): string[] {
  try {
    const found = KINDS.get(resource.type)?.references?.(resource as Resource) ?? [];
    return Array.isArray(found) ? found.filter((d): d is string => typeof d === "string") : [];
  } catch {
    return [];
  }
}

/**
 * Values kept by path, found again along a path from / down in time linear in its length
 * (a map of every directory above each path would cost the square of the path's length,
 * and paths may be 4095 bytes deep in "/a"s).
 */
export class PathTree<T> {
  private readonly root: PathNode<T> = { children: new Map(), values: [] };

  /** Keep `value` at `path`. */
  add(path: string, value: T): void {
    let node = this.root;
    for (const name of path.split("/").slice(1)) {
      let next = node.children.get(name);
      if (next === undefined) node.children.set(name, next = { children: new Map(), values: [] });
      node = next;
    }
    node.values.push(value);
  }

  /**
   * Visit the values kept at each directory above `path`, outermost first ("above"), then
   * those kept at `path` itself ("at"); `end` is where that directory's path ends in `path`.
   */
  along(path: string, visit: (value: T, where: "above" | "at", end: number) => void): void {
    const names = path.split("/").slice(1);
    let node: PathNode<T> | undefined = this.root;
    let end = 0;
    for (let i = 0; i < names.length; i++) {
      node = node.children.get(names[i]);
      if (node === undefined) return;
      end += names[i].length + 1;
      const where = i === names.length - 1 ? "at" : "above";
      for (const value of node.values) visit(value, where, end);
    }
  }
}

interface PathNode<T> {
  children: Map<string, PathNode<T>>;
  values: T[];
}
