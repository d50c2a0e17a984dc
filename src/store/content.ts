/**
 * Content by reference (DESIGN.md §19): file bytes named by their SHA-256, kept in a
 * cache under the state directory (<state>/content/<sha256>, root only) and fetched
 * from content sources when missing: the blobs/ directory beside a declaration file
 * or the bundle. Every byte is verified against its digest and size before it is
 * used or cached; a cached entry that no longer matches is dropped and fetched again.
 */
import { posix } from "../posix_path.ts";
import { sha256Hex } from "../declaration/canonical.ts";
import { HostError } from "../errors.ts";

/** Where bytes named by digest can come from. Unverified: the resolver verifies. */
export interface ContentSource {
  /** Said in errors: "blobs/ beside /srv/site.json", "the mesh's object store". */
  readonly name: string;
  /**
   * The bytes named `sha256`, `null` when this source does not hold them, or
   * `WRONG_SIZE` when what it holds under that name is not `size` bytes.
   */
  get(sha256: string, size: number): Promise<Uint8Array | null | typeof WRONG_SIZE>;
}

/** What a source answers for a name that holds something of another size. */
export const WRONG_SIZE: unique symbol = Symbol("wrong size");

/** Content by reference could not be had. */
export class ContentError extends HostError {
  constructor(what: string, hint: string) {
    super("content.unavailable", what, { hint });
  }
}

/**
 * Read a regular file of exactly `size` bytes; `null` when nothing is there, and
 * `WRONG_SIZE` (never read) when it is not a regular file of that size.
 */
async function readSized(
  path: string,
  size: number,
): Promise<Uint8Array | null | typeof WRONG_SIZE> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  using _ = file;
  const info = await file.stat();
  // Another size is another content: never read more than was declared.
  if (!info.isFile || info.size !== size) return WRONG_SIZE;
  const bytes = new Uint8Array(size);
  let done = 0;
  while (done < size) {
    const n = await file.read(bytes.subarray(done));
    if (n === null) return WRONG_SIZE; // shrank meanwhile
    done += n;
  }
  return bytes;
}

/** A directory of files named by their SHA-256 (the bundle's blobs/). */
export function blobDirectory(dir: string, name = `blobs/ in ${dir}`): ContentSource {
  return { name, get: (sha256, size) => readSized(posix.join(dir, sha256), size) };
}

/** The cache of verified content under the state directory. */
export class ContentCache {
  readonly dir: string;

  constructor(stateDir: string) {
    this.dir = posix.join(stateDir, "content");
  }

  /** Cached bytes of `sha256`, verified; `null` when not cached (or no longer intact). */
  async get(sha256: string, size: number): Promise<Uint8Array | null> {
    const path = posix.join(this.dir, sha256);
    const bytes = await readSized(path, size);
    if (bytes === null) return null;
    if (bytes !== WRONG_SIZE && await sha256Hex(bytes) === sha256) return bytes;
    await Deno.remove(path).catch(() => {});
    return null;
  }

  /** Keep verified bytes: written private, synced, then renamed into place. */
  async put(sha256: string, bytes: Uint8Array): Promise<void> {
    await Deno.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const temp = posix.join(this.dir, `.${sha256}.new`);
    await Deno.remove(temp).catch(() => {});
    {
      using file = await Deno.open(temp, { write: true, createNew: true, mode: 0o600 });
      let done = 0;
      while (done < bytes.length) done += await file.write(bytes.subarray(done));
      await file.sync();
    }
    await Deno.rename(temp, posix.join(this.dir, sha256));
  }

  /** Remove every entry whose digest is not in `keep` (nothing held names it any more). */
  async prune(keep: ReadonlySet<string>): Promise<void> {
    let entries: Deno.DirEntry[];
    try {
      entries = await Array.fromAsync(Deno.readDir(this.dir));
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return;
      throw error;
    }
    for (const entry of entries) {
      if (!keep.has(entry.name)) {
        await Deno.remove(posix.join(this.dir, entry.name)).catch(() => {});
      }
    }
  }

  /** The digests cached now. */
  async digests(): Promise<string[]> {
    try {
      return (await Array.fromAsync(Deno.readDir(this.dir))).map((e) => e.name).sort();
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return [];
      throw error;
    }
  }
}

/**
 * The bytes of `sha256` (`size` bytes): from the cache, else from the first source
 * that holds them, verified and then cached. Throws a {@link ContentError} naming
 * `forPath` when no source holds them, or when what a source holds is not them.
 */
export function contentResolver(
  cache: ContentCache,
  sources: readonly ContentSource[],
): (sha256: string, size: number, forPath: string) => Promise<Uint8Array> {
  return async (sha256, size, forPath) => {
    const cached = await cache.get(sha256, size);
    if (cached !== null) return cached;
    for (const source of sources) {
      const bytes = await source.get(sha256, size);
      if (bytes === null) continue;
      const digest = bytes === WRONG_SIZE ? undefined : await sha256Hex(bytes);
      if (digest !== sha256) {
        throw new ContentError(
          `the content of ${forPath} from ${source.name} is not what was declared: ` +
            (digest === undefined
              ? `not ${size} bytes`
              : `its sha256 is ${digest}, the declaration names ${sha256}`),
          "replace the object with the declared bytes, or declare its digest; nothing was written",
        );
      }
      await cache.put(sha256, bytes as Uint8Array);
      return bytes as Uint8Array;
    }
    throw new ContentError(
      `the content of ${forPath} (sha256 ${sha256}, ${size} bytes) is in none of its sources` +
        (sources.length ? `: ${sources.map((s) => s.name).join(", ")}` : " (none for this apply)"),
      "put the object where the host fetches it (deno task mesh put FILE, or the blobs/ " +
        "directory beside the declaration), then apply again",
    );
  };
}
