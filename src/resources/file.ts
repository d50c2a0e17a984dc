/** The file resource: a regular file with exact content, mode, owner and group. */
import { posix } from "node:path";
import type { FileResource } from "../declaration/schema.ts";
import type { HeldResource } from "../store/store.ts";
import type { Check, KindContext, Release, ResourceKind } from "./kind.ts";
import {
  attributeChanges,
  checkAncestors,
  declaredAttributes,
  expectKind,
  missingParent,
} from "./_fs.ts";

const decoded = new WeakMap<FileResource, Uint8Array>();

/** The bytes a file resource declares (decoded once per resource). */
export function fileContent(resource: FileResource): Uint8Array {
  let bytes = decoded.get(resource);
  if (!bytes) {
    bytes = resource.content !== undefined
      ? new TextEncoder().encode(resource.content)
      : Uint8Array.from(atob(resource.contentBase64 ?? ""), (c) => c.charCodeAt(0));
    decoded.set(resource, bytes);
  }
  return bytes;
}

/** The file kind. */
export const fileKind: ResourceKind<FileResource> = {
  type: "file",

  async check(ctx: KindContext, resource: FileResource): Promise<Check> {
    const fs = ctx.providers.fs;
    if (await checkAncestors(ctx, resource.path, ctx.realDirectories) !== undefined) {
      return { exists: false, changes: ["create"] };
    }
    const info = await fs.lstat(resource.path);
    if (info === null) return { exists: false, changes: ["create"] };
    expectKind(resource.path, info, "file");
    const want = fileContent(resource);
    // One descriptor for what is compared: a symlink or a FIFO swapped in after the
    // lstat is refused there (never followed, never waited on), and size, mode and
    // owner are those of the file whose bytes were read.
    const read = await fs.readFile(resource.path, want.length);
    const changes: string[] = [];
    if (read.data === null || !equalBytes(read.data, want)) changes.push("content");
    changes.push(
      ...attributeChanges(read.info, await declaredAttributes(ctx, resource), resource),
    );
    return { exists: true, changes };
  },

  async apply(ctx: KindContext, resource: FileResource): Promise<void> {
    const fs = ctx.providers.fs;
    const attributes = await declaredAttributes(ctx, resource);
    // Any difference, even mode alone, is repaired by a fresh atomic write:
    // rename replaces the path itself, so nothing is ever done through a symlink
    // at the path (the check refused one); the guard makes sure no directory above
    // it was swapped for a symlink since.
    const guard = () => checkAncestors(ctx, resource.path).then(() => {});
    try {
      // The check the engine just made saw real directories; the guard looks again,
      // fresh, at the last moment before the rename.
      await fs.writeFileAtomic(resource.path, fileContent(resource), attributes, guard);
    } catch (error) {
      missingParent(resource.path, error);
    }
    ctx.touchedDirectories.add(posix.dirname(resource.path));
  },

  async release(ctx: KindContext, held: HeldResource, dryRun: boolean): Promise<Release> {
    const path = (held.spec as FileResource).path;
    // A write of this path cut short by a crash may have left its temporary file.
    if (!dryRun) await ctx.providers.fs.discardPartialWrite(path);
    if (!held.created) {
      return { outcome: "forgotten", detail: "not created by the host, left in place" };
    }
    const info = await ctx.providers.fs.lstat(path);
    if (info === null) return { outcome: "removed", detail: "already gone" };
    if (info.kind !== "file") {
      return {
        outcome: "forgotten",
        detail: `now a ${info.kind}, not the file the host created; left in place`,
      };
    }
    if (!dryRun) {
      await ctx.providers.fs.remove(path);
      ctx.touchedDirectories.add(posix.dirname(path));
    }
    return { outcome: "removed" };
  },
};

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let i = 0;
  // Four bytes at a time where both buffers are aligned for it.
  if (a.byteOffset % 4 === 0 && b.byteOffset % 4 === 0) {
    const words = a.length >>> 2;
    const wa = new Uint32Array(a.buffer, a.byteOffset, words);
    const wb = new Uint32Array(b.buffer, b.byteOffset, words);
    for (; i < words; i++) if (wa[i] !== wb[i]) return false;
    i = words * 4;
  }
  for (; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
