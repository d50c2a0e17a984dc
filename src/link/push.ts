/**
 * The node's side of its declaration consumer (src/link/subjects.ts,
 * DECLARATION_PUSH): one subscription to the node's push subject, on which the
 * broker delivers each declaration stored for the node, its idle heartbeats and its
 * flow control requests. Each delivery is acknowledged (the broker sends an
 * unacknowledged one again after `ack_wait`), each flow control request answered
 * (also when an idle heartbeat says the consumer stalled waiting for one). A
 * subscription that hears nothing for `silenceMs` says so and subscribes again: its
 * interest reaches the consumer anew (through a site's leaf too), and the consumer
 * resumes with what it has not had acknowledged.
 */
import type { Msg, MsgHdrs, NatsConnection, Subscription } from "@nats-io/transport-node";
import type { LogLevel } from "../log.ts";

/** The header of an idle heartbeat that names a flow control request still unanswered. */
const STALLED_HEADER = "Nats-Consumer-Stalled";

/** One stored declaration as the consumer delivered it. */
export interface Delivery {
  data: Uint8Array;
  headers: MsgHdrs | undefined;
  /** Its sequence in the stream (from the acknowledgement subject), when it could be read. */
  seq?: number;
}

/** What the subscription tells its owner. */
export interface PushHandlers {
  onDelivery(delivery: Delivery): void;
  log?(line: string, level?: LogLevel): void;
}

/**
 * The stream sequence a JetStream acknowledgement subject names:
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`,
 * or with the domain and account hash before the stream and a token after it
 * (`$JS.ACK.<domain>.<hash>.<stream>.…`, twelve tokens). Undefined for anything else.
 */
export function streamSequenceOf(ackSubject: string): number | undefined {
  const tokens = ackSubject.split(".");
  if (tokens[0] !== "$JS" || tokens[1] !== "ACK") return undefined;
  const at = tokens.length === 9 ? 5 : tokens.length >= 12 ? 7 : -1;
  if (at < 0) return undefined;
  const seq = Number(tokens[at]);
  return Number.isSafeInteger(seq) && seq > 0 ? seq : undefined;
}

/** The push subscription of one connection; `close()` when the connection ends. */
export class PushSubscription {
  readonly #nc: NatsConnection;
  readonly #subject: string;
  readonly #handlers: PushHandlers;
  readonly #silenceMs: number;
  #sub: Subscription;
  #heardAt = Date.now();
  #silentSince: number | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(nc: NatsConnection, subject: string, silenceMs: number, handlers: PushHandlers) {
    this.#nc = nc;
    this.#subject = subject;
    this.#handlers = handlers;
    this.#silenceMs = silenceMs;
    this.#sub = this.#subscribe();
  }

  /** The subscription in use (closed by the broker when it is not permitted). */
  get subscription(): Subscription {
    return this.#sub;
  }

  /** Start watching for silence (once the connection is up). */
  watch(): void {
    this.#heardAt = Date.now();
    this.#timer ??= setInterval(
      () => this.#check(),
      Math.max(100, Math.min(5000, Math.floor(this.#silenceMs / 4))),
    );
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #subscribe(): Subscription {
    return this.#nc.subscribe(this.#subject, {
      callback: (error, msg) => {
        if (!error) this.#heard(msg);
      },
    });
  }

  #heard(msg: Msg): void {
    this.#heardAt = Date.now();
    if (this.#silentSince !== undefined) {
      this.#handlers.log?.(
        `link: the declaration consumer is heard again after ${
          Math.round((Date.now() - this.#silentSince) / 1000)
        } s`,
      );
      this.#silentSince = undefined;
    }
    const h = msg.headers;
    if (h && h.code === 100) {
      // A flow control request (its reply subject), or an idle heartbeat: one that names
      // a request still unanswered means the consumer stalled waiting for it.
      if (msg.reply) this.#answer(msg.reply);
      const stalled = h.has(STALLED_HEADER) ? h.get(STALLED_HEADER) : "";
      if (stalled) this.#answer(stalled);
      return;
    }
    if (h?.hasError) return;
    if (msg.reply) this.#answer(msg.reply, "+ACK");
    this.#handlers.onDelivery({
      data: msg.data,
      headers: h,
      ...(msg.reply ? { seq: streamSequenceOf(msg.reply) } : {}),
    });
  }

  #answer(subject: string, body = ""): void {
    try {
      this.#nc.publish(subject, body);
    } catch { /* the connection is closing: the broker sends it again */ }
  }

  #check(): void {
    const quiet = Date.now() - this.#heardAt;
    if (quiet < this.#silenceMs || this.#nc.isClosed()) return;
    if (this.#silentSince === undefined) {
      this.#silentSince = this.#heardAt;
      this.#handlers.log?.(
        `link: nothing from the declaration consumer on ${this.#subject} for ${
          Math.round(quiet / 1000)
        } s (not even its idle heartbeat): subscribing again; declarations published ` +
          "meanwhile arrive when it is heard again (if this lasts, the control plane may " +
          "not have made this node's consumer)",
        "warning",
      );
    }
    this.#heardAt = Date.now();
    try {
      this.#sub.unsubscribe();
    } catch { /* closed */ }
    this.#sub = this.#subscribe();
  }
}
