/** The file resource: a regular file with exact content, mode, owner and group. */
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
  ResourceError,
  type ResourceKind,
  type RuleScope,
} from "./kind.ts";
import { checkManagedPath } from "./_rules.ts";
import { sha256Hex } from "../declaration/canonical.ts";
import { type FileIdentity, type FileRead, type PathInfo, sameIdentity } from "../providers.ts";
import {
  type AttributeChange,
  attributeChanges,
  declaredAttributes,
  expectKind,
  missingParent,
  ownersRequired,
} from "./_fs.ts";

/** Resource: a regular file with exact content, written atomically. */
export const FileSchema = v.pipe(
  v.strictObject({
    type: v.literal("file"),
    id: resourceId,
    path: absolutePath,
    content: v.optional(v.string()),
    contentBase64: v.optional(
      v.pipe(
        v.string(),
        v.check(isBase64, "contentBase64 is not valid base64 (standard alphabet, padded)"),
      ),
    ),
    /**
     * Content by reference (DESIGN.md §19): the SHA-256 (hex) of the bytes, which the
     * host gets from its content sources (the mesh's object store, the blobs beside the
     * bundle), verifies and caches by digest; with `size`, their length.
     */
    contentSha256: v.optional(
      v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/, "is not a SHA-256 in lowercase hex")),
    ),
    size: v.optional(v.pipe(v.number(), v.safeInteger(), v.minValue(0))),
    mode,
    /** The program runs as the file's owner (S_ISUID). */
    setuid: specialBit("setuid"),
    /** The program runs as the file's group (S_ISGID). */
    setgid: specialBit("setgid"),
    owner: principal("owner"),
    group: principal("group"),
  }),
  v.check(
    (f) =>
      [f.content, f.contentBase64, f.contentSha256].filter((c) => c !== undefined).length === 1,
    "a file has exactly one of content (utf-8 text), contentBase64, or contentSha256 with size",
  ),
  v.check(
    (f) => (f.contentSha256 === undefined) === (f.size === undefined),
    "size goes with contentSha256, and only with it",
  ),
);

/**
 * Whether text is padded base64 of the standard alphabet and nothing else: the platform's
 * decoder refuses other characters; it skips ASCII white space, which the length then shows.
 */
function isBase64(text: string): boolean {
  if (text.length % 4 !== 0) return false;
  try {
    return Math.ceil(Uint8Array.fromBase64(text).length / 3) * 4 === text.length;
  } catch {
    return false;
  }
}

/** A file resource. */
export type FileResource = v.InferOutput<typeof FileSchema>;

/** The decoded size in bytes of a file resource's inline content (0 for a reference). */
export function contentSize(resource: { content?: string; contentBase64?: string }): number {
  if (resource.content !== undefined) return new TextEncoder().encode(resource.content).length;
  const b64 = resource.contentBase64 ?? "";
  const padding = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return (b64.length / 4) * 3 - padding;
}

/** What a file check can find: a missing file, other bytes, other attributes. */
type FileChange = Change<"create" | "content" | AttributeChange>;

const decoded = new WeakMap<FileResource, Uint8Array>();

/** The bytes a file resource declares inline (decoded once per resource). */
export function fileContent(resource: FileResource): Uint8Array {
  let bytes = decoded.get(resource);
  if (!bytes) {
    bytes = resource.content !== undefined
      ? new TextEncoder().encode(resource.content)
      : Uint8Array.fromBase64(resource.contentBase64 ?? "");
    decoded.set(resource, bytes);
  }
  return bytes;
}

const CREATE: Diff<FileChange> = { exists: false, changes: [change("create")] };

/** The SHA-256 of no bytes at all. */
const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/** The file kind. */
export const fileKind: ResourceKind<FileResource, FileChange> = {
  type: "file",
  schema: FileSchema,
  needs: "fs",
  references: (resource) => resource.contentSha256 === undefined ? [] : [resource.contentSha256],
  concurrentApply: true,

  key: (resource) => `path:${resource.path}`,
  requires: ownersRequired,
  place: (resource) => ({ path: resource.path }),

  rules(resource: FileResource, at: string, scope: RuleScope): void {
    checkManagedPath(resource.path, `${at}.path`, scope);
    // No content but the empty one is 0 bytes, and it has one digest: a reference that
    // pairs the empty digest or size 0 with anything else names bytes that cannot exist.
    if ((resource.size === 0) !== (resource.contentSha256 === EMPTY_SHA256)) {
      scope.problems.push({
        path: `${at}.${resource.size === 0 ? "contentSha256" : "size"}`,
        message: resource.size === 0
          ? `size 0 is the empty content, whose SHA-256 is ${EMPTY_SHA256}, not ` +
            `${resource.contentSha256}: no content matches both, so the file could never be ` +
            'written; fix the digest or the size (or declare "content": "")'
          : `${resource.contentSha256} is the SHA-256 of the empty content, which is 0 bytes, ` +
            `not ${resource.size}: no content matches both; fix the digest or the size`,
      });
    }
    if (resource.size !== undefined) {
      if (resource.size > scope.limits.maxReferencedBytes) {
        scope.problems.push({
          path: `${at}.size`,
          message:
            `is ${resource.size} bytes, over the limit of ${scope.limits.maxReferencedBytes} ` +
            "bytes per file by reference",
        });
      }
      return;
    }
    const size = contentSize(resource);
    if (size > scope.limits.maxFileBytes) {
      scope.problems.push({
        path: `${at}.content`,
        message: `is ${size} bytes, over the limit of ${scope.limits.maxFileBytes} bytes per file`,
      });
    }
  },

  // Files written together leave several temporaries when the process dies; one found
  // in sync is not written again, so after an apply that did not converge they go here.
  tidy: (ctx, resource) => ctx.providers.fs.discardPartialWrite(resource.path),

  async check(ctx: KindContext, resource: FileResource): Promise<Diff<FileChange>> {
    const fs = ctx.providers.fs;
    // Read nothing when the file is still what it was when last read back in sync.
    const known = ctx.knownIdentity?.(resource);
    if (known !== undefined) {
      const same = await unchangedSince(ctx, resource, known);
      if (same !== undefined) return same;
    }
    // Before the look: an identity vouches only for what happened before it was taken.
    const lookedAt = Date.now();
    const want = resource.contentSha256 === undefined ? fileContent(resource) : undefined;
    // One descriptor for what is compared, and no lstat before it: a symlink or a FIFO
    // is refused at the open (never followed, never waited on), and size, mode and
    // owner are those of the file whose bytes were read. The adapter opens it in the
    // directory above, held: a symlink anywhere above is refused, a missing
    // directory above is NotFound (the file is to be created).
    let read: FileRead;
    try {
      read = await fs.readFile(resource.path, want?.length ?? resource.size);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return CREATE;
      // Not a regular file: say what it is, as for every kind.
      const info = await fs.lstat(resource.path).catch(() => null);
      if (info !== null) expectKind(resource.path, info, "file");
      throw error;
    }
    const changes: FileChange[] = [];
    const same = read.data !== null &&
      (want !== undefined
        ? equalBytes(read.data, want)
        : await sha256Hex(read.data) === resource.contentSha256);
    if (!same) changes.push(change("content"));
    changes.push(
      ...attributeChanges(read.info, await declaredAttributes(ctx, resource), resource),
    );
    const identity = read.info.identity;
    if (changes.length === 0 && identity && trusted(identity, lookedAt, fs.ctimeStepNs)) {
      return { exists: true, changes, identity };
    }
    return { exists: true, changes };
  },

  async apply(ctx: KindContext, resource: FileResource): Promise<void> {
    const fs = ctx.providers.fs;
    const attributes = await declaredAttributes(ctx, resource);
    // Any difference, even mode alone, is repaired by a fresh atomic write:
    // rename replaces the path itself, so nothing is ever done through a symlink
    // at the path (the check refused one), and the adapter creates and renames in
    // the directory above, held, proven again at the rename.
    const guard = ctx.beforeCommit;
    try {
      const data = resource.contentSha256 === undefined
        ? fileContent(resource)
        : await referencedContent(ctx, resource);
      await fs.writeFileAtomic(resource.path, data, attributes, guard, {
        deferSync: ctx.deferSync === true && guard !== undefined,
      });
    } catch (error) {
      missingParent(resource.path, error);
    }
    ctx.touchedDirectories.add(posix.dirname(resource.path));
  },

  async release(
    ctx: KindContext,
    { path }: FileResource,
    { created, dryRun }: ReleaseOptions,
  ): Promise<Release> {
    // A write of this path cut short by a crash may have left its temporary file.
    if (!dryRun) await ctx.providers.fs.discardPartialWrite(path);
    if (!created) {
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
    if (dryRun) return { outcome: "removed" };
    if (await ctx.providers.fs.remove(path, "file") === "gone") {
      return { outcome: "removed", detail: "already gone" };
    }
    ctx.touchedDirectories.add(posix.dirname(path));
    return { outcome: "removed" };
  },
};

/**
 * How far the kernel's clock for file times may run behind the clock `Date.now()` reads
 * (it stamps files from a coarse clock, a tick behind: at most 10 ms), with room to spare.
 */
const CLOCK_MARGIN_NS = 50_000_000n;

/**
 * Whether an identity taken at `lookedAtMs` (before the bytes it goes with were read)
 * proves, when found again, that the file has not changed since. Any later change of the
 * file sets its change time to the kernel's clock at that moment, which is then past the
 * look; it shows as another identity only if that change time differs from the recorded
 * one as far as the adapter can see (`stepNs`, Deno: the second). So the look must have
 * come after the end of the step the recorded change time lies in, by the clock margin: a
 * file changed less than a step before it was read is read again next time, and trusted
 * from a later read. A file whose change time is later than the look (another machine's
 * clock, a clock set back) is never trusted.
 */
export function trusted(identity: FileIdentity, lookedAtMs: number, stepNs?: bigint): boolean {
  if (stepNs === undefined || stepNs <= 0n || identity.ctimeNs < 0n) return false;
  const stepEnd = (identity.ctimeNs / stepNs + 1n) * stepNs;
  return BigInt(Math.floor(lookedAtMs)) * 1_000_000n >= stepEnd + CLOCK_MARGIN_NS;
}

/**
 * The file as the last read back found it, without reading it: an lstat (in the directory
 * held, never following a link) whose identity is `known` and whose mode and owner are
 * the declared ones; `undefined` when anything differs or cannot be looked at (the read
 * then says what).
 */
async function unchangedSince(
  ctx: KindContext,
  resource: FileResource,
  known: FileIdentity,
): Promise<Diff<FileChange> | undefined> {
  let info: PathInfo | null;
  try {
    info = await ctx.providers.fs.lstat(resource.path);
  } catch {
    return undefined;
  }
  if (info?.kind !== "file" || info.identity === undefined) return undefined;
  if (!sameIdentity(info.identity, known)) return undefined;
  const want = await declaredAttributes(ctx, resource);
  if (attributeChanges(info, want, resource).length > 0) return undefined;
  return { exists: true, changes: [], identity: known };
}

/** The bytes a file declares by reference, from the engine's content sources (verified). */
async function referencedContent(ctx: KindContext, resource: FileResource): Promise<Uint8Array> {
  const sha256 = resource.contentSha256!;
  if (!ctx.content) {
    throw new ResourceError(
      "resource.content-unavailable",
      `${resource.path} is declared by reference (sha256 ${sha256}) and this apply has no ` +
        "content source",
      { hint: "apply it from the link, or from a file with its blobs/ directory beside it" },
    );
  }
  return await ctx.content(sha256, resource.size!, resource.path);
}

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
