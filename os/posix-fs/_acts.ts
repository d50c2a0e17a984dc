/**
 * The file system's verbs by absolute path: what the host does as root where only root can
 * change the directories above a path, and what its child does as a directory's owner
 * (./serve.ts) everywhere else. The walk that decides which one may act (./_walk.ts) comes
 * first; these acts never decide that. The last name is never followed: opened O_NOFOLLOW
 * (O_CREAT|O_EXCL for the temporary file of a write, O_NONBLOCK for reads, where anything
 * but a regular file is refused by fstat before a byte is read), owner and mode set with
 * fchown/fchmod on the descriptor, never by name. Deno's own file API has no O_NOFOLLOW,
 * O_NONBLOCK, fchown or fchmod, hence node:fs, which Deno's permission set still checks at
 * each open.
 */
import type * as NodeFs from "node:fs";
import { posix } from "../../src/posix_path.ts";
import {
  type Attributes,
  type FileIdentity,
  type FileRead,
  type PathInfo,
  type Removal,
  UnsafePathError,
} from "../../src/providers.ts";

let loaded: { fs: typeof NodeFs; flags: OpenFlags } | undefined;

/** How a verb opens what it acts on (each architecture has its own O_ numbers). */
interface OpenFlags {
  /** A file to read: never through a symlink, never waiting for a FIFO's writer. */
  READ: number;
  /** A directory to act on: it must be one, and not a symlink to one. */
  DIRECTORY: number;
  /** A temporary file: a new one, never an existing name (a symlink included). */
  NEW_FILE: number;
}

/**
 * node:fs (descriptor calls), loaded when a verb first needs it: loading it loads Deno's
 * node layer (15–30 ms of CPU and about 13 MiB), which a pass that only looks (lstat)
 * never needs.
 */
function node(): { fs: typeof NodeFs; flags: OpenFlags } {
  if (loaded === undefined) {
    const fs = process.getBuiltinModule("node:fs") as typeof NodeFs;
    const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } =
      fs.constants;
    loaded = {
      fs,
      flags: {
        READ: O_RDONLY | O_NOFOLLOW | O_NONBLOCK,
        DIRECTORY: O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK,
        NEW_FILE: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
      },
    };
  }
  return loaded;
}

const nodeFs = () => node().fs;

/** An open descriptor, closed when it goes out of scope (`using`). */
export class Descriptor implements Disposable {
  #open = true;
  constructor(readonly fd: number, readonly path: string) {}
  stat(): NodeFs.Stats {
    return sys(() => nodeFs().fstatSync(this.fd));
  }
  [Symbol.dispose](): void {
    if (!this.#open) return;
    this.#open = false;
    nodeFs().closeSync(this.fd);
  }
}

/**
 * Run a node:fs call; the errors the core branches on become Deno's own (NotFound,
 * AlreadyExists, PermissionDenied), with node's message. Deno's permission refusals
 * (NotCapable) pass through as they are.
 */
function sys<T>(call: () => T): T {
  try {
    return call();
  } catch (error) {
    throw translated(error);
  }
}

function translated(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  if (code === "ENOENT") return new Deno.errors.NotFound(message, { cause: error });
  if (code === "EEXIST") return new Deno.errors.AlreadyExists(message, { cause: error });
  if (code === "EACCES" || code === "EPERM") {
    return new Deno.errors.PermissionDenied(message, { cause: error });
  }
  return error;
}

/** fsync on a worker thread: the writes of one apply window wait for their syncs together. */
export function fsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) =>
    nodeFs().fsync(fd, (error) => error ? reject(translated(error)) : resolve())
  );
}

export const SYMLINK_HINT = "the host acts only through real directories, from / down, never " +
  "through a symlink; declare the real path, or see who can write the directory above it";

const SWAP_HINT = "someone who can write that directory swapped names while the host worked; " +
  "the host never acts through what is put there";

const READ_HINT = "the host reads only regular files; remove it, or change the declaration";

/** lstat, `null` when nothing is there. */
export function lstatOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

export function kindOf(info: Deno.FileInfo): PathInfo["kind"] {
  return info.isSymlink
    ? "symlink"
    : info.isFile
    ? "file"
    : info.isDirectory
    ? "directory"
    : "other";
}

/** What an lstat says, as the core sees it (with a regular file's identity). */
export function pathInfoOf(info: Deno.FileInfo): PathInfo {
  const identity = identityOf(info);
  return {
    kind: kindOf(info),
    mode: (info.mode ?? 0) & 0o7777,
    uid: info.uid ?? -1,
    gid: info.gid ?? -1,
    size: info.size,
    ...(identity === undefined ? {} : { identity }),
  };
}

/**
 * A regular file's identity from its lstat (Deno 2.9.6 gives the modification time to the
 * millisecond and the change time to the second: the adapter's `ctimeStepNs`).
 */
function identityOf(info: Deno.FileInfo): FileIdentity | undefined {
  if (!info.isFile || info.ino === null || info.mtime === null || info.ctime === null) {
    return undefined;
  }
  return {
    dev: info.dev,
    ino: info.ino,
    size: info.size,
    mtimeNs: BigInt(info.mtime.getTime()) * 1_000_000n,
    ctimeNs: BigInt(info.ctime.getTime()) * 1_000_000n,
  };
}

/** lstat `path`: `null` when it (or the directory above it) is missing. */
export function lstatAt(path: string): PathInfo | null {
  try {
    const info = lstatOrNull(path);
    return info === null ? null : pathInfoOf(info);
  } catch (error) {
    if ((error as { code?: unknown }).code === "ENOTDIR") return null;
    throw error;
  }
}

function specialKindOf(info: Deno.FileInfo): string {
  if (info.isFifo) return "a FIFO";
  if (info.isSocket) return "a socket";
  if (info.isCharDevice || info.isBlockDevice) return "a device";
  if (info.isDirectory) return "a directory";
  return "a special file";
}

function specialKind(stat: NodeFs.Stats): string {
  if (stat.isFIFO()) return "a FIFO";
  if (stat.isSocket()) return "a socket";
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return "a device";
  if (stat.isDirectory()) return "a directory";
  return "a special file";
}

/** A descriptor's fstat as a PathInfo (never a symlink: O_NOFOLLOW refused it). */
function pathInfo(stat: NodeFs.Stats): PathInfo {
  return {
    kind: stat.isFile() ? "file" : stat.isDirectory() ? "directory" : "other",
    mode: stat.mode & 0o7777,
    uid: stat.uid,
    gid: stat.gid,
    size: stat.size,
  };
}

/**
 * Read the regular file at `path`. Its identity is taken first, by lstat (never following
 * a link); then it is opened O_NOFOLLOW|O_NONBLOCK (a FIFO put there meanwhile never makes
 * the open wait for a writer), and fstat must show a regular file before a byte is read;
 * the identity is kept only if the descriptor is the inode the lstat saw. With `size`, the
 * bytes are read only when the file has exactly that size; without it, a file larger than
 * `max` (when given) is refused.
 */
export function readAt(path: string, size?: number, max?: number): FileRead {
  const seen = lstatOrNull(path);
  if (seen === null) throw new Deno.errors.NotFound(`${path} does not exist`);
  if (seen.isSymlink) {
    throw new UnsafePathError(path, "is a symlink, not a regular file", READ_HINT);
  }
  if (!seen.isFile) {
    throw new UnsafePathError(path, `is ${specialKindOf(seen)}, not a regular file`, READ_HINT);
  }
  const identity = identityOf(seen);
  let fd: number;
  try {
    fd = sys(() => nodeFs().openSync(path, node().flags.READ));
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ELOOP") throw error;
    throw new UnsafePathError(path, "is a symlink, not a regular file", READ_HINT);
  }
  using file = new Descriptor(fd, path);
  const stat = file.stat();
  if (!stat.isFile()) {
    throw new UnsafePathError(path, `is ${specialKind(stat)}, not a regular file`, READ_HINT);
  }
  const info = pathInfo(stat);
  const same = stat.dev === seen.dev && stat.ino === seen.ino;
  const found = { ...info, ...(same && identity ? { identity } : {}) };
  if (size !== undefined && size !== info.size) return { info: found, data: null };
  if (size === undefined && max !== undefined && info.size > max) {
    throw new UnsafePathError(
      path,
      `is ${info.size} bytes, more than the ${max} the host reads of a file of unknown size`,
      READ_HINT,
    );
  }
  const data = new Uint8Array(info.size);
  let read = 0;
  while (read < data.length) {
    const n = sys(() => nodeFs().readSync(fd, data, read, data.length - read, read));
    if (n === 0) break; // shrank meanwhile
    read += n;
  }
  return { info: found, data: data.subarray(0, read) };
}

/** What is at `path`, for an error message. */
function describe(path: string): string {
  let info: Deno.FileInfo | null;
  try {
    info = lstatOrNull(path);
  } catch {
    return "something the host cannot look at";
  }
  if (info === null) return "nothing";
  return `a ${kindOf(info) === "other" ? "special file" : kindOf(info)}`;
}

/**
 * Open the directory `path` without following a symlink; anything but a directory is
 * refused with an error naming it ("PATH WHY: it is a symlink").
 */
function openDirectory(path: string, why: string): Descriptor {
  let fd: number;
  try {
    fd = sys(() => nodeFs().openSync(path, node().flags.DIRECTORY));
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== "ELOOP" && code !== "ENOTDIR") throw error;
    throw new UnsafePathError(
      path,
      `${why}: it is ${describe(path)}`,
      "the host never acts through a symlink or on a path swapped while it works; " +
        "see who can write the directory above it",
    );
  }
  return new Descriptor(fd, path);
}

/** Owner, then mode (chowning clears setuid/setgid, which the mode then sets as declared). */
function setOn(target: Descriptor, { mode, uid, gid }: Attributes): void {
  sys(() => nodeFs().fchownSync(target.fd, uid, gid));
  sys(() => nodeFs().fchmodSync(target.fd, mode));
}

/**
 * Refuse, as Deno's runtime would, a change the permission set does not allow: a
 * directory is opened for reading (it cannot be opened for writing), which Deno checks as
 * a read; the change it is for is a write.
 */
function requireWrite(path: string): void {
  if (Deno.permissions.querySync({ name: "write", path }).state !== "granted") {
    throw new Deno.errors.NotCapable(
      `Requires write access to "${path}", run again with the --allow-write flag`,
    );
  }
}

/** mkdir (private at first), then owner and mode on the new directory's descriptor. */
export function makeDirectoryAt(path: string, attributes: Attributes): void {
  // Created private first, so nobody sees it with the wrong owner or mode.
  Deno.mkdirSync(path, { mode: 0o700 });
  using dir = openDirectory(path, "is no longer the directory the host just made");
  setOn(dir, attributes);
}

/** Owner and mode of the existing directory `path`, on its descriptor. */
export function setAttributesAt(path: string, attributes: Attributes): void {
  requireWrite(path);
  using dir = openDirectory(path, "is not a directory");
  setOn(dir, attributes);
}

/** Whether the directory `path` (not a symlink) has no entries. */
export function isEmptyAt(path: string): boolean {
  const info = lstatOrNull(path);
  if (info === null) throw new Deno.errors.NotFound(`${path} does not exist`);
  if (!info.isDirectory) {
    throw new UnsafePathError(path, `is not a directory: it is ${describe(path)}`, SYMLINK_HINT);
  }
  for (const _ of Deno.readDirSync(path)) return false;
  return true;
}

/** The directory `path`, opened (never through a symlink) to be synced. */
export function openForSync(path: string): Descriptor {
  return openDirectory(path, "is not a directory");
}

/**
 * Remove the file or the empty directory `path`: unlink for a file (never a directory),
 * rmdir for a directory (never one with entries; the kernel checks, at the instant it
 * removes). A symlink at the path is removed, never followed.
 */
export function removeAt(path: string, kind: "file" | "directory"): Removal {
  if (kind === "directory") {
    try {
      nodeFs().rmdirSync(path);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code === "ENOTEMPTY" || code === "EEXIST") return "not-empty";
      if (code === "ENOENT") return "gone";
      if (code === "ENOTDIR") {
        throw new UnsafePathError(path, `is no longer a directory: it is ${describe(path)}`);
      }
      throw translated(error);
    }
    return "removed";
  }
  const info = lstatOrNull(path);
  if (info === null) return "gone";
  if (info.isDirectory) throw new UnsafePathError(path, "is no longer a file: it is a directory");
  try {
    Deno.removeSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "gone";
    throw error;
  }
  return "removed";
}

/**
 * The temporary name a write of `path` uses, beside it. One name per path is enough: the
 * apply lock allows one writer, and a name that is known can be cleaned up after a crash.
 */
export function tempPathFor(path: string): string {
  return posix.join(posix.dirname(path), `.${posix.basename(path).slice(0, 200)}.nox-new`);
}

/** Remove what an interrupted write of `path` left beside it (unlink: never followed). */
export function discardAt(path: string): void {
  const temp = tempPathFor(path);
  try {
    if (lstatOrNull(temp)?.isDirectory === false) Deno.removeSync(temp);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

/** A write under way: its temporary file, still open, and what it was when written. */
export interface Prepared {
  readonly path: string;
  readonly temp: string;
  readonly file: Descriptor;
  readonly dev: number;
  readonly ino: number;
}

/**
 * The first half of an atomic write: a new temporary file beside `path`
 * (O_CREAT|O_EXCL|O_NOFOLLOW: a name someone put there is never opened; one left by a
 * crashed write is unlinked first), its data, owner and mode. The caller syncs it
 * ({@link fsync}, or {@link syncNow}); the file stays open until {@link commitAt} or
 * {@link abortAt}, so its inode cannot be reused meanwhile.
 */
export function prepareAt(path: string, data: Uint8Array, attributes: Attributes): Prepared {
  const prepared = createTempAt(path);
  try {
    writeTo(prepared, data);
    sealAt(prepared, attributes);
    return prepared;
  } catch (error) {
    abortAt(prepared);
    throw error;
  }
}

/** A new temporary file beside `path`, open for writing (see {@link prepareAt}). */
export function createTempAt(path: string): Prepared {
  const temp = tempPathFor(path);
  const open = () =>
    new Descriptor(sys(() => nodeFs().openSync(temp, node().flags.NEW_FILE, 0o600)), temp);
  let file: Descriptor;
  try {
    file = open();
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    Deno.removeSync(temp);
    file = open();
  }
  const { dev, ino } = file.stat();
  return { path, temp, file, dev, ino };
}

/** Append bytes to a temporary file. */
export function writeTo(prepared: Prepared, data: Uint8Array): void {
  let done = 0;
  while (done < data.length) {
    done += sys(() => nodeFs().writeSync(prepared.file.fd, data, done, data.length - done));
  }
}

/** Owner and mode of a temporary file, on its descriptor. */
export function sealAt(prepared: Prepared, attributes: Attributes): void {
  setOn(prepared.file, attributes);
}

/** fsync, here and now (the child acting as an owner does one act at a time). */
export function syncNow(fd: number): void {
  sys(() => nodeFs().fsyncSync(fd));
}

/**
 * The second half: the temporary name must still be the file written, then it is renamed
 * over `path`. The descriptor is closed either way.
 */
export function commitAt(prepared: Prepared): void {
  try {
    const now = lstatOrNull(prepared.temp);
    if (now === null || now.dev !== prepared.dev || now.ino !== prepared.ino) {
      throw new UnsafePathError(
        prepared.temp,
        `(the temporary file of ${prepared.path}) was replaced while it was being written; ` +
          "nothing was renamed",
        SWAP_HINT,
      );
    }
    Deno.renameSync(prepared.temp, prepared.path);
  } finally {
    prepared.file[Symbol.dispose]();
  }
}

/** Give a write up: its temporary file is removed when it is still the one written. */
export function abortAt(prepared: Prepared): void {
  try {
    const now = lstatOrNull(prepared.temp);
    if (now !== null && now.dev === prepared.dev && now.ino === prepared.ino) {
      Deno.removeSync(prepared.temp);
    }
  } catch {
    /* gone meanwhile: left as it is */
  } finally {
    prepared.file[Symbol.dispose]();
  }
}
