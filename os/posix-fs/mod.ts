/**
 * The file system adapter for Linux (any distribution): node:fs descriptor calls
 * (open with O_NOFOLLOW, fstat, fchown, fchmod, fsync) plus /etc/passwd and
 * /etc/group for names. Verbs only; the file and directory resources decide
 * what to do with them.
 *
 * Every verb that sets owner or mode does it on a descriptor it opened itself,
 * never by name: a name in a directory someone else owns can be swapped for a
 * symlink at any moment, a descriptor cannot (DESIGN.md §18). Deno's own file
 * API has no O_NOFOLLOW, fchown or fchmod, hence node:fs, which Deno's
 * permission set still checks at each open.
 */
import * as nodeFs from "node:fs";
import { posix } from "node:path";
import {
  type Attributes,
  type FileRead,
  type FileSystem,
  type PathInfo,
  UnsafePathError,
} from "../../src/providers.ts";

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } =
  nodeFs.constants;
/** A file to read: never through a symlink, never waiting for a FIFO's writer. */
const READ = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
/** A directory to act on: it must be one, and not a symlink to one. */
const DIRECTORY = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;
/** A temporary file: a new one, never an existing name (a symlink included). */
const NEW_FILE = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;

/** Options for the adapter; the account databases can be pointed elsewhere for tests. */
export interface PosixFileSystemOptions {
  passwdPath?: string;
  groupPath?: string;
  /**
   * TESTS ONLY (never set by the host): called right after the adapter created
   * `path` (the temporary file of a write, or a new directory) and before it
   * sets owner and mode, so a test can swap the name for a symlink exactly
   * where an attacker would (tests/fs_race_test.ts).
   */
  afterCreate?: (path: string) => void;
}

/** Create the POSIX file system adapter. */
export function posixFileSystem(options: PosixFileSystemOptions = {}): FileSystem {
  const users = new AccountDatabase(options.passwdPath ?? "/etc/passwd");
  const groups = new AccountDatabase(options.groupPath ?? "/etc/group");
  const afterCreate = options.afterCreate ?? (() => {});
  // Synchronous calls on purpose: a check pass makes thousands of these in a row,
  // and sync file ops cost a fraction of the async ones.
  return {
    lstat: (path) => attempt(() => lstat(path)),
    readFile: (path, size) => attempt(() => readRegularFile(path, size)),
    writeFileAtomic: (path, data, attributes, beforeRename) =>
      writeFileAtomic(path, data, attributes, afterCreate, beforeRename),
    discardPartialWrite,
    makeDirectory: (path, attributes) =>
      attempt(() => {
        // Created private first, so nobody sees it with the wrong owner or mode.
        Deno.mkdirSync(path, { mode: 0o700 });
        afterCreate(path);
        using dir = openDirectory(path, "is no longer the directory the host just made");
        setOn(dir, attributes);
      }),
    setAttributes: (path, attributes) =>
      attempt(() => {
        // The descriptor is opened for reading (a directory cannot be opened for
        // writing), which Deno's permission set checks as a read: ask it about the
        // write the change is, so the set stays the ceiling it is for chmod by name.
        requireWrite(path);
        using dir = openDirectory(path, "is not a directory");
        setOn(dir, attributes);
      }),
    remove: (path) => Deno.remove(path), // unlink/rmdir: never follows a symlink
    async isEmptyDirectory(path) {
      for await (const _ of Deno.readDir(path)) return false;
      return true;
    },
    async syncDirectory(path) {
      using dir = openDirectory(path, "is not a directory");
      await fsync(dir.fd);
    },
    userId: (name) => users.idOf(name),
    groupId: (name) => groups.idOf(name),
  };
}

/** A synchronous call as a promise, its failure a rejection. */
function attempt<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** An open descriptor, closed when it goes out of scope (`using`). */
class Descriptor implements Disposable {
  constructor(readonly fd: number, readonly path: string) {}
  stat(): nodeFs.Stats {
    return sys(() => nodeFs.fstatSync(this.fd));
  }
  [Symbol.dispose](): void {
    nodeFs.closeSync(this.fd);
  }
}

/**
 * Run a node:fs call; the errors the core branches on become Deno's own
 * (NotFound, AlreadyExists, PermissionDenied), with node's message. Deno's
 * permission refusals (NotCapable) pass through as they are.
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

/**
 * fsync on a worker thread: the writes of one apply window wait for their syncs
 * together, and the file system's journal merges them into few commits.
 */
function fsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) =>
    nodeFs.fsync(fd, (error) => error ? reject(translated(error)) : resolve())
  );
}

/** What is at a path, in a few words, for an error message (never for a decision). */
function describeAt(path: string): string {
  const info = (() => {
    try {
      return lstat(path);
    } catch {
      return undefined;
    }
  })();
  if (info === undefined) return "something the host cannot look at";
  if (info === null) return "nothing";
  return info.kind === "other" ? "a special file" : `a ${info.kind}`;
}

/**
 * Open a directory without following a symlink at `path`; anything but a
 * directory is refused with an error naming it ("PATH WHY: now a symlink").
 */
function openDirectory(path: string, why: string): Descriptor {
  let fd: number;
  try {
    fd = sys(() => nodeFs.openSync(path, DIRECTORY));
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== "ELOOP" && code !== "ENOTDIR") throw error;
    throw new UnsafePathError(
      path,
      `${why}: it is ${describeAt(path)}`,
      "the host never acts through a symlink or on a path swapped while it works; " +
        "see who can write the directory above it",
    );
  }
  return new Descriptor(fd, path);
}

/** Owner, then mode (chowning clears setuid/setgid, which the mode then sets as declared). */
function setOn(target: Descriptor, { mode, uid, gid }: Attributes): void {
  sys(() => nodeFs.fchownSync(target.fd, uid, gid));
  sys(() => nodeFs.fchmodSync(target.fd, mode));
}

/** Refuse, as Deno's runtime would, a change the permission set does not allow. */
function requireWrite(path: string): void {
  if (Deno.permissions.querySync({ name: "write", path }).state !== "granted") {
    throw new Deno.errors.NotCapable(
      `Requires write access to "${path}", run again with the --allow-write flag`,
    );
  }
}

function lstat(path: string): PathInfo | null {
  let info: Deno.FileInfo;
  try {
    info = Deno.lstatSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  const kind = info.isSymlink
    ? "symlink"
    : info.isFile
    ? "file"
    : info.isDirectory
    ? "directory"
    : "other";
  return {
    kind,
    mode: (info.mode ?? 0) & 0o7777,
    uid: info.uid ?? -1,
    gid: info.gid ?? -1,
    size: info.size,
  };
}

/** A descriptor's fstat as a PathInfo (a symlink never, O_NOFOLLOW refused it). */
function pathInfo(stat: nodeFs.Stats): PathInfo {
  return {
    kind: stat.isFile() ? "file" : stat.isDirectory() ? "directory" : "other",
    mode: stat.mode & 0o7777,
    uid: stat.uid,
    gid: stat.gid,
    size: stat.size,
  };
}

function specialKind(stat: nodeFs.Stats): string {
  if (stat.isFIFO()) return "a FIFO";
  if (stat.isSocket()) return "a socket";
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return "a device";
  if (stat.isDirectory()) return "a directory";
  return "a special file";
}

function readRegularFile(path: string, size?: number): FileRead {
  let fd: number;
  try {
    fd = sys(() => nodeFs.openSync(path, READ));
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
  if (size !== undefined && size !== info.size) return { info, data: null };
  const data = new Uint8Array(info.size);
  let read = 0;
  while (read < data.length) {
    const n = sys(() => nodeFs.readSync(fd, data, read, data.length - read, read));
    if (n === 0) return { info, data: data.subarray(0, read) }; // shrank meanwhile
    read += n;
  }
  return { info, data };
}

const READ_HINT = "the host reads only regular files; remove it, or change the declaration";

/** The same file: dev and ino agree (one look by name against the descriptor's). */
function sameFile(byName: Deno.FileInfo | null, held: nodeFs.Stats): boolean {
  return byName !== null && byName.dev === held.dev && byName.ino === held.ino;
}

function lstatOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/**
 * The temporary name a write of `path` uses. One name per path is enough: the
 * apply lock allows one writer, and a name that is known can be cleaned up
 * after a crash (see discardPartialWrite).
 */
function tempPathFor(path: string): string {
  return posix.join(posix.dirname(path), `.${posix.basename(path).slice(0, 200)}.nox-new`);
}

async function discardPartialWrite(path: string): Promise<void> {
  // Deno.remove never follows a symlink: a planted link is removed, not its target.
  await Deno.remove(tempPathFor(path)).catch((error) => {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  });
}

async function writeFileAtomic(
  path: string,
  data: Uint8Array,
  attributes: Attributes,
  afterCreate: (path: string) => void,
  beforeRename?: () => Promise<void>,
): Promise<void> {
  // Synchronous calls, but for the fsync: a thread pool round trip per call costs
  // more than the call (creates in one directory serialize on it anyway), while
  // the fsyncs of concurrent writes overlap and the journal merges them.
  const dir = posix.dirname(path);
  const temp = tempPathFor(path);
  // The directory, resolved once: before the rename its name must still lead here.
  using parent = openDirectory(dir, `(the directory of ${path}) is not a directory`);
  const parentStat = parent.stat();
  let written: nodeFs.Stats | undefined;
  let renamed = false;
  try {
    {
      using file = createTemp(temp);
      written = file.stat();
      afterCreate(temp);
      let done = 0;
      while (done < data.length) {
        done += sys(() => nodeFs.writeSync(file.fd, data, done, data.length - done));
      }
      setOn(file, attributes);
      await fsync(file.fd);
    }
    await beforeRename?.();
    // The last look before the rename: the directory's name still leads to the
    // directory opened above, and the temporary name is still the file written.
    if (!sameFile(lstatOrNull(dir), parentStat)) {
      throw new UnsafePathError(
        dir,
        `was replaced while ${path} was being written; nothing was renamed`,
        SWAP_HINT,
      );
    }
    if (!sameFile(lstatOrNull(temp), written)) {
      throw new UnsafePathError(
        temp,
        `(the temporary file of ${path}) was replaced while it was being written; ` +
          "nothing was renamed",
        SWAP_HINT,
      );
    }
    Deno.renameSync(temp, path);
    renamed = true;
  } finally {
    // Only the file this write made is removed; a name someone else put there is left.
    if (!renamed && written !== undefined && sameFile(lstatOrNull(temp), written)) {
      try {
        Deno.removeSync(temp);
      } catch { /* gone meanwhile */ }
    }
  }
}

const SWAP_HINT = "someone who can write that directory swapped names while the host worked; " +
  "the host never acts through what is put there";

/**
 * Create the temporary file: O_CREAT|O_EXCL|O_NOFOLLOW, so it is always a new
 * file, never opened through a symlink someone planted; one left by a crashed
 * write is removed first (unlink: a planted link is removed, not its target).
 */
function createTemp(temp: string): Descriptor {
  const open = () => new Descriptor(sys(() => nodeFs.openSync(temp, NEW_FILE, 0o600)), temp);
  try {
    return open();
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    Deno.removeSync(temp);
    return open();
  }
}

/**
 * A name → id table read from a passwd/group style file. A name found within the
 * last second is answered from memory; otherwise (and always for a name not found,
 * e.g. a user a package just added) the file is checked for changes and re-read.
 */
class AccountDatabase {
  static readonly FRESH_MS = 1000;
  #path: string;
  #stamp = "";
  #checkedAt = -Infinity;
  #ids = new Map<string, number>();

  constructor(path: string) {
    this.#path = path;
  }

  idOf(name: string): Promise<number | undefined> {
    return Promise.resolve(this.#lookup(name));
  }

  #lookup(name: string): number | undefined {
    if (/^[0-9]+$/.test(name)) return Number(name);
    const known = this.#ids.get(name);
    if (known !== undefined && performance.now() - this.#checkedAt < AccountDatabase.FRESH_MS) {
      return known;
    }
    this.#refresh();
    return this.#ids.get(name);
  }

  #refresh(): void {
    let info: Deno.FileInfo;
    try {
      info = Deno.statSync(this.#path);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      this.#ids = new Map();
      this.#stamp = "";
      return;
    }
    this.#checkedAt = performance.now();
    const stamp = `${info.mtime?.getTime()}:${info.size}:${info.ino}`;
    if (stamp === this.#stamp) return;
    this.#ids = new Map();
    for (const line of Deno.readTextFileSync(this.#path).split("\n")) {
      const [entry, , id] = line.split(":");
      if (entry && id !== undefined && /^[0-9]+$/.test(id) && !this.#ids.has(entry)) {
        this.#ids.set(entry, Number(id));
      }
    }
    this.#stamp = stamp;
  }
}
