/**
 * The host's own program acting as the owner of a directory (`nox-mesh-host __as-owner UID
 * GID`, started by the host with that uid and gid, supplementary groups cleared, no
 * capabilities, working directory /, a minimal environment): it reads the host's requests
 * on stdin, one JSON line each (./_protocol.ts), does each act with the same verbs the
 * host uses as root (./_acts.ts), and answers on stdout. It refuses to serve as root, or as
 * another uid or gid than it was told. Before each act it walks the directories from the
 * owner's (`from`, which the host reached through directories only root can change) down
 * to the path: each must be a real directory that only root or this user can change, so
 * another user cannot steer its acts either. Whatever it does, the kernel allows only what
 * this user may do.
 */
import { AsOwnerError, UnsafePathError } from "../../src/providers.ts";
import {
  abortAt,
  commitAt,
  createTempAt,
  discardAt,
  isEmptyAt,
  kindOf,
  lstatAt,
  lstatOrNull,
  makeDirectoryAt,
  openForSync,
  type Prepared,
  readAt,
  removeAt,
  sealAt,
  setAttributesAt,
  syncNow,
  writeTo,
} from "./_acts.ts";
import {
  type Answer,
  encodeInfo,
  type Failure,
  lines,
  parseRequest,
  PART,
  ProtocolError,
  type Request,
} from "./_protocol.ts";
import { type Looked, walk } from "./_walk.ts";

/** Exit codes of the child, for the host's messages. */
export const SERVE_EXIT = { ok: 0, usage: 64, protocol: 65, wrongUser: 77 } as const;

const encoder = new TextEncoder();

function send(answer: Answer): void {
  const bytes = encoder.encode(JSON.stringify(answer) + "\n");
  let written = 0;
  while (written < bytes.length) written += Deno.stdout.writeSync(bytes.subarray(written));
}

/** Serve the host's requests as uid/gid `args`; returns the exit code. */
export async function serveAsOwner(args: readonly string[]): Promise<number> {
  const decimal = (s: string | undefined) =>
    s !== undefined && /^[0-9]{1,10}$/.test(s) ? Number(s) : undefined;
  const uid = decimal(args[0]);
  const gid = decimal(args[1]);
  if (uid === undefined || gid === undefined || args.length !== 2) {
    console.error("usage: nox-mesh-host __as-owner UID GID (started by the host itself)");
    return SERVE_EXIT.usage;
  }
  let real: { uid: number; gid: number };
  try {
    real = { uid: Deno.uid() ?? -1, gid: Deno.gid() ?? -1 };
  } catch (error) {
    console.error(`cannot tell which user this process runs as: ${(error as Error).message}`);
    return SERVE_EXIT.wrongUser;
  }
  if (uid === 0 || real.uid !== uid || real.gid !== gid) {
    console.error(
      `refusing to act as an owner: this process runs as uid ${real.uid} gid ${real.gid}, ` +
        `and was told uid ${uid} gid ${gid}${uid === 0 ? " (root acts for itself)" : ""}`,
    );
    return SERVE_EXIT.wrongUser;
  }
  send({ id: 0, ok: { uid, gid } });
  const served = new Server(uid);
  try {
    for await (const line of lines(Deno.stdin.readable)) {
      let request: Request;
      try {
        request = parseRequest(line);
      } catch (error) {
        console.error(`the host sent what this helper does not take: ${(error as Error).message}`);
        return SERVE_EXIT.protocol;
      }
      try {
        send({ id: request.id, ok: served.handle(request) });
      } catch (error) {
        send({ id: request.id, error: failureOf(error) });
      }
    }
  } catch (error) {
    if (!(error instanceof ProtocolError)) throw error;
    console.error(`the host sent what this helper does not take: ${error.message}`);
    return SERVE_EXIT.protocol;
  } finally {
    served.close();
  }
  return SERVE_EXIT.ok;
}

/** What an error says, as the protocol carries it. */
function failureOf(error: unknown): Failure {
  const message = (error instanceof Error ? error.message : String(error)).slice(0, 4000);
  if (error instanceof UnsafePathError) {
    return {
      kind: "unsafe",
      message,
      path: error.path.slice(0, 4096),
      what: error.what.slice(0, 4000),
      ...(error.hint === undefined ? {} : { hint: error.hint.slice(0, 2000) }),
    };
  }
  for (const kind of ["NotFound", "AlreadyExists", "PermissionDenied", "NotCapable"] as const) {
    if (error instanceof Deno.errors[kind]) return { kind, message };
  }
  return { kind: "failed", message };
}

/** One request after the other, as one user. */
class Server {
  readonly #uid: number;
  readonly #trusted: ReadonlySet<number>;
  readonly #writes = new Map<number, Prepared>();
  /** Owner and mode asked at create, set once the data is written (seal). */
  readonly #attributes = new Map<number, { mode: number; uid: number; gid: number }>();
  #tokens = 0;

  constructor(uid: number) {
    this.#uid = uid;
    this.#trusted = new Set([0, uid]);
  }

  // Long because: the helper's dispatch: one case per verb of the protocol, each a line or two.
  handle(r: Request): unknown {
    switch (r.verb) {
      case "write":
        writeTo(this.#write(r.token), Uint8Array.fromBase64(r.data));
        return null;
      case "seal":
        this.#seal(r.token);
        return null;
      case "commit": {
        const prepared = this.#write(r.token);
        this.#writes.delete(r.token);
        this.#attributes.delete(r.token);
        commitAt(prepared);
        return null;
      }
      case "abort": {
        const prepared = this.#writes.get(r.token);
        this.#writes.delete(r.token);
        this.#attributes.delete(r.token);
        if (prepared) abortAt(prepared);
        return null;
      }
    }
    const missing = this.#walk(r.path, r.from);
    switch (r.verb) {
      case "lstat":
        return encodeInfo(missing ? null : lstatAt(r.path));
      case "discard":
        if (!missing) discardAt(r.path);
        return null;
      case "remove":
        return missing ? "gone" : removeAt(r.path, r.kind);
    }
    if (missing) throw new Deno.errors.NotFound(`${posixParent(r.path)} does not exist`);
    switch (r.verb) {
      case "read": {
        const { info, data } = readAt(r.path, r.size, r.max);
        if (data !== null) {
          for (let at = 0; at < data.length; at += PART) {
            send({ id: r.id, part: data.subarray(at, at + PART).toBase64() });
          }
        }
        return { info: encodeInfo(info), length: data === null ? null : data.length };
      }
      case "empty":
        return isEmptyAt(r.path);
      case "sync": {
        using dir = openForSync(r.path);
        syncNow(dir.fd);
        return null;
      }
      case "mkdir":
        this.#mine(r.path, r.uid);
        makeDirectoryAt(r.path, { mode: r.mode, uid: r.uid, gid: r.gid });
        return null;
      case "attrs":
        this.#mine(r.path, r.uid);
        setAttributesAt(r.path, { mode: r.mode, uid: r.uid, gid: r.gid });
        return null;
      case "create": {
        this.#mine(r.path, r.uid);
        const prepared = createTempAt(r.path);
        const token = ++this.#tokens;
        this.#writes.set(token, prepared);
        this.#attributes.set(token, { mode: r.mode, uid: r.uid, gid: r.gid });
        return token;
      }
    }
  }

  /** Owner and mode on the temporary file's descriptor, then its data synced. */
  #seal(token: number): void {
    const prepared = this.#write(token);
    const attributes = this.#attributes.get(token);
    if (attributes === undefined) throw new Error(`write ${token} was sealed already`);
    this.#attributes.delete(token);
    sealAt(prepared, attributes);
    syncNow(prepared.file.fd);
  }

  #write(token: number): Prepared {
    const prepared = this.#writes.get(token);
    if (prepared === undefined) throw new Error(`no write ${token} is under way`);
    return prepared;
  }

  /** The host asks only for this user's own files; anything else is refused here too. */
  #mine(path: string, uid: number): void {
    if (uid !== this.#uid) {
      throw new AsOwnerError(
        path,
        `this helper acts as uid ${this.#uid}, which cannot give a file to uid ${uid}`,
        "the host refuses this before asking; report it",
      );
    }
  }

  /**
   * Walk from the owner's directory down to the one holding `path`: true when one on the
   * way is missing; refused when one is a symlink, not a directory, or one that a user
   * other than root and this one (or a group, or everyone) can change.
   */
  #walk(path: string, from: string): boolean {
    const verdict = walk(path, {
      trusted: this.#trusted,
      look: lookHere,
      nameOf: (uid) => `uid ${uid}`,
      from,
    });
    if (verdict.as === "owner") {
      throw new UnsafePathError(
        verdict.at,
        `(above ${path}) belongs to uid ${verdict.uid}, who could swap names in it; the host ` +
          `acts below ${from} as uid ${this.#uid}, and never where another user could steer it`,
        `make ${verdict.at} uid ${this.#uid}'s, or declare a path elsewhere`,
      );
    }
    return verdict.as === "missing";
  }

  close(): void {
    for (const prepared of this.#writes.values()) abortAt(prepared);
    this.#writes.clear();
  }
}

/** The directory above a path, for a message. */
function posixParent(path: string): string {
  return path.slice(0, path.lastIndexOf("/")) || "/";
}

function lookHere(path: string): Looked | null {
  const info = lstatOrNull(path);
  if (info === null) return null;
  return {
    kind: kindOf(info),
    uid: info.uid ?? -1,
    gid: info.gid ?? -1,
    mode: (info.mode ?? 0) & 0o7777,
  };
}
