/**
 * The host's side of acting as a directory's owner: one child per (uid, gid), the host's
 * own program (`self`) started as that user (Deno.Command's uid and gid: supplementary
 * groups reduced to that gid, every capability dropped by the kernel on the change from
 * root), working directory /, a minimal environment; started on first need, ended when
 * the pass ends (`release`), or once the writes it holds are done. At most
 * {@link MAX_CHILDREN} live at once (each is a Deno process): a pass that acts for more
 * users ends the one idle longest first. Its answers are parsed strictly (./_protocol.ts)
 * and trusted only as far as that user's own files go.
 */
import { HostError } from "../../src/errors.ts";
import { lastLines } from "../_run.ts";
import {
  AS_OWNER_COMMAND,
  type Failure,
  lines,
  parseAnswer,
  ProtocolError,
  type Request,
} from "./_protocol.ts";
import { UnsafePathError } from "../../src/providers.ts";

/** Distributes a request without its id (the child assigns nothing: the host numbers them). */
type Asked = Request extends infer R ? R extends { id: number } ? Omit<R, "id"> : never : never;

/** The host cannot use its child acting as an owner. */
export class OwnerHelperError extends HostError {
  constructor(what: string, hint: string, cause?: unknown) {
    super("fs.owner-helper", what, { hint, cause });
  }
}

interface Pending {
  resolve(value: { ok: unknown; parts: Uint8Array[] }): void;
  reject(error: unknown): void;
  parts: Uint8Array[];
  bytes: number;
  /** The most bytes of parts this request may get. */
  max: number;
}

/** Where the host's own program is, and how to describe the user it runs as. */
export interface HelperOptions {
  self: string;
  env: Record<string, string>;
  /** "alice (uid 1000)" */
  who: string;
}

/** One child: the host's program serving as uid/gid. */
export class OwnerChild {
  readonly uid: number;
  readonly gid: number;
  readonly #options: HelperOptions;
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #pending = new Map<number, Pending>();
  readonly #ready: Promise<void>;
  readonly #ended: Promise<void>;
  #next = 1;
  #dead: Error | undefined;
  #stderr = "";
  #holding = 0;
  #retiring = false;
  #closed = false;
  readonly #onIdle: () => void;

  // Long because: spawning the owner's helper and wiring its pipes, exit and idle timer: one
  // resource set up or not at all.
  constructor(uid: number, gid: number, options: HelperOptions, onIdle: () => void = () => {}) {
    this.#onIdle = onIdle;
    this.uid = uid;
    this.gid = gid;
    this.#options = options;
    let spawned: Deno.ChildProcess;
    try {
      spawned = new Deno.Command(options.self, {
        args: [AS_OWNER_COMMAND, String(uid), String(gid)],
        uid,
        gid,
        cwd: "/",
        clearEnv: true,
        env: options.env,
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
    } catch (error) {
      throw new OwnerHelperError(
        `the host could not start its own program ${options.self} as ${options.who}: ` +
          (error as Error).message,
        error instanceof Deno.errors.NotCapable
          ? "the permission set must allow running the host's own program (its `binary`)"
          : "check that the host's program is installed where its permission set says",
        error,
      );
    }
    const child = spawned;
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    let ready!: () => void;
    let notReady!: (error: unknown) => void;
    this.#ready = new Promise<void>((resolve, reject) => {
      ready = resolve;
      notReady = reject;
    });
    // A failure to start is said to the request that waits for it.
    this.#ready.catch(() => {});
    const stderr = this.#collectStderr();
    this.#ended = (async () => {
      let failure: unknown;
      try {
        for await (const line of lines(child.stdout)) this.#answer(line, ready);
      } catch (error) {
        failure = error;
        this.#kill();
      }
      const status = await child.status;
      await stderr;
      this.#closed = true;
      const said = lastLines(this.#stderr, 3);
      this.#dead = new OwnerHelperError(
        `the host's helper acting as ${options.who} ${
          failure instanceof ProtocolError
            ? `broke the protocol (${failure.message}) and was stopped`
            : `ended (exit ${status.code}${status.signal ? `, ${status.signal}` : ""})`
        }${said ? `: ${said}` : ""}`,
        "the acts it was doing did not happen; the next apply tries again",
        failure,
      );
      notReady(this.#dead);
      for (const p of this.#pending.values()) p.reject(this.#dead);
      this.#pending.clear();
    })();
  }

  async #collectStderr(): Promise<void> {
    const decoder = new TextDecoder();
    for await (const chunk of this.#child.stderr) {
      this.#stderr = (this.#stderr + decoder.decode(chunk, { stream: true })).slice(-4096);
    }
  }

  #kill(): void {
    try {
      this.#child.kill("SIGKILL");
    } catch { /* gone already */ }
  }

  #answer(line: string, ready: () => void): void {
    const answer = parseAnswer(line);
    if (answer.id === 0) {
      const ok = "ok" in answer ? answer.ok as { uid?: unknown; gid?: unknown } : undefined;
      if (ok?.uid !== this.uid || ok?.gid !== this.gid) {
        throw new ProtocolError(`its first line is not its greeting as ${this.uid}:${this.gid}`);
      }
      ready();
      return;
    }
    const pending = this.#pending.get(answer.id);
    if (pending === undefined) throw new ProtocolError(`an answer to ${answer.id}, never asked`);
    if ("part" in answer) {
      const bytes = Uint8Array.fromBase64(answer.part);
      pending.bytes += bytes.length;
      if (pending.bytes > pending.max) throw new ProtocolError("more bytes than were asked for");
      pending.parts.push(bytes);
      return;
    }
    this.#pending.delete(answer.id);
    if ("ok" in answer) pending.resolve({ ok: answer.ok, parts: pending.parts });
    else pending.reject(failed(answer.error));
    if (this.idle) this.#onIdle();
  }

  /** Whether it does nothing for anyone now (no request under way, no write held). */
  get idle(): boolean {
    return this.#pending.size === 0 && this.#holding === 0;
  }

  /** Ask one thing; `max`: how many bytes of parts the answer may carry. */
  async ask(request: Asked, max = 0): Promise<{ ok: unknown; parts: Uint8Array[] }> {
    await this.#ready;
    if (this.#dead) throw this.#dead;
    const id = this.#next++;
    const answer = new Promise<{ ok: unknown; parts: Uint8Array[] }>((resolve, reject) =>
      this.#pending.set(id, { resolve, reject, parts: [], bytes: 0, max })
    );
    const line = new TextEncoder().encode(JSON.stringify({ ...request, id }) + "\n");
    this.#writer.write(line).catch((error) => {
      this.#pending.get(id)?.reject(this.#dead ?? error);
      this.#pending.delete(id);
    });
    return await answer;
  }

  /** Whether it ended (it is then started again for the next request). */
  get ended(): boolean {
    return this.#dead !== undefined;
  }

  /** Keep the child while a write it holds is under way (see {@link retire}). */
  hold(): void {
    this.#holding++;
  }

  /** A write it held is done. */
  unhold(): void {
    this.#holding--;
    if (this.#retiring && this.#holding === 0) this.#closeInput();
    if (this.idle) this.#onIdle();
  }

  /** End it once the writes it holds are done; resolves when it has exited. */
  async retire(): Promise<void> {
    this.#retiring = true;
    if (this.#holding === 0) this.#closeInput();
    await this.#ended;
  }

  #closeInput(): void {
    if (this.#closed) return;
    this.#writer.close().catch(() => {});
  }
}

/** Rebuild the error the child reported. */
function failed(f: Failure): Error {
  switch (f.kind) {
    case "unsafe":
      return new UnsafePathError(f.path ?? "", f.what ?? f.message, f.hint);
    case "NotFound":
    case "AlreadyExists":
    case "PermissionDenied":
    case "NotCapable":
      return new Deno.errors[f.kind](f.message);
    default:
      return new Error(f.message);
  }
}

/** The most children alive at once (each a Deno process of some 30–40 MiB). */
export const MAX_CHILDREN = 4;

/** The children of one pass, by (uid, gid), the one used last at the end. */
export class OwnerPool {
  readonly #children = new Map<string, OwnerChild>();
  #waiting: (() => void)[] = [];

  /**
   * The child acting as uid/gid, started now when there is none; with {@link MAX_CHILDREN}
   * alive, the one idle longest is ended first (and, none idle, one is waited for). It is
   * given held: the caller unholds it once done with it, so that a release() meanwhile (the
   * metrics file's pass ending while an apply's goes on) ends it only after that.
   */
  async child(uid: number, gid: number, options: () => HelperOptions): Promise<OwnerChild> {
    const key = `${uid}:${gid}`;
    for (;;) {
      const found = this.#children.get(key);
      this.#children.delete(key);
      if (found !== undefined && !found.ended) {
        this.#children.set(key, found);
        found.hold();
        return found;
      }
      for (const [k, c] of this.#children) if (c.ended) this.#children.delete(k);
      if (this.#children.size < MAX_CHILDREN) {
        const child = new OwnerChild(uid, gid, options(), () => this.#wake());
        this.#children.set(key, child);
        child.hold();
        return child;
      }
      const idle = [...this.#children].find(([, c]) => c.idle);
      if (idle !== undefined) {
        this.#children.delete(idle[0]);
        await idle[1].retire();
        continue;
      }
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
  }

  #wake(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const resolve of waiting) resolve();
  }

  /** End every child (each once the writes it holds are done). */
  async release(): Promise<void> {
    const children = [...this.#children.values()];
    this.#children.clear();
    await Promise.all(children.map((c) => c.retire()));
    this.#wake();
  }
}
