/** Every resource kind, by type. */
import type { Resource, ResourceType } from "../declaration/schema.ts";
import type { ResourceKind } from "./kind.ts";
import { actionKind } from "./action.ts";
import { containerKind } from "./container.ts";
import { directoryKind } from "./directory.ts";
import { fileKind } from "./file.ts";
import { packageKind } from "./package.ts";
import { serviceKind } from "./service.ts";
import { overlayKind } from "./overlay.ts";
import { firewallKind } from "./firewall.ts";
import { sysctlKind } from "./sysctl.ts";

/** The kind that checks, applies and releases each resource type. */
export const KINDS: { [T in ResourceType]: ResourceKind<Extract<Resource, { type: T }>> } = {
  directory: directoryKind,
  file: fileKind,
  package: packageKind,
  service: serviceKind,
  container: containerKind,
  action: actionKind,
  overlay: overlayKind,
  firewall: firewallKind,
  sysctl: sysctlKind,
};

/** The kind for one resource. */
export function kindOf<R extends Resource>(resource: R | { type: R["type"] }): ResourceKind<R> {
  return KINDS[resource.type] as unknown as ResourceKind<R>;
}
