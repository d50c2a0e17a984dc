/** The directory resource: a directory with mode, owner and group. */
import * as v from "valibot";
import { posix } from "../posix_path.ts";
import { absolutePath, mode, principal, resourceId, specialBit } from "../declaration/fields.ts";
import {
  type Change,
  change,
  type Diff,
  type KindContext,
  type Release,
  type ReleaseOptions,
  type ResourceKind,
  type RuleScope,
} from "./kind.ts";
import { checkManagedPath } from "./_rules.ts";
import {
  type AttributeChange,
  attributeChanges,
  declaredAttributes,
  expectKind,
  missingParent,
  ownersRequired,
} from "./_fs.ts";

/** Resource: a directory the host creates and keeps at mode/owner/group. */
export const DirectorySchema = v.strictObject({
  type: v.literal("directory"),
  id: resourceId,
  path: absolutePath,
  mode,
  /** New entries take the directory's group (S_ISGID). */
  setgid: specialBit("setgid"),
  /** Only an entry's owner may remove or rename it (S_ISVTX). */
  sticky: specialBit("sticky"),
  owner: principal("owner"),
  group: principal("group"),
});

/** A directory resource. */
export type DirectoryResource = v.InferOutput<typeof DirectorySchema>;

/** What a directory check can find: a missing directory, other attributes. */
type DirectoryChange = Change<"create" | AttributeChange>;

const CREATE: Diff<DirectoryChange> = { exists: false, changes: [change("create")] };

/** The directory kind. */
export const directoryKind: ResourceKind<DirectoryResource, DirectoryChange> = {
  type: "directory",
  schema: DirectorySchema,
  needs: "fs",

  key: (resource) => `path:${resource.path}`,
  requires: ownersRequired,
  place: (resource) => ({ path: resource.path, encloses: true }),

  rules(resource: DirectoryResource, at: string, scope: RuleScope): void {
    checkManagedPath(resource.path, `${at}.path`, scope);
  },

  async check(ctx: KindContext, resource: DirectoryResource): Promise<Diff<DirectoryChange>> {
    // In the directory above, held by the adapter: a symlink anywhere above is
    // refused there, a missing directory above means this one is to be made.
    const info = await ctx.providers.fs.lstat(resource.path);
    if (info === null) return CREATE;
    expectKind(resource.path, info, "directory");
    return {
      exists: true,
      changes: attributeChanges(info, await declaredAttributes(ctx, resource), resource),
    };
  },

  async apply(
    ctx: KindContext,
    resource: DirectoryResource,
    found: Diff<DirectoryChange>,
  ): Promise<void> {
    const fs = ctx.providers.fs;
    const attributes = await declaredAttributes(ctx, resource);
    const info = await fs.lstat(resource.path);
    if (info === null) {
      try {
        await fs.makeDirectory(resource.path, attributes);
      } catch (error) {
        missingParent(resource.path, error);
      }
      ctx.touchedDirectories.add(posix.dirname(resource.path));
    } else if (found.changes.length > 0) {
      expectKind(resource.path, info, "directory");
      // On the directory's own descriptor: a symlink swapped in since is refused.
      await fs.setAttributes(resource.path, attributes);
    }
  },

  async release(
    ctx: KindContext,
    { path }: DirectoryResource,
    { created, dryRun }: ReleaseOptions,
  ): Promise<Release> {
    const fs = ctx.providers.fs;
    if (!created) {
      return { outcome: "forgotten", detail: "not created by the host, left in place" };
    }
    const info = await fs.lstat(path);
    if (info === null) return { outcome: "removed", detail: "already gone" };
    if (info.kind !== "directory") {
      return {
        outcome: "forgotten",
        detail: `now a ${info.kind}, not the directory the host created; left in place`,
      };
    }
    const kept: Release = { outcome: "forgotten", detail: "not empty, kept" };
    if (dryRun) return (await fs.isEmptyDirectory(path)) ? { outcome: "removed" } : kept;
    // rmdir decides, at the instant it removes: an entry made since the look keeps it.
    const removal = await fs.remove(path, "directory");
    if (removal === "not-empty") return kept;
    if (removal === "gone") return { outcome: "removed", detail: "already gone" };
    ctx.touchedDirectories.add(posix.dirname(path));
    return { outcome: "removed" };
  },
};
