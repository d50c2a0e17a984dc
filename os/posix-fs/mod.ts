/**
 * The file system adapter for Linux (any distribution): Deno's file APIs plus
 * /etc/passwd and /etc/group for names. Verbs only; the file and directory
 * resources decide what to do with them.
 */
import { posix } from "node:path";
import type { Attributes, FileSystem, PathInfo } from "../../src/ports.ts";

/** Options for the adapter; the account databases can be pointed elsewhere for tests. */
export interface PosixFileSystemOptions {
  passwdPath?: string;
  groupPath?: string;
}

/** Create the POSIX file system adapter. */
export function posixFileSystem(options: PosixFileSystemOptions = {}): FileSystem {
  const users = new AccountDatabase(options.passwdPath ?? "/etc/passwd");
  const groups = new AccountDatabase(options.groupPath ?? "/etc/group");
  return {
    lstat: (path) => Promise.resolve(lstat(path)),
    // Synchronous calls on purpose: a check pass makes thousands of these in a row,
    // and Deno's sync file ops cost a fraction of the async ones.
    readFile: (path) => Promise.resolve(Deno.readFileSync(path)),
    writeFileAtomic,
    discardPartialWrite,
    async makeDirectory(path, attributes) {
      // Created private first, so nobody sees it with the wrong owner or mode.
      await Deno.mkdir(path, { mode: 0o700 });
      await setAttributes(path, attributes);
    },
    setAttributes,
    remove: (path) => Deno.remove(path),
    async isEmptyDirectory(path) {
      for await (const _ of Deno.readDir(path)) return false;
      return true;
    },
    async syncDirectory(path) {
      using dir = await Deno.open(path, { read: true });
      await dir.sync();
    },
    userId: (name) => users.idOf(name),
    groupId: (name) => groups.idOf(name),
  };
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

function setAttributes(path: string, attributes: Attributes): Promise<void> {
  try {
    setAttributesSync(path, attributes);
    return Promise.resolve();
  } catch (error) {
    return Promise.reject(error);
  }
}

function setAttributesSync(path: string, { mode, uid, gid }: Attributes): void {
  // chown first: it clears setuid/setgid bits, which chmod then sets as declared.
  Deno.chownSync(path, uid, gid);
  Deno.chmodSync(path, mode);
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
  beforeRename?: () => Promise<void>,
): Promise<void> {
  // Synchronous calls: one resource is written at a time anyway, and a thread
  // pool round trip per call costs more than the call (the fsync dominates).
  const temp = tempPathFor(path);
  let renamed = false;
  try {
    {
      using file = createTemp(temp);
      let written = 0;
      while (written < data.length) written += file.writeSync(data.subarray(written));
      setAttributesSync(temp, attributes);
      file.syncSync();
    }
    await beforeRename?.();
    Deno.renameSync(temp, path);
    renamed = true;
  } finally {
    if (!renamed) {
      try {
        Deno.removeSync(temp);
      } catch { /* it was never created, or is gone */ }
    }
  }
}

/**
 * Create the temporary file: O_CREAT|O_EXCL, so it never opens through a
 * symlink someone planted; one left by a crashed write is removed first.
 */
function createTemp(temp: string): Deno.FsFile {
  const open = () => Deno.openSync(temp, { write: true, createNew: true, mode: 0o600 });
  try {
    return open();
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    Deno.removeSync(temp); // never follows a symlink: a planted link is removed, not its target
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
