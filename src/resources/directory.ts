/** The directory resource: a directory with mode, owner and group. */
import { posix } from "node:path";
import type { DirectoryResource } from "../declaration/schema.ts";
import type { HeldResource } from "../store/store.ts";
import type { Check, KindContext, Release, ResourceKind } from "./kind.ts";
import {
  attributeChanges,
  checkAncestors,
  declaredAttributes,
  expectKind,
  missingParent,
} from "./_fs.ts";

/** The directory kind. */
export const directoryKind: ResourceKind<DirectoryResource> = {
  type: "directory",

  async check(ctx: KindContext, resource: DirectoryResource): Promise<Check> {
    const fs = ctx.providers.fs;
    if (await checkAncestors(ctx, resource.path, ctx.realDirectories) !== undefined) {
      return { exists: false, changes: ["create"] };
    }
    const info = await fs.lstat(resource.path);
    if (info === null) return { exists: false, changes: ["create"] };
    expectKind(resource.path, info, "directory");
    return {
      exists: true,
      changes: attributeChanges(info, await declaredAttributes(ctx, resource), resource),
    };
  },

  async apply(ctx: KindContext, resource: DirectoryResource, found: Check): Promise<void> {
    const fs = ctx.providers.fs;
    const attributes = await declaredAttributes(ctx, resource);
    await checkAncestors(ctx, resource.path);
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

  async release(ctx: KindContext, held: HeldResource, dryRun: boolean): Promise<Release> {
    const path = (held.spec as DirectoryResource).path;
    const fs = ctx.providers.fs;
    if (!held.created) {
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
    if (!(await fs.isEmptyDirectory(path))) {
      return { outcome: "forgotten", detail: "not empty, kept" };
    }
    if (!dryRun) {
      await fs.remove(path);
      ctx.touchedDirectories.add(posix.dirname(path));
    }
    return { outcome: "removed" };
  },
};
