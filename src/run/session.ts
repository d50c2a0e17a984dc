/**
 * The run loop's side of the uplink (uplink.ts): the node's identity, the uplink it opened
 * with it, and what goes up over it (the outbox's reports, heartbeats, the inventory, the
 * confirm window's probe). Opened at the start when the node is enrolled, or once an
 * enrolment shows in the store; the loop never names a transport.
 */
import { describeError } from "../errors.ts";
import type { Engine } from "../engine/mod.ts";
import { type Identity, readIdentity } from "../link/identity.ts";
import type { TrustList } from "../link/trust.ts";
import type { Log } from "../log.ts";
import type { ContentSource } from "../store/content.ts";
import { Heartbeats, type Liveness } from "./heartbeat.ts";
import { InventoryReporter } from "./inventory.ts";
import { OutboxSender } from "./outbox.ts";
import type { Profile } from "../profile.ts";
import type { Trigger, Work } from "./queue.ts";
import { every } from "./timers.ts";
import type { OpenUplink, Uplink, UplinkState } from "./uplink.ts";

/** The run's options the session takes (loop.ts `RunOptions`). */
export interface SessionOptions {
  log: Log;
  uplink: OpenUplink;
  profile?: () => Promise<Profile>;
  /** How long the first uplink attempt may delay the start reconcile (ms, default 10 s). */
  startLinkWaitMs?: number;
  /** While not enrolled, how often to look for an identity in the store (ms, default 2 s). */
  enrolCheckMs?: number;
}

/** What the session tells the loop, and asks of it. */
export interface SessionHooks {
  enqueue(work: Work): void;
  /** The uplink's state changed: the status record and the metrics are written again. */
  changed(): void;
  /** What a heartbeat says of the process. */
  liveness(): Liveness;
  /** Resolves "down" once the loop is stopping (the first uplink's wait ends with it). */
  stopped: Promise<"down">;
  /** Whether the loop is stopping (no uplink is opened then). */
  stopping(): boolean;
}

/** The identity and the uplink of one run process. */
export class UplinkSession {
  readonly #host: Engine;
  readonly #opt: SessionOptions;
  readonly #hooks: SessionHooks;
  readonly outbox: OutboxSender;
  readonly inventory: InventoryReporter;
  readonly heartbeats: Heartbeats;
  #identity: Identity | undefined;
  #uplink: Uplink | undefined;
  /** A problem that kept the uplink from opening at all (its key unreadable, say). */
  problem: string | undefined;
  /** The first uplink's outcome is known (up, or given up waiting for). */
  #startDone = false;
  /** Why the confirm window's last new connection failed (logged once per reason). */
  #freshFailure: string | undefined;
  #stopEnrolWatch: (() => void) | undefined;

  constructor(host: Engine, options: SessionOptions, hooks: SessionHooks) {
    this.#host = host;
    this.#opt = options;
    this.#hooks = hooks;
    const { store, config } = host;
    this.outbox = new OutboxSender({ store, bounds: config.outbox, log: options.log });
    this.inventory = new InventoryReporter({
      store,
      stateDir: config.stateDir,
      profile: options.profile,
      log: options.log,
    });
    this.heartbeats = new Heartbeats(store);
  }

  /** The node's identity (undefined until enrolled). */
  get identity(): Identity | undefined {
    return this.#identity;
  }

  /** The uplink's state, or null while there is none (not enrolled). */
  get state(): UplinkState | null {
    return this.#uplink ? this.#uplink.state : null;
  }

  /** Whether the uplink is up. */
  get up(): boolean {
    return this.#uplink?.state.phase === "up";
  }

  /** Where the node's declarations come from (their origin in the store). */
  get origin(): string {
    return this.#uplink?.origin ?? "";
  }

  /** Content read over the uplink, for the apply (none without one). */
  contentSources(): ContentSource[] {
    return this.#uplink ? [this.#uplink.contentSource()] : [];
  }

  /**
   * Open the uplink when the store holds an identity, and wait for it (at most
   * `startLinkWaitMs`); otherwise watch the store for an enrolment. "up" when it came up.
   */
  async begin(): Promise<"up" | "down" | "unenrolled"> {
    const identity = readIdentity(this.#host.store);
    if (identity) return await this.#start(identity);
    this.#opt.log(
      "run: not enrolled: holding the machine to the store (or the bundle) until a token is used",
    );
    this.#stopEnrolWatch = every(this.#opt.enrolCheckMs ?? 2000, () => this.#checkEnrolment());
    return "unenrolled";
  }

  async #start(identity: Identity): Promise<"up" | "down"> {
    this.#identity = identity;
    let settle: (outcome: "up" | "down") => void = () => {};
    const first = new Promise<"up" | "down">((resolve) => settle = resolve);
    try {
      this.#uplink = await this.#opt.uplink(identity, {
        onDeclaration: (pushed) =>
          this.#hooks.enqueue({ kind: "declaration", ...pushed, trigger: "declaration" }),
        onUp: ({ catchUp }) => {
          const trigger: Trigger = this.#startDone ? "reconnect" : "start";
          this.#startDone = true;
          settle("up");
          this.heartbeat(true);
          this.outbox.kick();
          this.inventory.linked();
          this.#hooks.enqueue(
            catchUp ? { kind: "declaration", ...catchUp, trigger } : { kind: "reconcile", trigger },
          );
        },
        onState: (state) => {
          if (state.phase === "down") settle("down");
          this.#hooks.changed();
        },
        log: this.#opt.log,
      });
    } catch (error) {
      this.problem = describeError(error);
      this.#opt.log(`link: cannot start: ${this.problem}`, "error");
      this.#hooks.changed();
      return "down";
    }
    this.outbox.attach(this.#uplink, identity.node);
    this.inventory.attach(this.#uplink, identity);
    this.#uplink.start();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const outcome = await Promise.race([
      first,
      this.#hooks.stopped,
      new Promise<"down">((resolve) =>
        timer = setTimeout(() => resolve("down"), this.#opt.startLinkWaitMs ?? 10_000)
      ),
    ]);
    clearTimeout(timer);
    if (outcome === "down") this.#startDone = true;
    return outcome;
  }

  #checkEnrolment(): void {
    const identity = readIdentity(this.#host.store);
    if (!identity || this.#hooks.stopping()) return;
    this.#stopEnrolWatch?.();
    this.#stopEnrolWatch = undefined;
    this.#opt.log(`run: enrolled as ${identity.node}; starting the link`);
    this.#start(identity).catch((error) => this.#opt.log(`link: ${describeError(error)}`));
  }

  /** Keep `text` in the outbox (delivered in order once up); nothing without an identity. */
  keep(text: string): boolean {
    if (!this.#identity) return false;
    this.outbox.keep(text);
    return true;
  }

  /** Publish a report at once, unacknowledged (the memory ceiling's last word). */
  publishReport(message: (node: string) => unknown): void {
    if (this.#identity && this.#uplink) {
      this.#uplink.publish("report", message(this.#identity.node));
    }
  }

  /** One heartbeat, when the uplink is up; `withList` sends the managed list too. */
  heartbeat(withList: boolean): boolean {
    if (!this.#identity || !this.#uplink) return false;
    return this.heartbeats.send(this.#identity, this.#uplink, this.#hooks.liveness(), withList);
  }

  /**
   * A heartbeat, then whether the peer answered behind it and took a new connection,
   * all within `timeoutMs` (confirm.ts): the connection the uplink has may outlive a
   * rule that refuses new ones, which would cut the node off at its next reconnect.
   */
  async probe(timeoutMs: number): Promise<boolean> {
    const uplink = this.#uplink;
    if (!uplink || !this.heartbeat(false)) return false;
    const started = performance.now();
    if (!await uplink.roundTrip(timeoutMs)) return false;
    const failed = await uplink.freshConnection(timeoutMs - (performance.now() - started));
    if (!failed) {
      this.#freshFailure = undefined;
      return true;
    }
    // Said once per reason: the window probes again every second.
    if (failed.message !== this.#freshFailure) {
      this.#freshFailure = failed.message;
      this.#opt.log(
        `confirm: the link's connection answers, but a new one fails: ${failed.message}; ` +
          "a rule may refuse new connections to the broker (not confirmed yet)",
        "warning",
      );
    }
    return false;
  }

  /** A trust update taken (intake.ts): kept with the identity, used from the next connection. */
  trusted(list: TrustList): void {
    if (this.#identity) this.#identity = { ...this.#identity, trust: list };
    this.#uplink?.setTrust(list);
  }

  /** The control plane's signing key moved to `signer` (a rotation followed). */
  signedBy(signer: string): void {
    if (this.#identity) this.#identity = { ...this.#identity, signer };
  }

  /**
   * Whether the node was enrolled again while running (`enrol --replace`), or its identity
   * is gone: what changed, or undefined.
   */
  replaced(): string | undefined {
    if (!this.#identity) return undefined;
    const now = readIdentity(this.#host.store);
    if (now?.publicKey === this.#identity.publicKey && now.node === this.#identity.node) return;
    return now
      ? `the node was enrolled again as "${now.node}" (key ${now.publicKey})`
      : "the node's identity is gone from the store";
  }

  /**
   * End: the outbox delivers what it holds while up (bounded; the rest waits in the store
   * for the next process), the inventory finishes, the uplink sends what it buffered.
   */
  async close(): Promise<void> {
    this.#stopEnrolWatch?.();
    await this.outbox.settle(5000);
    await this.outbox.stop();
    await this.inventory.settled();
    if (this.#uplink) {
      await this.#uplink.flush();
      await this.#uplink.close();
    }
  }
}
