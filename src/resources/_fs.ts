/** Helpers shared by the file and directory kinds (and the container kind's mount sources). */
import { posix } from "../posix_path.ts";
import { ancestors, isWithin } from "../declaration/paths.ts";
import type { PathInfo } from "../providers.ts";
import {
  type Change,
  change,
  formatMode,
  type KindContext,
  passState,
  resolveGroup,
  resolveUser,
  ResourceError,
} from "./kind.ts";

/**
 * Refuse a container mount source that someone other than root could swap. The
 * container runtime is handed a path and resolves it by name, at create and again
 * at every start (a restart policy, a reboot), long after the host looked, so the
 * host cannot hold it open for the runtime: instead every step from the managed
 * root down to the source must be one only root can change. A directory lets
 * others replace an entry when it is not root's, or is group- (any group: an ACL's
 * mask shows there) or world-writable, unless it is sticky and the entry is root's
 * (/tmp); a missing entry, anyone who may write there can create. The source itself may be
 * anyone's (what is inside it is what the container is given), but not a symlink.
 * A source that is missing where only root could make it is left to the runtime
 * (a directory declared before the container makes it).
 */
export function checkMountSource(ctx: KindContext, source: string): Promise<void> {
  return checkFixedPath(ctx, source, {
    noun: "the mount source",
    by: "the container runtime mounts it, which it does by name at every start",
    follower: "the container runtime",
    hint: "mount a directory that only root can replace: every directory from the managed " +
      "root down to it owned by root and not writable by a group or by everyone (as under " +
      "/srv or /opt), or move what the container needs there",
  });
}

/** How {@link checkFixedPath} speaks of the path and of what resolves it later. */
export interface FixedPathWords {
  /** "the mount source", "the mount target". */
  noun: string;
  /** What resolves the path by name, and when: "… before {by}". */
  by: string;
  /** What would follow a symlink there: "… which {follower} would follow". */
  follower: string;
  hint: string;
}

/**
 * Refuse a path that someone other than root could swap before a program that is handed
 * it by name resolves it (the container runtime at every start, mount(8) and the init at
 * every boot): every step from the managed root down to it must be one only root can
 * change (see {@link checkMountSource}), and none a symlink.
 */
export async function checkFixedPath(
  ctx: KindContext,
  source: string,
  words: FixedPathWords,
): Promise<void> {
  const fs = ctx.providers.fs;
  const root = ctx.host.managedRoots.find((r) => isWithin(source, r));
  const steps = [...ancestors(source), source].filter((p) =>
    root === undefined || isWithin(p, root)
  );
  const { hint } = words;
  let above: { path: string; info: PathInfo } | undefined;
  for (const path of steps) {
    // Decided from the directory above when it can be: a step below one that others can
    // change is never looked at (it would be looked at as that user: ./_walk.ts of os/posix-fs).
    const sticky = above !== undefined && above.info.uid === 0 &&
      (above.info.mode & 0o1000) !== 0;
    const early = above === undefined || sticky ? undefined : swappableBy(above.info, null);
    const info = early === undefined ? await fs.lstat(path) : null;
    const who = early ?? (above === undefined ? undefined : swappableBy(above.info, info));
    if (who !== undefined) {
      throw new ResourceError(
        "resource.unsafe-mount-source",
        `${words.noun} ${source} is refused: ${above!.path} ${who}, so a local user could ` +
          `put a symlink (to /) at ${path} before ${words.by}`,
        { hint },
      );
    }
    if (info === null) return;
    const what = path === source
      ? `${words.noun} ${source}`
      : `${path} (above ${words.noun} ${source})`;
    if (info.kind === "symlink") {
      throw new ResourceError(
        "resource.unsafe-mount-source",
        `${what} is a symlink, which ${words.follower} would follow`,
        { hint },
      );
    }
    if (path !== source && info.kind !== "directory") {
      throw new ResourceError("resource.not-a-directory", `${what} is not a directory`);
    }
    above = { path, info };
  }
}

/**
 * Who other than root can rename, remove or (`entry` null: missing) create the
 * entry in the directory `dir`, in words; `undefined` when only root can. A directory
 * writable by its group is never root's alone, whatever the group: on Linux, a POSIX
 * ACL's mask is the mode's group bits and bounds every user and group the ACL names, so
 * `mode & 0o022 == 0` is the one test that no ACL entry lets anyone else write
 * (docs/trust.md).
 */
export function swappableBy(dir: PathInfo, entry: PathInfo | null): string | undefined {
  if (dir.uid !== 0) return `belongs to uid ${dir.uid}`;
  // Sticky: only an entry's owner (or the directory's, root here) may rename or remove it.
  if ((dir.mode & 0o1000) !== 0 && entry !== null && entry.uid === 0) return undefined;
  if ((dir.mode & 0o002) !== 0) return "is writable by everyone";
  if ((dir.mode & 0o020) !== 0) {
    return `is writable by group ${dir.gid} (and by any user or group a POSIX ACL on it ` +
      "names: the group bits are the ACL's mask)";
  }
  return undefined;
}

/** Refuse a symlink or a thing of the wrong kind at the managed path itself. */
export function expectKind(path: string, info: PathInfo, kind: "file" | "directory"): void {
  if (info.kind === kind) return;
  if (info.kind === "symlink") {
    throw new ResourceError("resource.symlink", `${path} is a symlink`, {
      hint: "the host never writes through a symlink; remove it or declare the real path",
    });
  }
  throw new ResourceError(
    "resource.wrong-kind",
    `${path} is a ${info.kind === "other" ? "special file" : info.kind}, not a ${kind}`,
    {
      hint: `remove it, or change the declaration to match`,
    },
  );
}

/** What a file or directory resource declares about its attributes. */
export interface AttributeSpec {
  /** Permission bits, "0644" (the parse admits no special bits here). */
  mode: string;
  setuid?: boolean;
  setgid?: boolean;
  sticky?: boolean;
  owner: string;
  group: string;
}

/**
 * The declared mode as a number: the permission bits of `mode`, plus each special
 * bit its own field names (setuid 04000, setgid 02000, sticky 01000).
 *
 * @example
 * ```ts
 * declaredMode({ mode: "0775", setgid: true }); // 0o2775
 * ```
 */
export function declaredMode(
  spec: Pick<AttributeSpec, "mode" | "setuid" | "setgid" | "sticky">,
): number {
  return (parseInt(spec.mode, 8) & 0o777) |
    (spec.setuid ? 0o4000 : 0) |
    (spec.setgid ? 0o2000 : 0) |
    (spec.sticky ? 0o1000 : 0);
}

/** mode/owner/group strings already resolved to numbers in this pass. */
const attributes = passState(() => new Map<string, { mode: number; uid: number; gid: number }>());

/** The declared mode/owner/group, resolved to numbers on this machine. */
export async function declaredAttributes(
  ctx: KindContext,
  spec: AttributeSpec,
): Promise<{ mode: number; uid: number; gid: number }> {
  const mode = declaredMode(spec);
  const key = `${mode}:${spec.owner}:${spec.group}`;
  let resolved = attributes(ctx).get(key);
  if (!resolved) {
    resolved = {
      mode,
      uid: await resolveUser(ctx, spec.owner),
      gid: await resolveGroup(ctx, spec.group),
    };
    attributes(ctx).set(key, resolved);
  }
  return resolved;
}

/** Describe how the attributes on disk differ from the declared ones. */
export function attributeChanges(
  info: Pick<PathInfo, "mode" | "uid" | "gid">,
  want: { mode: number; uid: number; gid: number },
  spec: { owner: string; group: string },
): Change<AttributeChange>[] {
  const changes: Change<AttributeChange>[] = [];
  if (info.mode !== want.mode) {
    changes.push(change("mode", `mode ${formatMode(info.mode)} → ${formatMode(want.mode)}`));
  }
  if (info.uid !== want.uid) {
    changes.push(change("owner", `owner ${info.uid} → ${want.uid} (${spec.owner})`));
  }
  if (info.gid !== want.gid) {
    changes.push(change("group", `group ${info.gid} → ${want.gid} (${spec.group})`));
  }
  return changes;
}

/** What can differ in a path's attributes. */
export type AttributeChange = "mode" | "owner" | "group";

/** Turn "no such file" from a create into a reason a person can act on. */
export function missingParent(path: string, error: unknown): never {
  if (error instanceof Deno.errors.NotFound) {
    throw new ResourceError(
      "resource.no-parent",
      `the directory ${posix.dirname(path)} does not exist`,
      {
        hint:
          "declare it as a directory resource before this one (the order is stated, never derived)",
        cause: error,
      },
    );
  }
  throw error;
}

/**
 * The users and groups a file or directory names by name (never a numeric id, which
 * needs no account): a declared user or group it names must be declared before it.
 */
export function ownersRequired(
  resource: { owner: string; group: string },
): { what: string; field: string }[] {
  const named = (id: string) => !/^[0-9]+$/.test(id);
  return [
    ...(named(resource.owner) ? [{ what: `user:${resource.owner}`, field: "owner" }] : []),
    ...(named(resource.group) ? [{ what: `group:${resource.group}`, field: "group" }] : []),
  ];
}
