/**
 * The file system adapter for Linux (any distribution): Deno's file APIs plus
 * /etc/passwd and /etc/group for names. Verbs only; the file and directory
 * resources decide what to do with them.
 */
import { posix } from "node:path";
import type { Attributes, FileSystem, PathInfo } from "../src/ports.ts";

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
    lstat,
    readFile: (path) => Deno.readFile(path),
    writeFileAtomic,
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

async function lstat(path: string): Promise<PathInfo | null> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
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

async function setAttributes(path: string, { mode, uid, gid }: Attributes): Promise<void> {
  // chown first: it clears setuid/setgid bits, which chmod then sets as declared.
  await Deno.chown(path, uid, gid);
  await Deno.chmod(path, mode);
}

async function writeFileAtomic(
  path: string,
  data: Uint8Array,
  attributes: Attributes,
  beforeRename?: () => Promise<void>,
): Promise<void> {
  const dir = posix.dirname(path);
  const random = crypto.getRandomValues(new Uint32Array(2)).join("");
  const temp = posix.join(dir, `.${posix.basename(path).slice(0, 200)}.nox-${random}`);
  let renamed = false;
  try {
    {
      using file = await Deno.open(temp, { write: true, createNew: true, mode: 0o600 });
      let written = 0;
      while (written < data.length) written += await file.write(data.subarray(written));
      await setAttributes(temp, attributes);
      await file.sync();
    }
    await beforeRename?.();
    await Deno.rename(temp, path);
    renamed = true;
  } finally {
    if (!renamed) await Deno.remove(temp).catch(() => {});
  }
}

/** A name → id table read from a passwd/group style file, re-read when it changes. */
class AccountDatabase {
  #path: string;
  #stamp = "";
  #ids = new Map<string, number>();

  constructor(path: string) {
    this.#path = path;
  }

  async idOf(name: string): Promise<number | undefined> {
    if (/^[0-9]+$/.test(name)) return Number(name);
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(this.#path);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return undefined;
      throw error;
    }
    const stamp = `${info.mtime?.getTime()}:${info.size}:${info.ino}`;
    if (stamp !== this.#stamp) {
      this.#ids = new Map();
      for (const line of (await Deno.readTextFile(this.#path)).split("\n")) {
        const [entry, , id] = line.split(":");
        if (entry && id !== undefined && /^[0-9]+$/.test(id) && !this.#ids.has(entry)) {
          this.#ids.set(entry, Number(id));
        }
      }
      this.#stamp = stamp;
    }
    return this.#ids.get(name);
  }
}
