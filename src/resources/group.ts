/**
 * The group resource: a group by name, with a gid (declared, or allocated by the system's
 * tool and then recorded, so a group deleted by hand comes back with the same one). An
 * existing group's gid is never changed. Created only where it is missing; a group found
 * is adopted (the engine records that the host did not create it) and never removed. The
 * OS's own groups (root, gids below 100, nogroup) are refused. See ./_accounts.ts.
 */
import * as v from "valibot";
import { resourceId } from "../declaration/fields.ts";
import type { Change, Diff, KindContext, Release, ReleaseOptions, ResourceKind } from "./kind.ts";
import { ResourceError } from "./kind.ts";
import {
  ACCOUNT_FILE_KEYS,
  accountId,
  accountName,
  accountTools,
  idNote,
  readAccounts,
  recordedId,
  refuseOsAccount,
  refuseOtherId,
} from "./_accounts.ts";

/** Resource: a group. */
export const GroupSchema = v.strictObject({
  type: v.literal("group"),
  id: resourceId,
  name: accountName("name"),
  /** Absent: the tool allocates one when it creates the group; the host then keeps it. */
  gid: v.optional(accountId("gid")),
  /** Allocated from the tool's system range (only when the host creates it without a gid). */
  system: v.optional(v.boolean("system is true or false")),
});

/** A group resource. */
export type GroupResource = v.InferOutput<typeof GroupSchema>;

/** What a group check can find: missing, or its gid not yet recorded. */
type GroupChange = Change<"create" | "record">;

/** The group kind. */
export const groupKind: ResourceKind<GroupResource, GroupChange> = {
  type: "group",
  schema: GroupSchema,
  needs: "accounts",

  key: (resource) => `group:${resource.name}`,
  provides: (resource) => [`group:${resource.name}`],
  touches: () => ACCOUNT_FILE_KEYS,

  rules(resource, at, scope) {
    if (resource.gid === undefined) return;
    const first = scope.claim(`gid:${resource.gid}`, at);
    if (first !== undefined) {
      scope.problems.push({ path: `${at}.gid`, message: `gid ${resource.gid} is also ${first}'s` });
    }
  },

  async check(ctx, resource): Promise<Diff<GroupChange>> {
    const tools = accountTools(ctx, "group");
    const found = (await readAccounts(ctx, tools)).groups.get(resource.name);
    const recorded = recordedId(ctx, "group", resource.name);
    const want = resource.gid ?? recorded;
    if (found === undefined) {
      return {
        exists: false,
        changes: [{ what: "create", text: want === undefined ? "create" : `create (gid ${want})` }],
      };
    }
    refuseOsAccount("group", resource.name, found.gid);
    refuseOtherId("group", resource.name, found.gid, want, resource.gid !== undefined);
    return {
      exists: true,
      changes: recorded === found.gid
        ? []
        : [{ what: "record", text: `gid ${found.gid} recorded (kept from now on)` }],
    };
  },

  async apply(ctx, resource, diff): Promise<void> {
    const tools = accountTools(ctx, "group");
    if (!diff.exists) {
      await tools.addGroup({
        name: resource.name,
        gid: resource.gid ?? recordedId(ctx, "group", resource.name),
        system: resource.system === true,
      });
    }
    const found = (await readAccounts(ctx, tools)).groups.get(resource.name);
    if (found !== undefined) ctx.notes.set(idNote("group", resource.name), String(found.gid));
  },

  async release(
    ctx: KindContext,
    spec: GroupResource,
    { created, dryRun }: ReleaseOptions,
  ): Promise<Release> {
    const recorded = recordedId(ctx, "group", spec.name);
    const forget = (detail: string): Release => {
      if (!dryRun) ctx.notes.set(idNote("group", spec.name), undefined);
      return { outcome: "forgotten", detail };
    };
    if (!created) return forget("found on this machine, not created by the host: left as it is");
    const tools = accountTools(ctx, "group");
    const found = (await readAccounts(ctx, tools)).groups.get(spec.name);
    if (found === undefined) return forget("already gone");
    if (recorded !== undefined && found.gid !== recorded) {
      return forget(`it now has gid ${found.gid}, not the host's ${recorded}: left as it is`);
    }
    if (dryRun) return { outcome: "removed", detail: "would remove the group" };
    await tools.removeGroup(spec.name);
    if ((await readAccounts(ctx, tools)).groups.has(spec.name)) {
      throw new ResourceError(
        "resource.group-remove",
        `group "${spec.name}" is still in ${tools.files.group} after ${tools.name} removed it`,
      );
    }
    ctx.notes.set(idNote("group", spec.name), undefined);
    return { outcome: "removed" };
  },
};
