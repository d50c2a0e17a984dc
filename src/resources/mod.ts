/** Every resource kind, by type. */
import type { Resource, ResourceType } from "../declaration/schema.ts";
import type { ResourceKind } from "./kind.ts";
import { directoryKind } from "./directory.ts";
import { fileKind } from "./file.ts";
import { withoutProvider } from "./pending.ts";

/** The kind that checks, applies and releases each resource type. */
export const KINDS: { [T in ResourceType]: ResourceKind<Extract<Resource, { type: T }>> } = {
  directory: directoryKind,
  file: fileKind,
  package: withoutProvider("package", "a package manager"),
  service: withoutProvider("service", "a service manager"),
  container: withoutProvider("container", "a container runtime"),
  action: withoutProvider("action", "a command runner"),
};

/** The kind for one resource. */
export function kindOf<R extends Resource>(resource: R | { type: R["type"] }): ResourceKind<R> {
  return KINDS[resource.type] as unknown as ResourceKind<R>;
}
