/** Helpers shared by the file and directory kinds. */
import { posix } from "node:path";
import type { PathInfo } from "../providers.ts";
import {
  type Change,
  change,
  formatMode,
  type KindContext,
  resolveGroup,
  resolveUser,
  ResourceError,
} from "./kind.ts";

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

/** The declared mode/owner/group, resolved to numbers on this machine. */
export async function declaredAttributes(
  ctx: KindContext,
  spec: AttributeSpec,
): Promise<{ mode: number; uid: number; gid: number }> {
  const mode = declaredMode(spec);
  const key = `${mode}:${spec.owner}:${spec.group}`;
  let resolved = ctx.attributes.get(key);
  if (!resolved) {
    resolved = {
      mode,
      uid: await resolveUser(ctx, spec.owner),
      gid: await resolveGroup(ctx, spec.group),
    };
    ctx.attributes.set(key, resolved);
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
