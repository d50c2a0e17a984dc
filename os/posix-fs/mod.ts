/**
 * The file system adapter for Linux (any distribution): node:fs descriptor calls
 * (open with O_NOFOLLOW, fstat, fchown, fchmod, fsync) plus /etc/passwd and
 * /etc/group for names. Verbs only; the file and directory resources decide
 * what to do with them.
 *
 * Every act happens in a directory the host holds, by one last name, never
 * through a path resolved again (DESIGN.md §18). Deno has no openat and refuses
 * /proc/self/fd without --allow-all, so the one directory the runtime lets a call
 * act in without naming it again is the process's working directory: a verb
 * goes into the directory it works in (chdir), proves that the directory it now
 * stands in is the one at exactly that path, with no symlink anywhere from / down
 * (getcwd, which the kernel answers from the directory itself, must equal the
 * path), and then acts there by the last name alone: opened O_NOFOLLOW, created
 * O_EXCL, renamed, made or removed within that directory, whatever anyone renames
 * meanwhile. Deno checks its permission set against the same place (a relative
 * name is resolved from the real working directory), so deny-write holds there
 * too. Then the verb goes back (see {@link WorkingDirectory}). Owner and mode are
 * set on descriptors only (fchown/fchmod), never by name. Deno's own file API has
 * no O_NOFOLLOW, fchown or fchmod, hence node:fs, which Deno's permission set
 * still checks at each open.
 */
import type * as NodeFs from "node:fs";
import { posix } from "../../src/posix_path.ts";
import {
  type Attributes,
  type FileIdentity,
  type FileRead,
  type FileSystem,
  type PathInfo,
  type Removal,
  UnsafePathError,
} from "../../src/providers.ts";

/**
 * How coarse the change times Deno reports are: Deno 2.9.6 gives a file's change time to
 * the second (its modification time to the millisecond; tests/os/posix_fs_identity_test.ts
 * keeps the claim honest).
 */
const CTIME_STEP_NS = 1_000_000_000n;

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
 * node:fs (descriptor calls: open with O_NOFOLLOW, fstat, fchown, fchmod, fsync), loaded
 * when a verb first needs it: loading it loads Deno's node layer (about 25 ms of CPU and
 * 10 MiB), which a pass that only looks (lstat, in a held directory) never needs.
 */
function nodeFs(): typeof NodeFs {
  return node().fs;
}

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

/** The acts a verb makes inside a directory it holds (for the tests' hook). */
export type FsAct =
  | "lstat"
  | "read"
  | "create"
  | "rename"
  | "mkdir"
  | "chown"
  | "remove"
  | "list"
  | "sync";

/** Options for the adapter; the account databases can be pointed elsewhere for tests. */
export interface PosixFileSystemOptions {
  passwdPath?: string;
  groupPath?: string;
  /**
   * Where the process waits between verbs when the working directory it was
   * started in cannot be entered again under the permission set (a service
   * started in `/`): the host gives its state directory. Without it, the process
   * stays in the last directory a verb worked in.
   */
  home?: string;
  /**
   * TESTS ONLY (never set by the host): called right after the adapter created
   * `path` (the temporary file of a write, or a new directory) and before it
   * sets owner and mode, so a test can swap the name for a symlink exactly
   * where an attacker would (tests/fs_race_test.ts).
   */
  afterCreate?: (path: string) => void;
  /**
   * TESTS ONLY (never set by the host): called inside the directory a verb holds,
   * after it was proven to be the one at its path and right before the verb acts
   * there, so a test can swap the directories above for symlinks at each step
   * (tests/fs_race_test.ts).
   */
  beforeAct?: (act: FsAct, path: string) => void;
}

/** Create the POSIX file system adapter. */
export function posixFileSystem(options: PosixFileSystemOptions = {}): FileSystem {
  const users = new AccountDatabase(options.passwdPath ?? "/etc/passwd");
  const groups = new AccountDatabase(options.groupPath ?? "/etc/group");
  const afterCreate = options.afterCreate ?? (() => {});
  const beforeAct = options.beforeAct ?? (() => {});
  const cwd = new WorkingDirectory(options.home);
  // Synchronous calls on purpose: a check pass makes thousands of these in a row,
  // sync file ops cost a fraction of the async ones, and the working directory is
  // the process's: a verb must never wait (await) while it stands in one.
  return {
    lstat: (path) => attempt(() => lstat(cwd, path, beforeAct)),
    ctimeStepNs: CTIME_STEP_NS,
    readFile: (path, size) =>
      attempt(() =>
        cwd.within(posix.dirname(path), path, () => {
          beforeAct("read", path);
          return readHere(posix.basename(path), path, size);
        })
      ),
    writeFileAtomic: (path, data, attributes, beforeRename) =>
      writeFileAtomic(cwd, path, data, attributes, { afterCreate, beforeAct }, beforeRename),
    discardPartialWrite: (path) => attempt(() => discardPartialWrite(cwd, path)),
    makeDirectory: (path, attributes) =>
      attempt(() =>
        cwd.within(posix.dirname(path), path, () => {
          const name = posix.basename(path);
          beforeAct("mkdir", path);
          // Created private first, so nobody sees it with the wrong owner or mode.
          Deno.mkdirSync(name, { mode: 0o700 });
          afterCreate(path);
          using dir = openDirectory(name, path, "is no longer the directory the host just made");
          setOn(dir, attributes);
        })
      ),
    setAttributes: (path, attributes) =>
      attempt(() =>
        cwd.within(posix.dirname(path), path, () => {
          const name = posix.basename(path);
          // The descriptor is opened for reading (a directory cannot be opened for
          // writing), which Deno's permission set checks as a read: ask it about the
          // write the change is, so the set stays the ceiling it is for chmod by name.
          requireWrite(name, path);
          beforeAct("chown", path);
          using dir = openDirectory(name, path, "is not a directory");
          setOn(dir, attributes);
        })
      ),
    remove: (path, kind) => attempt(() => remove(cwd, path, kind, beforeAct)),
    isEmptyDirectory: (path) =>
      attempt(() =>
        cwd.within(path, path, () => {
          beforeAct("list", path);
          for (const _ of Deno.readDirSync(".")) return false;
          return true;
        })
      ),
    async syncDirectory(path) {
      using dir = cwd.within(path, path, () => {
        beforeAct("sync", path);
        return openDirectory(".", path, "is not a directory");
      });
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

/**
 * The process's working directory, as the one directory the host holds at a time
 * (Deno offers no other: no openat, no fchdir, and /proc/self/fd only to
 * --allow-all). {@link within} goes into a directory, proves it is the one at
 * exactly that path, runs a synchronous act there and comes back: to the
 * directory the process started in when the permission set lets it go there
 * again, else to `home` (the state directory), so nothing else in the process,
 * nor a program it starts, ever runs in a directory a user may own.
 */
class WorkingDirectory {
  readonly #back: string[];
  #inside = false;

  constructor(home?: string) {
    let origin: string | undefined;
    try {
      origin = Deno.cwd();
    } catch { /* removed meanwhile: nowhere to go back to */ }
    this.#back = [origin, home].filter((d): d is string => d !== undefined);
  }

  /**
   * Run `act` (synchronous: nothing may wait while the process stands in `dir`)
   * inside `dir`, which must be, right after the process went in, the directory at
   * exactly that path: a symlink or a non-directory anywhere from / down refuses it
   * (an {@link UnsafePathError} naming the component), a missing one is NotFound.
   * `target` is the path the verb is about, for messages.
   */
  within<T>(dir: string, target: string, act: () => T): T {
    if (this.#inside) throw new Error("posix-fs: a verb started inside another one");
    this.#inside = true;
    try {
      this.#enter(dir, target);
      try {
        return act();
      } finally {
        this.#leave();
      }
    } finally {
      this.#inside = false;
    }
  }

  #enter(dir: string, target: string): void {
    try {
      Deno.chdir(dir);
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) throw error;
      // Missing, not a directory, a symlink loop: say which component, and how.
      throw unsafeComponent(dir, target) ?? error;
    }
    let here: string | undefined;
    try {
      here = Deno.cwd();
    } catch { /* removed since: not the directory the path names */ }
    if (here === dir) return;
    this.#leave();
    throw unsafeComponent(dir, target) ?? new UnsafePathError(
      dir,
      `was swapped while the host worked${here === undefined ? "" : ` (it led to ${here})`}; ` +
        `nothing was done for ${target}`,
      SWAP_HINT,
    );
  }

  #leave(): void {
    for (let i = 0; i < this.#back.length; i++) {
      try {
        Deno.chdir(this.#back[i]);
        return;
      } catch (error) {
        // Not allowed (a service started in /): never again. Missing: the next one, this time.
        if (error instanceof Deno.errors.NotCapable) this.#back.splice(i--, 1);
      }
    }
  }
}

/**
 * Why `dir` cannot be entered as the directory at that path: its first component
 * (from / down) that is a symlink or not a directory, as an error naming it, or
 * NotFound for the first that is missing; `undefined` when every component looks
 * right now (it was swapped back meanwhile). For messages only: the refusal is
 * already decided.
 */
function unsafeComponent(dir: string, target: string): Error | undefined {
  const parts = dir.split("/").filter(Boolean);
  for (let i = 1; i <= parts.length; i++) {
    const at = `/${parts.slice(0, i).join("/")}`;
    let info: Deno.FileInfo;
    try {
      info = Deno.lstatSync(at);
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) continue; // above the managed roots
      if (error instanceof Deno.errors.NotFound) {
        return new Deno.errors.NotFound(`${at} does not exist (on the way to ${target})`);
      }
      return error as Error;
    }
    if (info.isDirectory) continue;
    const what = info.isSymlink ? "a symlink" : info.isFile ? "a file" : "a special file";
    if (at === target) {
      return new UnsafePathError(at, `is not a directory: it is ${what}`, SYMLINK_HINT);
    }
    return new UnsafePathError(
      at,
      `(above ${target}) is ${info.isSymlink ? "a symlink" : `not a directory but ${what}`}`,
      SYMLINK_HINT,
    );
  }
  return undefined;
}

const SYMLINK_HINT = "the host acts only through real directories, from / down, never through a " +
  "symlink; declare the real path, or see who can write the directory above it";

/** An open descriptor, closed when it goes out of scope (`using`). */
class Descriptor implements Disposable {
  constructor(readonly fd: number, readonly path: string) {}
  stat(): NodeFs.Stats {
    return sys(() => nodeFs().fstatSync(this.fd));
  }
  [Symbol.dispose](): void {
    nodeFs().closeSync(this.fd);
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
    nodeFs().fsync(fd, (error) => error ? reject(translated(error)) : resolve())
  );
}

/** What is at `name` (in the directory the process stands in), for an error message. */
function describeHere(name: string): string {
  let info: Deno.FileInfo | null;
  try {
    info = lstatOrNull(name);
  } catch {
    return "something the host cannot look at";
  }
  if (info === null) return "nothing";
  return `a ${kindOf(info) === "other" ? "special file" : kindOf(info)}`;
}

/**
 * Open the directory `name` (in the directory the process stands in) without
 * following a symlink; anything but a directory is refused with an error naming
 * `path` ("PATH WHY: it is a symlink").
 */
function openDirectory(name: string, path: string, why: string): Descriptor {
  let fd: number;
  try {
    fd = sys(() => nodeFs().openSync(name, node().flags.DIRECTORY));
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== "ELOOP" && code !== "ENOTDIR") throw error;
    throw new UnsafePathError(
      path,
      `${why}: it is ${describeHere(name)}`,
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
 * Refuse, as Deno's runtime would, a change the permission set does not allow:
 * `name` is asked about where the process stands (the real place), `path` named.
 */
function requireWrite(name: string, path: string): void {
  if (Deno.permissions.querySync({ name: "write", path: name }).state !== "granted") {
    throw new Deno.errors.NotCapable(
      `Requires write access to "${path}", run again with the --allow-write flag`,
    );
  }
}

function kindOf(info: Deno.FileInfo): PathInfo["kind"] {
  return info.isSymlink
    ? "symlink"
    : info.isFile
    ? "file"
    : info.isDirectory
    ? "directory"
    : "other";
}

function pathInfoOf(info: Deno.FileInfo): PathInfo {
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

/** A regular file's identity from its lstat (Deno's precision: see CTIME_STEP_NS). */
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

/**
 * Whether only root can add, remove or rename entries in the directory the process stands
 * in: root's, and writable by no group or other (a POSIX ACL's mask shows in the group
 * bits). Then a regular file seen there by lstat stays that file until it is opened:
 * nobody else can put a symlink or a FIFO at its name.
 */
function onlyRootRenamesHere(): boolean {
  const here = Deno.statSync(".");
  return here.uid === 0 && ((here.mode ?? 0) & 0o022) === 0;
}

/**
 * Read the regular file `name` in the directory the process stands in (`path`, for
 * messages). Its identity is taken first, by lstat (never following a link), and the bytes
 * read are those of that inode, so a change after the look shows next time as another
 * identity. Where only root can rename entries in the directory, the file is opened with
 * Deno's own open (the lstat has shown a regular file, which nobody else can swap for a
 * link or a FIFO); anywhere else with node's, O_NOFOLLOW|O_NONBLOCK, and its identity is
 * kept only if the descriptor is the inode the lstat saw.
 */
function readHere(name: string, path: string, size?: number): FileRead {
  const seen = lstatOrNull(name);
  if (seen === null) throw new Deno.errors.NotFound(`${path} does not exist`);
  if (seen.isSymlink) {
    throw new UnsafePathError(path, "is a symlink, not a regular file", READ_HINT);
  }
  if (!seen.isFile) {
    throw new UnsafePathError(path, `is ${specialKindOf(seen)}, not a regular file`, READ_HINT);
  }
  const identity = identityOf(seen);
  if (!onlyRootRenamesHere()) {
    const read = readRegularFile(name, path, size);
    const same = read.dev === seen.dev && read.ino === seen.ino;
    return { info: { ...read.info, ...(same && identity ? { identity } : {}) }, data: read.data };
  }
  if (size !== undefined && size !== seen.size) return { info: pathInfoOf(seen), data: null };
  using file = Deno.openSync(name, { read: true });
  const stat = file.statSync();
  if (stat.dev !== seen.dev || stat.ino !== seen.ino || !stat.isFile) {
    throw new UnsafePathError(path, "was replaced while the host read it", SWAP_HINT);
  }
  const data = new Uint8Array(stat.size);
  let read = 0;
  while (read < data.length) {
    const n = file.readSync(data.subarray(read));
    if (n === null || n === 0) break; // shrank meanwhile
    read += n;
  }
  // The identity is the one taken before the read (the descriptor's may be later).
  const { identity: _after, ...info } = pathInfoOf(stat);
  return { info: { ...info, ...(identity ? { identity } : {}) }, data: data.subarray(0, read) };
}

function specialKindOf(info: Deno.FileInfo): string {
  if (info.isFifo) return "a FIFO";
  if (info.isSocket) return "a socket";
  if (info.isCharDevice || info.isBlockDevice) return "a device";
  if (info.isDirectory) return "a directory";
  return "a special file";
}

/**
 * lstat `path` in its directory, held. A managed root's own directory (`/`,
 * `/var`, `/usr`) is outside the permission set and cannot be entered: a managed
 * root itself is looked at by name, as the trusted start of every path.
 */
function lstat(cwd: WorkingDirectory, path: string, beforeAct: PosixHook): PathInfo | null {
  const dir = posix.dirname(path);
  let info: Deno.FileInfo | null;
  try {
    info = cwd.within(dir, path, () => {
      beforeAct("lstat", path);
      return lstatOrNull(posix.basename(path));
    });
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    if (
      !(error instanceof Deno.errors.NotCapable) ||
      Deno.permissions.querySync({ name: "read", path: dir }).state === "granted"
    ) {
      throw error;
    }
    info = lstatOrNull(path);
  }
  return info === null ? null : pathInfoOf(info);
}

type PosixHook = (act: FsAct, path: string) => void;

/** A descriptor's fstat as a PathInfo (a symlink never, O_NOFOLLOW refused it). */
function pathInfo(stat: NodeFs.Stats): PathInfo {
  return {
    kind: stat.isFile() ? "file" : stat.isDirectory() ? "directory" : "other",
    mode: stat.mode & 0o7777,
    uid: stat.uid,
    gid: stat.gid,
    size: stat.size,
  };
}

function specialKind(stat: NodeFs.Stats): string {
  if (stat.isFIFO()) return "a FIFO";
  if (stat.isSocket()) return "a socket";
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return "a device";
  if (stat.isDirectory()) return "a directory";
  return "a special file";
}

/**
 * Read the regular file `name` in the directory the process stands in (`path`, for
 * messages) through node's descriptor calls; with the descriptor's device and inode.
 */
function readRegularFile(
  name: string,
  path: string,
  size?: number,
): { info: PathInfo; dev: number; ino: number; data: Uint8Array | null } {
  let fd: number;
  try {
    fd = sys(() => nodeFs().openSync(name, node().flags.READ));
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
  const { dev, ino } = stat;
  if (size !== undefined && size !== info.size) return { info, dev, ino, data: null };
  const data = new Uint8Array(info.size);
  let read = 0;
  while (read < data.length) {
    const n = sys(() => nodeFs().readSync(fd, data, read, data.length - read, read));
    if (n === 0) return { info, dev, ino, data: data.subarray(0, read) }; // shrank meanwhile
    read += n;
  }
  return { info, dev, ino, data };
}

const READ_HINT = "the host reads only regular files; remove it, or change the declaration";

/** The same file: dev and ino agree (one look by name against the descriptor's). */
function sameFile(byName: Deno.FileInfo | null, held: NodeFs.Stats): boolean {
  return byName !== null && byName.dev === held.dev && byName.ino === held.ino;
}

function lstatOrNull(name: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(name);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/**
 * The temporary name a write of `name` uses, beside it. One name per path is
 * enough: the apply lock allows one writer, and a name that is known can be
 * cleaned up after a crash (see discardPartialWrite).
 */
function tempNameFor(name: string): string {
  return `.${name.slice(0, 200)}.nox-new`;
}

function discardPartialWrite(cwd: WorkingDirectory, path: string): void {
  try {
    cwd.within(posix.dirname(path), path, () => {
      const temp = tempNameFor(posix.basename(path));
      // unlink, in the directory held: a planted link is removed, not its target.
      if (lstatOrNull(temp)?.isDirectory === false) Deno.removeSync(temp);
    });
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

/**
 * Remove the file or the empty directory `path`, in its directory, held: unlink
 * for a file (never a directory), rmdir for a directory (never one with entries;
 * the kernel checks, at the instant it removes).
 */
function remove(
  cwd: WorkingDirectory,
  path: string,
  kind: "file" | "directory",
  beforeAct: PosixHook,
): Removal {
  try {
    return cwd.within(posix.dirname(path), path, (): Removal => {
      const name = posix.basename(path);
      beforeAct("remove", path);
      if (kind === "directory") {
        try {
          nodeFs().rmdirSync(name);
        } catch (error) {
          const code = (error as { code?: unknown }).code;
          if (code === "ENOTEMPTY" || code === "EEXIST") return "not-empty";
          if (code === "ENOENT") return "gone";
          if (code === "ENOTDIR") {
            throw new UnsafePathError(
              path,
              `is no longer a directory: it is ${describeHere(name)}`,
            );
          }
          throw translated(error);
        }
        return "removed";
      }
      const info = lstatOrNull(name);
      if (info === null) return "gone";
      if (info.isDirectory) {
        throw new UnsafePathError(path, "is no longer a file: it is a directory");
      }
      Deno.removeSync(name);
      return "removed";
    });
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "gone";
    throw error;
  }
}

async function writeFileAtomic(
  cwd: WorkingDirectory,
  path: string,
  data: Uint8Array,
  attributes: Attributes,
  hooks: { afterCreate: (path: string) => void; beforeAct: PosixHook },
  beforeRename?: () => Promise<void>,
): Promise<void> {
  // Synchronous calls, but for the fsync: a thread pool round trip per call costs
  // more than the call (creates in one directory serialize on it anyway), while
  // the fsyncs of concurrent writes overlap and the journal merges them.
  const dir = posix.dirname(path);
  const name = posix.basename(path);
  const temp = tempNameFor(name);
  let file: Descriptor | undefined;
  let written: NodeFs.Stats | undefined;
  let renamed = false;
  try {
    // In the directory, held: a new temporary file, its data, owner and mode.
    cwd.within(dir, path, () => {
      hooks.beforeAct("create", path);
      file = createTemp(temp, `${dir}/${temp}`);
      written = file.stat();
      hooks.afterCreate(`${dir}/${temp}`);
      let done = 0;
      while (done < data.length) {
        done += sys(() => nodeFs().writeSync(file!.fd, data, done, data.length - done));
      }
      setOn(file, attributes);
    });
    await fsync(file!.fd);
    await beforeRename?.();
    // Back in the directory at that path (proven again), the temporary name must
    // still be the file written (held open meanwhile, so its inode is not reused):
    // then it is renamed over the last name, in that directory.
    cwd.within(dir, path, () => {
      hooks.beforeAct("rename", path);
      if (!sameFile(lstatOrNull(temp), written!)) {
        throw new UnsafePathError(
          `${dir}/${temp}`,
          `(the temporary file of ${path}) was replaced while it was being written; ` +
            "nothing was renamed",
          SWAP_HINT,
        );
      }
      Deno.renameSync(temp, name);
      renamed = true;
    });
  } finally {
    // Only the file this write made is removed, and only where it was made: a name
    // someone else put there, or a directory no longer at that path, is left.
    if (!renamed && written !== undefined) {
      try {
        cwd.within(dir, path, () => {
          if (sameFile(lstatOrNull(temp), written!)) Deno.removeSync(temp);
        });
      } catch { /* gone meanwhile, or the directory was swapped: left in place */ }
    }
    file?.[Symbol.dispose]();
  }
}

const SWAP_HINT = "someone who can write that directory swapped names while the host worked; " +
  "the host never acts through what is put there";

/**
 * Create the temporary file `temp` in the directory the process stands in:
 * O_CREAT|O_EXCL|O_NOFOLLOW, so it is always a new file, never opened through a
 * symlink someone planted; one left by a crashed write is removed first (unlink:
 * a planted link is removed, not its target).
 */
function createTemp(temp: string, path: string): Descriptor {
  const open = () =>
    new Descriptor(sys(() => nodeFs().openSync(temp, node().flags.NEW_FILE, 0o600)), path);
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
