/**
 * Who may act on a path: the walk from / down over the directories above it (the path
 * itself excluded: its own name lives in its parent). Deno hands the kernel absolute paths
 * only, walked again from / at every call (LAB-NOTES.md), so a path is as safe as the
 * least safe directory above it, and the walk decides by that directory:
 *
 * - a directory only the trusted users (root, for the host itself) can rename entries in:
 *   theirs, not writable by group or others (`mode & 0o022 == 0`), or sticky with the next
 *   component existing and theirs (as /tmp; a missing one above the path: the path is not
 *   there; the path itself missing there: anyone could make it first, refused);
 * - the first one that is not decides: owned by another user, and writable by that user
 *   alone, the act is done as that user ("owner"); anything else (writable by a group or by
 *   everyone, sticky with someone else's or a missing next component) is refused, naming it.
 *
 * On Linux, a POSIX ACL with named entries shows its mask in the group bits of the mode,
 * and the mask bounds every named user and group entry: `mode & 0o022 == 0` means no ACL
 * entry grants anyone but the owner write, so no ACL needs reading (docs/trust.md).
 *
 * The walk stops at the first directory it does not trust, so every look it makes passes
 * only through directories the trusted users alone can change: what it sees cannot be
 * redirected. A symlink anywhere on the way is refused (declare the real path).
 */
import { UnsafePathError } from "../../src/providers.ts";
import { SYMLINK_HINT } from "./_acts.ts";

/** What the walk needs to know of a directory on the way. */
export interface Looked {
  kind: "file" | "directory" | "symlink" | "other";
  uid: number;
  gid: number;
  mode: number;
}

/** How the walk looks at a path on the way (lstat, never following): `null` when missing. */
export type Look = (path: string) => Looked | null;

/** What the walk found. */
export type Verdict =
  /** Every directory above the path is one only the trusted users can change. */
  | { as: "trusted" }
  /** A directory above the path is missing (the path cannot exist). */
  | { as: "missing"; at: string }
  /**
   * The first directory above the path that the trusted users do not hold is `at`, owned by
   * `uid` and writable by it alone: only that user can swap names there.
   */
  | { as: "owner"; uid: number; at: string };

/** How the walk names a user in its refusals. */
export type NameOf = (uid: number) => string;

/** The directories above `path`, from / down (`/` first; none for `/` itself). */
export function above(path: string): string[] {
  if (path === "/") return [];
  const parts = path.split("/").filter(Boolean);
  const out = ["/"];
  for (let i = 1; i < parts.length; i++) out.push(`/${parts.slice(0, i).join("/")}`);
  return out;
}

/** Whether only its owner can rename entries in a directory (no group or other write). */
export const writableByOwnerAlone = (mode: number): boolean => (mode & 0o022) === 0;

/**
 * Walk the directories above `path` (from `from`, when given: a directory the caller knows
 * is reached through trusted ones) and say who may act on it. Throws an
 * {@link UnsafePathError} for a symlink or a non-directory on the way, and for a directory
 * that neither the trusted users alone nor one other user alone can change.
 */
export function walk(
  path: string,
  options: { trusted: ReadonlySet<number>; look: Look; nameOf: NameOf; from?: string },
): Verdict {
  const { trusted, look, nameOf, from } = options;
  const dirs = above(path);
  const start = from === undefined ? 0 : dirs.indexOf(from);
  if (start < 0) throw new Error(`posix-fs: ${from} is not above ${path}`);
  for (let i = start; i < dirs.length; i++) {
    const dir = dirs[i];
    const next = i + 1 < dirs.length ? dirs[i + 1] : path;
    const info = look(dir);
    if (info === null) return { as: "missing", at: dir };
    if (info.kind !== "directory") {
      throw new UnsafePathError(
        dir,
        `(above ${path}) is ${
          info.kind === "symlink" ? "a symlink" : `not a directory but a ${kindWord(info.kind)}`
        }`,
        SYMLINK_HINT,
      );
    }
    const own = trusted.has(info.uid);
    if (own && writableByOwnerAlone(info.mode)) continue;
    if (own && (info.mode & 0o1000) !== 0) {
      // Sticky: only an entry's owner (and the directory's) may rename or remove it.
      const entry = look(next);
      if (entry !== null && trusted.has(entry.uid)) continue;
      // Missing above the path: the path is not there (nothing can be made below it).
      if (entry === null && next !== path) return { as: "missing", at: next };
      throw refused(
        dir,
        path,
        info,
        nameOf,
        entry === null
          ? `anyone who may write there could make ${next} first`
          : `${next} belongs to ${nameOf(entry.uid)}, who may rename it`,
      );
    }
    if (!own && writableByOwnerAlone(info.mode)) return { as: "owner", uid: info.uid, at: dir };
    throw refused(
      dir,
      path,
      info,
      nameOf,
      (info.mode & 0o002) !== 0
        ? "everyone may write it"
        : `group ${info.gid} may write it (or a user or group its ACL names)`,
    );
  }
  return { as: "trusted" };
}

function kindWord(kind: Looked["kind"]): string {
  return kind === "other" ? "special file" : kind;
}

/** The refusal of a directory that several users, or anyone, can swap names in. */
function refused(dir: string, path: string, info: Looked, nameOf: NameOf, why: string) {
  const mode = (info.mode & 0o7777).toString(8).padStart(4, "0");
  return new UnsafePathError(
    dir,
    `(above ${path}) belongs to ${nameOf(info.uid)} with mode ${mode}: ${why}, so a local ` +
      "user could swap names there; the host acts only below directories that root alone, " +
      "or one user alone, can change",
    `make ${dir} writable by its owner alone (chmod go-w), or declare a path elsewhere`,
  );
}
