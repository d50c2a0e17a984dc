/**
 * The user resource: a user by name, with a uid (declared, or allocated by the system's
 * tool and then recorded, so a user deleted by hand comes back with the same one), its
 * primary group, and optionally its supplementary groups (exactly those), home, shell,
 * and a locked password. What is not declared is left as the tool made it or a person
 * set it. An existing user's uid is never changed.
 *
 * The host never makes or removes a home directory (declare a `directory` owned by the
 * user, after it) and never sets a password: `password: "locked"` keeps it locked (the
 * tools create accounts locked; a password set by hand is locked again). A user found on
 * the machine is adopted (the engine records that the host did not create it) and never
 * removed; one the host created is removed when no longer declared, its home and files
 * kept. The OS's own accounts (root, uids below 100, nobody) are refused. A group named
 * here that the declaration also declares must be declared before the user, and a file
 * or directory owned by a declared user after it (the parse says so). See ./_accounts.ts.
 */
import * as v from "valibot";
import { resourceId } from "../declaration/fields.ts";
import type { Change, Diff, KindContext, Release, ReleaseOptions, ResourceKind } from "./kind.ts";
import { ResourceError, wants } from "./kind.ts";
import {
  ACCOUNT_FILE_KEYS,
  type AccountDatabases,
  accountId,
  accountName,
  accountPath,
  accountTools,
  confersRoot,
  type GroupEntry,
  idNote,
  isLocked,
  readAccounts,
  recordedId,
  refuseOsAccount,
  refuseOtherId,
  ROOT_GROUPS,
  uidMin,
} from "./_accounts.ts";
import type { AccountTools } from "../providers.ts";

/** Resource: a user. */
export const UserSchema = v.strictObject({
  type: v.literal("user"),
  id: resourceId,
  name: accountName("name"),
  /** Absent: the tool allocates one when it creates the user; the host then keeps it. */
  uid: v.optional(accountId("uid")),
  /** The primary group, by name (a declared group, declared before, or one that exists). */
  group: accountName("group"),
  /** The supplementary groups, exactly (absent: not managed). */
  groups: v.optional(
    v.pipe(
      v.array(accountName("a group")),
      v.maxLength(64, "at most 64 groups"),
      v.check((g) => new Set(g).size === g.length, "names a group twice"),
    ),
  ),
  home: v.optional(accountPath("home")),
  shell: v.optional(accountPath("shell")),
  /** Allocated from the tool's system range (only when the host creates it without a uid). */
  system: v.optional(v.boolean("system is true or false")),
  /** The only password a declaration states in this version: none usable. */
  password: v.optional(
    v.literal(
      "locked",
      'password is "locked" (no password can log in) or absent (left as it is); ' +
        "the host never sets a password",
    ),
  ),
});

/** A user resource. */
export type UserResource = v.InferOutput<typeof UserSchema>;

/** What a user check can find. */
export type UserChange =
  | Change<"create" | "record" | "group" | "home" | "shell" | "lock">
  | (Change<"groups"> & { add: string[]; remove: string[]; all: string[] });

/** The supplementary groups of `name` in `groups`, its primary group left out. */
function memberOf(groups: Map<string, GroupEntry>, name: string, primary: number): string[] {
  return [...groups.values()]
    .filter((g) => g.gid !== primary && g.members.includes(name))
    .map((g) => g.name)
    .sort();
}

/** The refusal of a group that confers root, at the parse and on the machine (same words). */
function rootGroupRefused(name: string, why: string, how = ""): string {
  return `group "${name}"${how} is refused: ${why}; a declaration from the link or a file may ` +
    "not give an account a group that confers root or reads secrets: declare it in the " +
    `bundle the host carries, or name "${name}" in the permit.groups of this machine's host.json`;
}

/**
 * The groups a user is given, by their gids on this machine: root's gid, or the gid of a
 * group that confers root here under another name, is refused as that group would be.
 */
function refuseRootGids(ctx: KindContext, db: AccountDatabases, resource: UserResource): void {
  const { trusted, permit } = ctx.policy;
  const confers = new Map<number, string>();
  for (const [name] of ROOT_GROUPS) {
    const gid = db.groups.get(name)?.gid;
    if (gid !== undefined && !confers.has(gid)) confers.set(gid, name);
  }
  for (const name of [resource.group, ...(resource.groups ?? [])]) {
    const gid = db.groups.get(name)?.gid;
    if (gid === undefined) continue;
    if (gid === 0) {
      throw new ResourceError(
        "resource.user-root-group",
        `group "${name}" has gid 0 here, which is root's group: the host never gives an ` +
          "account root's group",
        { hint: "declare another group" },
      );
    }
    const like = confers.get(gid);
    if (like === undefined || like === name || trusted) continue;
    if (permit.groups.has(name) || permit.groups.has(like)) continue;
    throw new ResourceError(
      "resource.user-root-group",
      rootGroupRefused(name, confersRoot(like)!, ` (gid ${gid} here, that of "${like}")`),
    );
  }
}

/**
 * Refuse adopting a system account (a uid below the machine's UID_MIN, /etc/login.defs, 1000
 * when it says none) that the host has no record of: its groups, home and shell would then be
 * a declaration's. The bundle may, and so may a declaration host.json's permit.users names.
 */
async function refuseSystemAccount(
  ctx: KindContext,
  tools: AccountTools,
  name: string,
  uid: number,
): Promise<void> {
  const { trusted, permit } = ctx.policy;
  if (trusted || permit.users.has(name)) return;
  const defs = `${tools.files.passwd.slice(0, tools.files.passwd.lastIndexOf("/"))}/login.defs`;
  let text: string | undefined;
  try {
    const { data } = await ctx.providers.fs.readFile(defs);
    text = new TextDecoder().decode(data ?? new Uint8Array());
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const min = uidMin(text);
  if (uid >= min) return;
  throw new ResourceError(
    "resource.user-system-account",
    `user "${name}" exists with uid ${uid}, below UID_MIN ${min} (${
      text === undefined ? `no ${defs}: the default` : defs
    }): a system account; a declaration from the link or a file may not adopt one (its ` +
      "groups, home and shell would then be the declaration's)",
    {
      hint: `declare another name, declare it in the bundle the host carries, or name "${name}" ` +
        "in the permit.users of this machine's host.json",
    },
  );
}

/** The user kind. */
/** The user kind. */
export const userKind: ResourceKind<UserResource, UserChange> = {
  type: "user",
  schema: UserSchema,
  needs: "accounts",

  key: (resource) => `user:${resource.name}`,
  provides: (resource) => [`user:${resource.name}`],
  requires: (resource) => [
    { what: `group:${resource.group}`, field: "group" },
    ...(resource.groups ?? []).map((g, i) => ({ what: `group:${g}`, field: `groups[${i}]` })),
  ],
  touches: () => ACCOUNT_FILE_KEYS,

  rules(resource, at, scope) {
    if (!scope.trusted) {
      const named: [string, string][] = [
        [resource.group, "group"],
        ...(resource.groups ?? []).map((g, i): [string, string] => [g, `groups[${i}]`]),
      ];
      for (const [name, field] of named) {
        const why = confersRoot(name);
        if (why !== undefined && !scope.permit.groups.has(name)) {
          scope.problems.push({ path: `${at}.${field}`, message: rootGroupRefused(name, why) });
        }
      }
    }
    if (resource.uid === undefined) return;
    const first = scope.claim(`uid:${resource.uid}`, at);
    if (first !== undefined) {
      scope.problems.push({ path: `${at}.uid`, message: `uid ${resource.uid} is also ${first}'s` });
    }
  },

  async check(ctx, resource): Promise<Diff<UserChange>> {
    const tools = accountTools(ctx, "user");
    const db = await readAccounts(ctx, tools);
    refuseRootGids(ctx, db, resource);
    const found = db.users.get(resource.name);
    const recorded = recordedId(ctx, "user", resource.name);
    const want = resource.uid ?? recorded;
    if (found === undefined) {
      return {
        exists: false,
        changes: [{ what: "create", text: want === undefined ? "create" : `create (uid ${want})` }],
      };
    }
    refuseOsAccount("user", resource.name, found.uid);
    refuseOtherId("user", resource.name, found.uid, want, resource.uid !== undefined);
    if (recorded === undefined) await refuseSystemAccount(ctx, tools, resource.name, found.uid);
    const changes: UserChange[] = [];
    if (recorded !== found.uid) {
      changes.push({ what: "record", text: `uid ${found.uid} recorded (kept from now on)` });
    }
    const primary = db.groups.get(resource.group);
    if (primary?.gid !== found.gid) {
      const now = [...db.groups.values()].find((g) => g.gid === found.gid)?.name ?? found.gid;
      changes.push({ what: "group", text: `group ${now} → ${resource.group}` });
    }
    for (const field of ["home", "shell"] as const) {
      const value = resource[field];
      if (value !== undefined && found[field] !== value) {
        changes.push({ what: field, text: `${field} ${found[field] || '""'} → ${value}` });
      }
    }
    if (resource.groups !== undefined) {
      const gid = primary?.gid ?? found.gid;
      const now = memberOf(db.groups, resource.name, gid);
      const all = [...new Set(resource.groups)].filter((g) => db.groups.get(g)?.gid !== gid).sort();
      const add = all.filter((g) => !now.includes(g));
      const remove = now.filter((g) => !all.includes(g));
      if (add.length + remove.length > 0) {
        changes.push({
          what: "groups",
          text: `groups ${now.join(",") || "(none)"} → ${all.join(",") || "(none)"}`,
          add,
          remove,
          all,
        });
      }
    }
    if (resource.password === "locked" && !isLocked(found.password)) {
      changes.push({ what: "lock", text: "password → locked" });
    }
    return { exists: true, changes };
  },

  async apply(ctx, resource, diff): Promise<void> {
    const tools = accountTools(ctx, "user");
    const { name } = resource;
    if (!diff.exists) {
      await tools.addUser({
        name,
        uid: resource.uid ?? recordedId(ctx, "user", name),
        group: resource.group,
        groups: resource.groups ?? [],
        ...(resource.home === undefined ? {} : { home: resource.home }),
        ...(resource.shell === undefined ? {} : { shell: resource.shell }),
        system: resource.system === true,
      });
    } else {
      const groups = diff.changes.find((c) => c.what === "groups") as
        | Extract<UserChange, { what: "groups" }>
        | undefined;
      await tools.modifyUser(name, {
        ...(wants(diff, "group") ? { group: resource.group } : {}),
        ...(wants(diff, "home") ? { home: resource.home } : {}),
        ...(wants(diff, "shell") ? { shell: resource.shell } : {}),
        ...(groups ? { groups } : {}),
      });
    }
    const found = (await readAccounts(ctx, tools)).users.get(name);
    if (found === undefined) return; // the read-back says what is missing
    ctx.notes.set(idNote("user", name), String(found.uid));
    if (resource.password === "locked" && !isLocked(found.password)) await tools.lockUser(name);
  },

  async release(
    ctx: KindContext,
    spec: UserResource,
    { created, dryRun }: ReleaseOptions,
  ): Promise<Release> {
    const recorded = recordedId(ctx, "user", spec.name);
    const forget = (detail: string): Release => {
      if (!dryRun) ctx.notes.set(idNote("user", spec.name), undefined);
      return { outcome: "forgotten", detail };
    };
    if (!created) return forget("found on this machine, not created by the host: left as it is");
    const tools = accountTools(ctx, "user");
    const found = (await readAccounts(ctx, tools)).users.get(spec.name);
    if (found === undefined) return forget("already gone");
    if (recorded !== undefined && found.uid !== recorded) {
      return forget(`it now has uid ${found.uid}, not the host's ${recorded}: left as it is`);
    }
    const kept = "its home and the files it owns are kept";
    if (dryRun) return { outcome: "removed", detail: `would remove the user; ${kept}` };
    await tools.removeUser(spec.name);
    if ((await readAccounts(ctx, tools)).users.has(spec.name)) {
      throw new ResourceError(
        "resource.user-remove",
        `user "${spec.name}" is still in ${tools.files.passwd} after ${tools.name} removed it`,
      );
    }
    ctx.notes.set(idNote("user", spec.name), undefined);
    return { outcome: "removed", detail: kept };
  },
};
