/**
 * The list of resource kinds: the only place that names them all. Adding a
 * kind is its module, its adapter, and one line here.
 */
import { actionKind, type ActionResource } from "./action.ts";
import { containerKind, type ContainerResource } from "./container.ts";
import { directoryKind, type DirectoryResource } from "./directory.ts";
import { fileKind, type FileResource } from "./file.ts";
import { firewallKind, type FirewallResource } from "./firewall.ts";
import { overlayKind, type OverlayResource } from "./overlay.ts";
import { sysctlKind, type SysctlResource } from "./sysctl.ts";
import type { ResourceKind } from "./kind.ts";
import { MAX_PATH_BYTES } from "../declaration/paths.ts";
import { packageKind, type PackageResource } from "./package.ts";
import { serviceKind, type ServiceResource } from "./service.ts";
import { groupKind, type GroupResource } from "./group.ts";
import { userKind, type UserResource } from "./user.ts";

export type {
  ActionResource,
  ContainerResource,
  DirectoryResource,
  FileResource,
  FirewallResource,
  GroupResource,
  OverlayResource,
  PackageResource,
  ServiceResource,
  SysctlResource,
  UserResource,
};

/** Any resource. */
export type Resource =
  | DirectoryResource
  | FileResource
  | PackageResource
  | ServiceResource
  | ContainerResource
  | ActionResource
  | OverlayResource
  | FirewallResource
  | SysctlResource
  | GroupResource
  | UserResource;

/** The name of a resource type. */
export type ResourceType = Resource["type"];

/** Every kind, in the order messages list them. */
const ALL: readonly ResourceKind<Resource>[] = [
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
] as unknown as ResourceKind<Resource>[];

/** The kinds by type (a Map: no type name reaches Object.prototype). */
export const KINDS: ReadonlyMap<string, ResourceKind<Resource>> = new Map(
  ALL.map((kind) => [kind.type, kind]),
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
 * The keys of what encloses the thing `key` manages: for a path, every
 * directory above it. Something inside must be released before what holds it.
 */
export function enclosingKeys(key: string): string[] {
  // A key longer than any path the parse accepts (a store edited by hand) encloses
  // nothing and is enclosed by nothing: its prefixes would cost the square of its length.
  if (!key.startsWith("path:/") || key.length > "path:".length + MAX_PATH_BYTES) return [];
  const out: string[] = [];
  let path = key.slice("path:".length);
  for (let cut = path.lastIndexOf("/"); cut > 0; cut = path.lastIndexOf("/")) {
    path = path.slice(0, cut);
    out.push(`path:${path}`);
  }
  return out;
}
