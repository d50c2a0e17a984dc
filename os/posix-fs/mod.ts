/**
 * The file system adapter for Linux (any distribution): Deno's file calls and node:fs
 * descriptor calls (open with O_NOFOLLOW, O_CREAT|O_EXCL and O_NONBLOCK, fstat, fchown,
 * fchmod, fsync) plus /etc/passwd and /etc/group for names. Verbs only; the file and
 * directory kinds decide what to do with them.
 *
 * Deno hands the kernel absolute paths only, walked again from / at every call (LAB-NOTES.md),
 * so before every verb the directories above the path are walked from / down (./_walk.ts):
 * where only root can change each of them, the host acts as root, by absolute path
 * (./_acts.ts); below the first one that one other user alone can change, its own program
 * acts as that user (./_owner.ts, ./serve.ts), after the host refused what that user
 * cannot do; anywhere else it refuses. What the walk learns is kept for the pass (the
 * engine's apply or plan), which `release` ends. The directories above the permission
 * set's reading roots (/, /var, /usr) are looked at with the `stat` program: Deno grants
 * reading a directory only with everything below it.
 */
import { FORM } from "../../src/version.ts";
import { posix } from "../../src/posix_path.ts";
import {
  AsOwnerError,
  type Attributes,
  type FileRead,
  type FileSystem,
  type PathInfo,
  type Removal,
} from "../../src/providers.ts";
import { lastLines, runProgram } from "../_run.ts";
import {
  abortAt,
  commitAt,
  discardAt,
  fsync,
  isEmptyAt,
  kindOf,
  lstatAt,
  lstatOrNull,
  makeDirectoryAt,
  openForSync,
  prepareAt,
  type Prepared,
  readAt,
  removeAt,
  setAttributesAt,
} from "./_acts.ts";
import { Accounts, type PasswdUser } from "./_passwd.ts";
import { type OwnerChild, OwnerPool } from "./_owner.ts";
import { decodeInfo, PART } from "./_protocol.ts";
import { above, type Looked, walk } from "./_walk.ts";

/**
 * How coarse the change times of Deno's lstat are: Deno 2.9.6 gives a file's change time to
 * the second (its modification time to the millisecond; tests/readback_identity_test.ts
 * keeps the claim honest).
 */
const CTIME_STEP_NS = 1_000_000_000n;

/** The most bytes an owner's file of unknown size is read (the kinds always give a size). */
const MAX_UNSIZED_READ = 16 * 1024 * 1024;

/** Root alone: the host's own walk trusts nobody else. */
const ROOT: ReadonlySet<number> = new Set([0]);

/** What walked verdicts are kept for at most, whatever the pass (milliseconds). */
const FRESH_MS = 2000;

/** The acts a verb makes (for the tests' hook). */
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
   * The host's own program, run as a directory's owner (`SELF __as-owner UID GID`): the
   * permission set's `binary` in a build (the build bakes it in); from a checkout, its
   * development shim packaging/dev/nox-mesh-host.
   */
  self?: string;
  /** Extra environment for the programs it runs (`stat`). */
  env?: Record<string, string>;
  /**
   * TESTS ONLY (never set by the host): called right before each act, root's or an
   * owner's, e.g. to count the reads of a pass (tests/readback_identity_test.ts).
   */
  beforeAct?: (act: FsAct, path: string) => void;
}

/** Who acts on a path, as the walk decided. */
type Actor =
  | { as: "root" }
  | { as: "missing" }
  | { as: "owner"; uid: number; at: string; user: PasswdUser | undefined };

/** The checkout's development shim: what runs the host from this checkout as another user. */
function devShim(): string | undefined {
  if (FORM !== "source") return undefined;
  return new URL("../../packaging/dev/nox-mesh-host", import.meta.url).pathname;
}

/** Create the POSIX file system adapter. */
// Long because: the POSIX file system provider is one object of descriptor-based verbs (STYLE.md);
// each verb is short and shares the provider's open root.
export function posixFileSystem(options: PosixFileSystemOptions = {}): FileSystem {
  const accounts = new Accounts(
    options.passwdPath ?? "/etc/passwd",
    options.groupPath ?? "/etc/group",
  );
  const beforeAct = options.beforeAct ?? (() => {});
  const self = options.self ?? devShim();
  const pool = new OwnerPool();
  const walks = new Walks(options.env);
  /** Root's writes made with `deferSync`, written and not yet synced (see syncWrites). */
  const unsynced = new Set<Prepared>();

  async function actor(path: string): Promise<Actor> {
    // What stat(1) said of this path's unreadable directories is the walk's own copy:
    // another pass's release() (the metrics file's, say), or another walk's reset after
    // FRESH_MS, may empty the shared one while this walk waits, and Deno may not look at
    // those directories itself.
    const seen = await walks.prepare(path);
    const verdict = walk(path, {
      trusted: ROOT,
      look: (dir) => seen.has(dir) ? seen.get(dir) ?? null : walks.look(dir),
      nameOf: (uid) => accounts.nameOf(uid),
    });
    if (verdict.as === "trusted") return { as: "root" };
    if (verdict.as === "missing") return { as: "missing" };
    return { as: "owner", uid: verdict.uid, at: verdict.at, user: accounts.user(verdict.uid) };
  }

  /** The child acting as the owner, with `gid` (its primary group by default). */
  async function childOf(
    path: string,
    a: Extract<Actor, { as: "owner" }>,
    gid?: number,
  ): Promise<OwnerChild> {
    const user = a.user;
    if (user === undefined) {
      throw new AsOwnerError(
        path,
        `${a.at} belongs to uid ${a.uid}, who alone can swap names in it, so the host acts ` +
          `below it only as that user, and uid ${a.uid} has no account here (/etc/passwd)`,
        `give ${a.at} to an account, or declare a path below directories only root can change`,
      );
    }
    if (self === undefined) {
      throw new AsOwnerError(
        path,
        `${a.at} belongs to ${accounts.nameOf(a.uid)}, so the host acts below it as that user, ` +
          "through its own program, which this build does not name",
        "use a packaged build of the host (its permission file's binary), or run it from a checkout",
      );
    }
    return await pool.child(a.uid, gid ?? user.gid, () => ({
      self,
      who: accounts.nameOf(a.uid),
      env: {
        PATH: "/usr/bin:/usr/sbin:/bin:/sbin",
        NO_COLOR: "1",
        ...(FORM === "source" ? { NOX_MESH_HOST_DENO: Deno.execPath() } : {}),
      },
    }));
  }

  /**
   * Ask the child acting as the owner, then let it go (childOf gave it held); a refusal of
   * the kernel's is said with who acted.
   */
  async function ask(
    child: OwnerChild,
    a: Extract<Actor, { as: "owner" }>,
    path: string,
    request: Parameters<OwnerChild["ask"]>[0],
    max?: number,
  ): ReturnType<OwnerChild["ask"]> {
    try {
      return await child.ask(request, max);
    } catch (error) {
      throw said(a, path, error);
    } finally {
      child.unhold(); // held since childOf() gave it
    }
  }

  /** A refusal of the kernel's to the child, said with who acted and why. */
  function said(a: Extract<Actor, { as: "owner" }>, path: string, error: unknown): unknown {
    if (!(error instanceof Deno.errors.PermissionDenied)) return error;
    return new Deno.errors.PermissionDenied(
      `${path}: the host acts there as ${accounts.nameOf(a.uid)}, who alone can change ` +
        `${a.at}, and the kernel refused that user: ${error.message}`,
    );
  }

  /** Refuse, before anything is done, what the owner cannot make (another owner, a group). */
  function refuseForOwner(
    path: string,
    a: Extract<Actor, { as: "owner" }>,
    { uid, gid }: Attributes,
    what: string,
  ): void {
    const user = a.user;
    const name = accounts.nameOf(a.uid);
    const why = `${a.at} belongs to ${name}, who alone can swap names in it, so the host acts ` +
      `below it as ${name}`;
    const hint = user === undefined ? "" : `declare owner "${user.name}" and a group that ` +
      `user is in (such as "${accounts.groupName(user.gid)}"), or a path below directories ` +
      "only root can change";
    if (user !== undefined && uid !== user.uid) {
      throw new AsOwnerError(
        path,
        `${why}, who cannot make ${what} owned by ${accounts.nameOf(uid)}; nothing was done`,
        hint,
      );
    }
    if (user !== undefined && !accounts.isMember(user, gid)) {
      throw new AsOwnerError(
        path,
        `${why}, who is not in the group ${accounts.groupName(gid)} (gid ${gid}) and cannot ` +
          `give it to ${what}; nothing was done`,
        hint,
      );
    }
  }

  async function writeAsRoot(
    path: string,
    data: Uint8Array,
    attributes: Attributes,
    beforeRename: (() => Promise<void>) | undefined,
    deferSync: boolean,
  ): Promise<void> {
    beforeAct("create", path);
    const prepared = prepareAt(path, data, attributes);
    let done = false;
    try {
      if (deferSync) unsynced.add(prepared);
      else await fsync(prepared.file.fd);
      await beforeRename?.();
      // Never renamed before its data is on disk: synced here when no pass covered it.
      if (unsynced.delete(prepared)) await fsync(prepared.file.fd);
      beforeAct("rename", path);
      commitAt(prepared);
      done = true;
    } finally {
      unsynced.delete(prepared);
      if (!done) abortAt(prepared);
    }
  }

  /**
   * The data of root's deferred writes, on disk at once: `sync -f` with one directory of
   * each file system they are on (syncfs: everything written there, ours among it, is
   * written out and the journal committed once), where that program runs; else each file's
   * fsync, together. Their directories are ones only root can change (the walk said so),
   * so the names `sync` opens are the ones the host wrote in.
   */
  async function syncWrites(): Promise<void> {
    const writes = [...unsynced];
    if (writes.length === 0) return;
    const byDevice = new Map<number, string>();
    for (const w of writes) byDevice.set(w.dev, posix.dirname(w.temp));
    beforeAct("sync", [...byDevice.values()].join(" "));
    let synced = false;
    try {
      const result = await runProgram(["sync", "-f", "--", ...byDevice.values()], {
        env: options.env,
      });
      synced = result.code === 0;
    } catch {
      // Missing or not permitted: each file's own fsync below.
    }
    if (!synced) await Promise.all(writes.map((w) => fsync(w.file.fd)));
    for (const w of writes) unsynced.delete(w);
  }

  async function writeAsOwner(
    child: OwnerChild,
    path: string,
    from: string,
    data: Uint8Array,
    attributes: Attributes,
  ): Promise<void> {
    beforeAct("create", path);
    // Held since childOf() gave it; unheld at the end.
    let token: number | undefined;
    let done = false;
    try {
      const { ok } = await child.ask({ verb: "create", path, from, ...attributes });
      if (typeof ok !== "number") throw new Error("the helper's create did not answer a write");
      token = ok;
      for (let at = 0; at < data.length; at += PART) {
        await child.ask({ verb: "write", token, data: data.subarray(at, at + PART).toBase64() });
      }
      await child.ask({ verb: "seal", token });
      beforeAct("rename", path);
      await child.ask({ verb: "commit", token });
      done = true;
    } finally {
      if (!done && token !== undefined) {
        await child.ask({ verb: "abort", token }).catch(() => {});
      }
      child.unhold();
    }
  }

  return {
    ctimeStepNs: CTIME_STEP_NS,

    async lstat(path): Promise<PathInfo | null> {
      const a = await actor(path);
      beforeAct("lstat", path);
      if (a.as === "missing") return null;
      if (a.as === "root") return lstatAt(path);
      const { ok } = await ask(await childOf(path, a), a, path, {
        verb: "lstat",
        path,
        from: a.at,
      });
      return decodeInfo(ok);
    },

    async readFile(path, size): Promise<FileRead> {
      const a = await actor(path);
      beforeAct("read", path);
      if (a.as === "missing") throw new Deno.errors.NotFound(`${path} does not exist`);
      if (a.as === "root") return readAt(path, size);
      const max = size ?? MAX_UNSIZED_READ;
      const { ok, parts } = await ask(await childOf(path, a), a, path, {
        verb: "read",
        path,
        from: a.at,
        max,
        ...(size === undefined ? {} : { size }),
      }, max);
      return readAnswer(ok, parts);
    },

    async writeFileAtomic(path, data, attributes, beforeRename, options): Promise<void> {
      const a = await actor(path);
      if (a.as === "missing") {
        throw new Deno.errors.NotFound(`the directory above ${path} is missing`);
      }
      if (a.as === "root") {
        const defer = options?.deferSync === true;
        return await writeAsRoot(path, data, attributes, beforeRename, defer);
      }
      // As the owner the write waits for its turn first, then seals (fsyncs) by itself.
      refuseForOwner(path, a, attributes, "a file");
      // Its turn to commit first (the engine's, in declared order), then the whole write:
      // a write never holds a child while it waits for another one's turn, so a bounded
      // pool of children never waits for itself.
      await beforeRename?.();
      try {
        await writeAsOwner(await childOf(path, a, attributes.gid), path, a.at, data, attributes);
      } catch (error) {
        throw said(a, path, error);
      }
    },

    syncWrites,

    async discardPartialWrite(path): Promise<void> {
      const a = await actor(path);
      if (a.as === "missing") return;
      if (a.as === "root") return discardAt(path);
      await ask(await childOf(path, a), a, path, { verb: "discard", path, from: a.at });
    },

    async makeDirectory(path, attributes): Promise<void> {
      const a = await actor(path);
      beforeAct("mkdir", path);
      walks.forget(path);
      if (a.as === "missing") {
        throw new Deno.errors.NotFound(`the directory above ${path} is missing`);
      }
      if (a.as === "root") return makeDirectoryAt(path, attributes);
      refuseForOwner(path, a, attributes, "a directory");
      const child = await childOf(path, a, attributes.gid);
      await ask(child, a, path, { verb: "mkdir", path, from: a.at, ...attributes });
    },

    async setAttributes(path, attributes): Promise<void> {
      const a = await actor(path);
      beforeAct("chown", path);
      walks.forget(path);
      if (a.as === "missing") {
        throw new Deno.errors.NotFound(`the directory above ${path} is missing`);
      }
      if (a.as === "root") return setAttributesAt(path, attributes);
      refuseForOwner(path, a, attributes, "a directory");
      const child = await childOf(path, a, attributes.gid);
      await ask(child, a, path, { verb: "attrs", path, from: a.at, ...attributes });
    },

    async remove(path, kind): Promise<Removal> {
      const a = await actor(path);
      beforeAct("remove", path);
      walks.forget(path);
      if (a.as === "missing") return "gone";
      if (a.as === "root") return removeAt(path, kind);
      const { ok } = await ask(await childOf(path, a), a, path, {
        verb: "remove",
        path,
        from: a.at,
        kind,
      });
      if (ok !== "removed" && ok !== "not-empty" && ok !== "gone") {
        throw new Error("the helper's removal answered nothing it may");
      }
      return ok;
    },

    async isEmptyDirectory(path): Promise<boolean> {
      const a = await actor(path);
      beforeAct("list", path);
      if (a.as === "missing") throw new Deno.errors.NotFound(`${path} does not exist`);
      if (a.as === "root") return isEmptyAt(path);
      const { ok } = await ask(await childOf(path, a), a, path, {
        verb: "empty",
        path,
        from: a.at,
      });
      if (typeof ok !== "boolean") throw new Error("the helper's listing answered no yes or no");
      return ok;
    },

    async syncDirectory(path): Promise<void> {
      const a = await actor(path);
      beforeAct("sync", path);
      if (a.as === "missing") throw new Deno.errors.NotFound(`${path} does not exist`);
      if (a.as === "owner") {
        await ask(await childOf(path, a), a, path, { verb: "sync", path, from: a.at });
        return;
      }
      using dir = openForSync(path);
      await fsync(dir.fd);
    },

    userId: (name) => Promise.resolve(accounts.userId(name)),
    groupId: (name) => Promise.resolve(accounts.groupId(name)),

    async actsAs(path): Promise<{ uid: number; gid: number }> {
      const a = await actor(path);
      if (a.as !== "owner") return { uid: 0, gid: 0 };
      const user = a.user;
      if (user === undefined) await childOf(path, a); // throws: no account
      return { uid: a.uid, gid: user!.gid };
    },

    async release(): Promise<void> {
      walks.reset();
      await pool.release();
    },
  };
}

/** A read's answer from the child, checked against what was asked. */
function readAnswer(ok: unknown, parts: Uint8Array[]): FileRead {
  if (ok === null || typeof ok !== "object" || !("info" in ok) || !("length" in ok)) {
    throw new Error("the helper's read answered no file");
  }
  const info = decodeInfo((ok as { info: unknown }).info);
  const length = (ok as { length: unknown }).length;
  if (info === null || info.kind !== "file") throw new Error("the helper read no regular file");
  if (length === null) {
    if (parts.length > 0) throw new Error("the helper sent bytes it said it did not read");
    return { info, data: null };
  }
  const total = parts.reduce((n, p) => n + p.length, 0);
  if (length !== total) throw new Error("the helper's read sent other bytes than it said");
  const data = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    data.set(p, at);
    at += p.length;
  }
  return { info, data };
}

/**
 * What the walks of a pass looked at: each directory on the way, once per pass (a directory
 * only root can change stays so until root changes it; the host forgets what its own acts
 * change), and never longer than {@link FRESH_MS}. Directories the permission set does not
 * let the host read (those above its reading roots: /, /var, /usr) are looked at with the
 * `stat` program, all of a path's at once.
 */
class Walks {
  readonly #env: Record<string, string> | undefined;
  #looked = new Map<string, Looked | null>();
  /** The `stat` runs under way, by directory: concurrent walks wait for the same one. */
  #asking = new Map<string, Promise<ReadonlyMap<string, Looked | null>>>();
  #since = performance.now();
  readonly #readable = new Map<string, boolean>();

  constructor(env?: Record<string, string>) {
    this.#env = env;
  }

  reset(): void {
    this.#looked = new Map();
    this.#since = performance.now();
  }

  forget(path: string): void {
    this.#looked.delete(path);
  }

  /**
   * Look at what the walk of `path` cannot look at itself, with `stat`: one run for the
   * directories nobody is asking about yet (the concurrent walks of a window share it).
   */
  async prepare(path: string): Promise<ReadonlyMap<string, Looked | null>> {
    if (performance.now() - this.#since > FRESH_MS) this.reset();
    const seen = new Map<string, Looked | null>();
    const unreadable = above(path).filter((dir) => !this.#canRead(dir));
    for (const dir of unreadable) {
      const known = this.#looked.get(dir);
      if (known !== undefined) seen.set(dir, known);
    }
    const unknown = unreadable.filter((dir) => !seen.has(dir));
    if (unknown.length === 0) return seen;
    const unasked = unknown.filter((dir) => !this.#asking.has(dir));
    if (unasked.length > 0) {
      const asked = this.#stat(unasked);
      const done = () => {
        for (const dir of unasked) if (this.#asking.get(dir) === asked) this.#asking.delete(dir);
      };
      asked.then(done, done);
      for (const dir of unasked) this.#asking.set(dir, asked);
    }
    // Taken now: a run that ends meanwhile leaves #asking.
    const answers = unknown.map((dir) => [dir, this.#asking.get(dir)!] as const);
    for (const [dir, answer] of answers) seen.set(dir, (await answer).get(dir) ?? null);
    return seen;
  }

  /** `stat` the directories `unreadable` (one path's, from / down): what it said of each. */
  async #stat(unreadable: string[]): Promise<ReadonlyMap<string, Looked | null>> {
    const said = new Map<string, Looked | null>();
    // They are ancestors of one path, from / down: once one is missing (or not a
    // directory), so is every one after it, and stat says nothing of those on stdout.
    const { stdout, stderr, code } = await runProgram(
      ["stat", "-c", "%f %u %g", "--", ...unreadable],
      { env: this.#env, timeoutMs: 60_000 },
    );
    const rows = stdout === "" ? [] : stdout.replace(/\n$/, "").split("\n");
    if (rows.length > unreadable.length || (code !== 0) !== (rows.length < unreadable.length)) {
      throw new Error(
        `stat(1) answered ${rows.length} lines for ${unreadable.length} paths (exit ${code}): ` +
          `${lastLines(stderr) || "nothing on stderr"}; the host looks at the directories ` +
          "above its managed roots with it",
      );
    }
    // Missing, and not the host's to make (it may not write where it may not read).
    for (const dir of unreadable.slice(rows.length)) said.set(dir, null);
    rows.forEach((row, i) => {
      const dir = unreadable[i];
      const m = /^([0-9a-f]{1,8}) ([0-9]{1,10}) ([0-9]{1,10})$/.exec(row);
      if (!m) throw new Error(`stat(1) answered "${row}" for ${dir}`);
      const raw = parseInt(m[1], 16);
      const type = raw & 0o170000;
      said.set(dir, {
        kind: type === 0o040000
          ? "directory"
          : type === 0o120000
          ? "symlink"
          : type === 0o100000
          ? "file"
          : "other",
        uid: Number(m[2]),
        gid: Number(m[3]),
        mode: raw & 0o7777,
      });
    });
    for (const [dir, looked] of said) this.#looked.set(dir, looked);
    return said;
  }

  #canRead(dir: string): boolean {
    let known = this.#readable.get(dir);
    if (known === undefined) {
      known = Deno.permissions.querySync({ name: "read", path: dir }).state === "granted";
      this.#readable.set(dir, known);
    }
    return known;
  }

  /** lstat a directory on the way (never following); `null` when missing. */
  look(dir: string): Looked | null {
    const known = this.#looked.get(dir);
    if (known !== undefined) return known;
    let info: Deno.FileInfo | null;
    try {
      info = lstatOrNull(dir);
    } catch (error) {
      if ((error as { code?: unknown }).code === "ENOTDIR") return null;
      throw error;
    }
    if (info === null) return null; // not kept: the host may make it in this pass
    const looked: Looked = {
      kind: kindOf(info),
      uid: info.uid ?? -1,
      gid: info.gid ?? -1,
      mode: (info.mode ?? 0) & 0o7777,
    };
    this.#looked.set(dir, looked);
    return looked;
  }
}
