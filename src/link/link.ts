/**
 * The link (R5): one outbound connection, kept forever. It connects, subscribes to the
 * node's push subject (where the declaration stream republishes each declaration stored
 * for this node: src/link/subjects.ts, DECLARATION_REPUBLISH), fetches the last
 * declaration once (the catch-up: a request on the node's own `mesh.node.<node>.decl`,
 * which the broker answers with the stream's direct get), and hands both to the run loop.
 * Nothing is kept per node on the broker, and nothing polls: an idle node sends only its
 * heartbeats and hears only their acknowledgements. A heartbeat is a request the control
 * plane acknowledges with the stream sequence of the node's last stored declaration; the
 * link asks for it once more (one catch-up) when that is later than what it took, or
 * after a heartbeat that went unacknowledged (the path to the cluster was cut: a site's
 * leaf lost its uplink while this connection stayed up).
 * When the connection drops, or the broker stops answering pings, or the client
 * closes for any reason, it rebuilds the connection and the subscription after
 * an exponential backoff with jitter, re-resolving the broker's name each time.
 *
 * With several brokers (the servers of one NATS cluster, under one CA), it starts
 * at a random one, so a fleet spreads over the cluster, and moves to the next
 * whenever one refuses or goes away; the backoff grows only when a whole round
 * of servers failed. Its place is kept by the broker, not by the connection: on
 * every (re)connect, to whichever server, the catch-up fetches the last
 * declaration of this node, which every server of the cluster answers (the
 * stream is replicated).
 */
import type { Msg, MsgHdrs, NatsConnection, Subscription } from "@nats-io/transport-node";
import { headers } from "@nats-io/nats-core";
import { BACKOFF, type Backoff, backoffDelay } from "./backoff.ts";
import { CONNECTION_TIMING, type ConnectionTiming, openConnection } from "./connection.ts";
import { classifyLinkError, LinkError } from "./errors.ts";
import { type Identity, readJwt } from "./identity.ts";
import type { CertificateFacts } from "./certificate.ts";
import type { BrokerEntry } from "./token.ts";
import { TRUST_HEADER, type TrustList } from "./trust.ts";
import type { Pushed, Uplink, UplinkHandlers, UplinkPhase, UplinkState } from "../run/uplink.ts";
import { ROTATION_HEADER, SIGNATURE_HEADER } from "./signature.ts";
import {
  DECLARATION_STREAM,
  type HeartbeatAck,
  MESSAGE_ID_HEADER,
  NODE_LIMITS,
  PUSH_HEADERS,
  subjectsOf,
} from "./subjects.ts";
import { objectStoreSource } from "./object_source.ts";
import type { ContentSource } from "../store/content.ts";

/** The most the broker stores of each kind of message a node sends (NODE_LIMITS). */
const KIND_LIMIT = {
  report: NODE_LIMITS.reportBytes,
  heartbeat: NODE_LIMITS.heartbeatBytes,
  inventory: NODE_LIMITS.inventoryBytes,
} as const;

/** Where the link is. */
export type LinkPhase = UplinkPhase;

/** The link's state, for status and heartbeats (the uplink's, with the brokers' facts). */
export interface LinkState extends UplinkState {
  /** The broker in use (up), or being tried (connecting), or last tried (down). */
  url: string;
  /** How many brokers the node may use. */
  servers: number;
  /**
   * The last time the link came up on another broker than the one it was up on
   * before: from where, to where, why it left, when.
   */
  lastMove?: { from: string; to: string; why: string; at: string };
  /** How many times it has come up in this process. */
  connects: number;
  /** The last failure, kept after recovery so status can show it. */
  lastError?: { code: string; side: string; message: string; at: string };
}

export type { Pushed };

/** What the run loop hears from the link (the uplink's handlers). */
export type LinkHandlers = UplinkHandlers;

/** Tunables (tests shorten them). */
export interface LinkOptions {
  timing?: ConnectionTiming;
  backoff?: Backoff;
  random?: () => number;
  /** Timeout of the catch-up request (ms). */
  catchUpTimeoutMs?: number;
  /** How long a heartbeat waits for the control plane's acknowledgement (ms). */
  heartbeatAckMs?: number;
}

/** The node's one connection to the control plane. */
export class Link implements Uplink {
  readonly #identity: Identity;
  /** The node's seed, and its user JWT read at each connection (enrol --replace writes a new one). */
  readonly #login: { seed: Uint8Array; jwt: string };
  readonly #handlers: LinkHandlers;
  readonly #options: Required<LinkOptions>;
  #state: LinkState;
  #nc: NatsConnection | undefined;
  /**
   * The latest stream sequence of a declaration this process handed on (pushed or caught
   * up): a heartbeat's acknowledgement naming a later one asks for it.
   */
  #seen = 0;
  /**
   * A catch-up is owed: from each connection's start until one is answered, and again
   * after a heartbeat that went unacknowledged (something may have been missed).
   */
  #owed = true;
  /** The catch-up under way after a heartbeat (one at a time). */
  #catching: Promise<void> | undefined;
  /** The broker the link is up on (while it is). */
  #up: BrokerEntry | undefined;
  /** What the brokers' certificates must chain to (the identity's, then each update taken). */
  #trust: TrustList;
  /**
   * The declarations handed on in this connection (the last few: stream sequence and
   * size), to drop a second copy of one (a delivery again, the catch-up's).
   */
  #delivered: { seq: number; size: number }[] = [];
  #stopped = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;

  constructor(
    identity: Identity,
    seed: Uint8Array,
    handlers: LinkHandlers,
    options: LinkOptions = {},
  ) {
    this.#identity = identity;
    this.#trust = identity.trust;
    this.#login = { seed, jwt: "" };
    this.#handlers = handlers;
    this.#options = {
      timing: options.timing ?? CONNECTION_TIMING,
      backoff: options.backoff ?? BACKOFF,
      random: options.random ?? Math.random,
      catchUpTimeoutMs: options.catchUpTimeoutMs ?? 10_000,
      heartbeatAckMs: options.heartbeatAckMs ?? 10_000,
    };
    this.#state = {
      phase: "connecting",
      since: new Date().toISOString(),
      url: identity.brokers[0].url,
      servers: identity.brokers.length,
      connects: 0,
    };
  }

  /** The current state (a copy). */
  get state(): LinkState {
    return { ...this.#state };
  }

  /** The subject this node's declarations come on (the store records it as their origin). */
  get origin(): string {
    return subjectsOf(this.#identity.node).declaration;
  }

  /**
   * Trust `list` from the next connection on (a signed trust update the run loop took):
   * the connection that is up stays.
   */
  setTrust(list: TrustList): void {
    this.#trust = list;
  }

  /** Where to connect to `broker`, with the trust list now, noting its certificate. */
  #target(broker: BrokerEntry, note = true) {
    return {
      url: broker.url,
      trust: this.#trust,
      ...(broker.pin ? { pin: broker.pin } : {}),
      ...(note
        ? {
          onCertificate: (facts: CertificateFacts) =>
            this.#state = { ...this.#state, certificate: { ...facts, url: broker.url } },
        }
        : {}),
    };
  }

  /** Start connecting; the link then keeps itself up until close(). */
  start(): void {
    this.#loop ??= this.#run();
  }

  /**
   * Publish a JSON message on one of the node's subjects; false when the link is not
   * up, or the message is larger than the broker stores of its kind (NODE_LIMITS). A
   * heartbeat goes as a request: its acknowledgement (HeartbeatAck) may ask for one
   * catch-up (`#acknowledged`).
   */
  publish(kind: "report" | "heartbeat", message: unknown): boolean {
    const nc = this.#nc;
    if (!nc || this.#state.phase !== "up") return false;
    const body = new TextEncoder().encode(JSON.stringify(message));
    if (body.length > KIND_LIMIT[kind]) return false;
    const subject = subjectsOf(this.#identity.node)[kind];
    try {
      if (kind === "report") {
        nc.publish(subject, body);
        return true;
      }
      nc.request(subject, body, { timeout: this.#options.heartbeatAckMs }).then(
        (reply) => this.#acknowledged(nc, reply),
        () => {
          // Unacknowledged: the path to the control plane may have been cut meanwhile
          // (a site's leaf without its uplink), and a push lost on it. The next
          // acknowledged heartbeat brings one catch-up.
          if (this.#nc === nc) this.#owed = true;
        },
      );
      return true;
    } catch {
      return false;
    }
  }

  /**
   * A heartbeat's acknowledgement: one catch-up when one is owed (the connection's own
   * failed, or a heartbeat went unacknowledged since), or when the stream holds a later
   * declaration for this node than the link handed on. Never more than one at a time.
   */
  #acknowledged(nc: NatsConnection, reply: Msg): void {
    if (this.#nc !== nc || this.#state.phase !== "up" || this.#catching) return;
    let stored: number | undefined;
    try {
      const ack = JSON.parse(reply.string()) as HeartbeatAck;
      if (Number.isSafeInteger(ack?.decl)) stored = ack.decl;
    } catch { /* not an acknowledgement of ours: nothing said about the stream */ }
    const behind = stored !== undefined && stored > this.#seen;
    if (!this.#owed && !behind) return;
    const why = behind
      ? `the control plane holds declaration ${stored} for this node, later than ${this.#seen}`
      : "a heartbeat went unacknowledged before this one";
    this.#catching = this.#catchUp(nc).then((caught) => {
      this.#owed = false;
      this.#handlers.log?.(`link: caught up (${why})`, "debug");
      if (caught && this.#nc === nc) this.#hand(caught);
    }, (error) => {
      const failed = classifyLinkError(error, this.#where(this.#state.url));
      this.#handlers.log?.(
        `link: cannot fetch the declaration (${why}): ${failed.message}`,
        "warning",
      );
    }).finally(() => this.#catching = undefined);
  }

  /**
   * The mesh's object store as a content source (DESIGN.md §19), read over this link
   * while it is up; when it is down, asking fails with the reason. `timeoutMs` bounds
   * each ask (one chunk of 128 KiB); a lost answer is asked again (object_source.ts).
   */
  contentSource(timeoutMs = 10_000): ContentSource {
    return objectStoreSource(this.#identity.node, (subject, body) => {
      const nc = this.#nc;
      if (!nc || this.#state.phase !== "up") {
        return Promise.reject(new Error("the link to the broker is not up"));
      }
      return nc.request(subject, body, { timeout: timeoutMs });
    });
  }

  /**
   * Deliver `body` (JSON text) on the node's report or inventory subject with
   * message id `id`, and wait for the broker's stream to acknowledge it. The
   * acknowledgement arrives on the node's own inbox (`_INBOX.<node>.…`): the
   * broker imports these subjects as a service, so the reply subject JetStream
   * answers is the broker's own mapping of that inbox, never one the node named.
   * Resolves when stored (or already stored under that id); rejects with a
   * LinkError otherwise (link down, no stream, timeout, stream error).
   */
  async deliver(
    kind: "report" | "inventory",
    body: string,
    id: string,
    timeoutMs = 10_000,
  ): Promise<{ stream: string; seq: number; duplicate: boolean }> {
    const nc = this.#nc;
    if (!nc || this.#state.phase !== "up") {
      throw new LinkError("closed", "node", "the link is not up");
    }
    const size = new TextEncoder().encode(body).length;
    if (size > KIND_LIMIT[kind]) {
      throw new LinkError(
        "protocol",
        "node",
        `the ${kind} is ${size} bytes; the broker stores at most ${
          KIND_LIMIT[kind]
        } of a node's ${kind}`,
      );
    }
    const h = headers();
    h.set(MESSAGE_ID_HEADER, id);
    const subject = subjectsOf(this.#identity.node)[kind];
    let answer: { stream?: string; seq?: number; duplicate?: boolean; error?: unknown };
    try {
      const reply = await nc.request(subject, body, { timeout: timeoutMs, headers: h });
      answer = JSON.parse(reply.string());
    } catch (error) {
      throw classifyLinkError(error, this.#where(this.#state.url));
    }
    if (answer.error !== undefined || typeof answer.seq !== "number") {
      throw new LinkError(
        "protocol",
        "broker",
        `the broker did not store the ${kind} on ${subject}: ${
          JSON.stringify(answer.error ?? answer).slice(0, 300)
        }`,
      );
    }
    return { stream: String(answer.stream), seq: answer.seq, duplicate: answer.duplicate === true };
  }

  /**
   * Whether the declaration stored at stream sequence `seq` (`size` bytes) was handed on
   * already in this connection (noted if not).
   */
  #again(seq: number | undefined, size: number): boolean {
    if (seq === undefined) return false;
    if (this.#delivered.some((d) => d.seq === seq && d.size === size)) return true;
    this.#delivered = [...this.#delivered.slice(-7), { seq, size }];
    return false;
  }

  /** Hand a declaration on to the run loop, once per connection. */
  #hand(pushed: Pushed): void {
    if (this.#again(pushed.seq, pushed.data.length)) return;
    if (pushed.seq !== undefined && pushed.seq > this.#seen) this.#seen = pushed.seq;
    this.#handlers.onDeclaration(pushed);
  }

  /**
   * The last declaration stored for this node (the catch-up), or undefined when there is
   * none; throws when the broker did not answer it.
   */
  async #catchUp(nc: NatsConnection): Promise<Pushed | undefined> {
    const s = subjectsOf(this.#identity.node);
    const reply = await nc.request(s.catchUp, new Uint8Array(0), {
      timeout: this.#options.catchUpTimeoutMs,
    });
    const code = reply.headers?.code ?? 0;
    if (code === 404) return undefined;
    if (code !== 0 && (code < 200 || code >= 300)) {
      throw new LinkError(
        "protocol",
        "broker",
        `the broker answered the catch-up request with ${code} ${reply.headers?.description ?? ""}`,
      );
    }
    const stored = fromStream(reply, s.declaration);
    if (!stored) {
      throw new LinkError(
        "protocol",
        "broker",
        `the answer to the catch-up does not name ${s.declaration} of ${DECLARATION_STREAM}`,
      );
    }
    return stored;
  }

  /**
   * Whether the broker answers on this connection now: a PING and its PONG, within
   * `timeoutMs`. Everything published before (a heartbeat) reached the broker first,
   * in order. False when the link is not up, or no answer came in time.
   */
  async roundTrip(timeoutMs: number): Promise<boolean> {
    const nc = this.#nc;
    if (!nc || this.#state.phase !== "up") return false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        nc.flush().then(() => true, () => false),
        new Promise<boolean>((resolve) => timer = setTimeout(() => resolve(false), timeoutMs)),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Whether a new connection to the broker the link is up on can be made now, as the
   * link makes its own (TCP, TLS under the mesh's CA with the broker's name, the CONNECT
   * that proves the node's key), and answers a PING; it is closed again at once. The
   * connection the link has may outlive a rule that refuses new ones (`ct state new
   * drop`): the confirm window asks both (src/run/confirm.ts). Never waits longer than
   * `timeoutMs`; a connection that opens after that is closed as it opens. Resolves to
   * undefined when it worked, or to why not.
   */
  async freshConnection(timeoutMs: number): Promise<LinkError | undefined> {
    const broker = this.#up;
    if (!broker || this.#state.phase !== "up") {
      return new LinkError("closed", "node", "the link is not up");
    }
    const started = performance.now();
    const budget = Math.max(1, Math.floor(timeoutMs));
    const opening = openConnection(
      this.#target(broker, false),
      {
        ...this.#login,
        publicKey: this.#identity.publicKey,
        inboxPrefix: subjectsOf(this.#identity.node).inboxPrefix,
        name: `${this.#identity.node} (confirm probe)`,
      },
      { timeoutMs: budget, pingIntervalMs: 2 * budget + 1000, maxPingOut: 1 },
    );
    const closeLater = (nc: NatsConnection) => void nc.close().catch(() => {});
    try {
      const opened = await within(opening, budget, "late" as const);
      if (opened === "late") {
        opening.then(closeLater, () => {});
        return new LinkError(
          "timeout",
          "network",
          `a new connection to ${broker.url} was not made within ${(budget / 1000).toFixed(1)} s`,
        );
      }
      const left = Math.max(1, budget - (performance.now() - started));
      const answered = await within(opened.flush().then(() => true, () => false), left, false);
      // Closed without waiting for the close to finish: the answer is due by the deadline.
      closeLater(opened);
      return answered ? undefined : new LinkError(
        "timeout",
        "network",
        `a new connection to ${broker.url} was made but the broker did not answer a ping on it`,
      );
    } catch (error) {
      return classifyLinkError(error, this.#where(broker.url));
    }
  }

  /** Wait until what was published has reached the broker (bounded). */
  async flush(timeoutMs = 5000): Promise<void> {
    const nc = this.#nc;
    if (!nc || this.#state.phase !== "up") return;
    await race(nc.flush().catch(() => {}), timeoutMs);
  }

  /** Stop: close the connection and end the loop. */
  async close(): Promise<void> {
    this.#stopped = true;
    this.#wake?.();
    const nc = this.#nc;
    if (nc) await race(nc.close().catch(() => {}), 5000);
    await race(this.#loop ?? Promise.resolve(), 10_000);
    this.#set("stopped");
  }

  // Long because: the link's connect-and-retry loop: backoff, the move between brokers and the
  // state each step leaves are one piece of state read top to bottom.
  async #run(): Promise<void> {
    const brokers = this.#identity.brokers;
    // Start anywhere: a fleet enrolled with the same token spreads over the cluster.
    let index = Math.min(brokers.length - 1, Math.floor(this.#options.random() * brokers.length));
    let failures = 0; // attempts failed in a row, on any broker
    let lastLogged = "";
    let lastUp: string | undefined; // the broker the link was last up on
    let leftBecause = ""; // why the link left it (or failed to come back)
    while (!this.#stopped) {
      const broker = brokers[index];
      const target = this.#target(broker);
      this.#state = { ...this.#state, url: broker.url };
      this.#set("connecting");
      let nc: NatsConnection;
      try {
        this.#login.jwt = await readJwt(this.#identity);
        nc = await openConnection(
          target,
          {
            ...this.#login,
            publicKey: this.#identity.publicKey,
            inboxPrefix: subjectsOf(this.#identity.node).inboxPrefix,
            name: this.#identity.node,
          },
          this.#options.timing,
        );
      } catch (error) {
        const failure = classifyLinkError(error, this.#where(broker.url));
        // The backoff grows per round of brokers, not per broker: a dead server is
        // skipped at once while the others are fine.
        const delay = backoffDelay(
          Math.floor(failures++ / brokers.length),
          this.#options.backoff,
          this.#options.random,
        );
        this.#fail(failure);
        leftBecause ||= `${broker.url}: ${failure.message}`;
        index = (index + 1) % brokers.length;
        if (failure.message !== lastLogged || failures % 20 === 0) {
          this.#handlers.log?.(
            `link: cannot connect (attempt ${failures}): ${failure.message}; retrying${
              brokers.length > 1 ? ` with ${brokers[index].url}` : ""
            } in ${(delay / 1000).toFixed(1)} s`,
            "warning",
          );
          lastLogged = failure.message;
        }
        await this.#sleep(delay);
        continue;
      }
      if (this.#stopped) {
        await race(nc.close().catch(() => {}), 5000);
        break;
      }
      this.#nc = nc;
      this.#up = broker;
      failures = 0;
      if (lastUp !== undefined && lastUp !== broker.url) {
        this.#state.lastMove = {
          from: lastUp,
          to: broker.url,
          why: leftBecause || "unknown",
          at: new Date().toISOString(),
        };
        this.#handlers.log?.(`link: moved from ${lastUp} to ${broker.url} (${leftBecause})`);
      }
      lastUp = broker.url;
      leftBecause = "";
      const reconnect = this.#state.connects > 0;
      const ended = await this.#session(nc, reconnect).catch((error) =>
        classifyLinkError(error, this.#where(broker.url))
      );
      this.#nc = undefined;
      this.#up = undefined;
      if (this.#stopped) break;
      if (ended) this.#fail(ended);
      else this.#set("down");
      leftBecause = `${broker.url}: ${ended?.message ?? "the connection ended"}`;
      // The server it was on went away: the next one is the likelier to answer.
      index = (index + 1) % brokers.length;
      const delay = backoffDelay(0, this.#options.backoff, this.#options.random);
      this.#handlers.log?.(
        `link: down${ended ? `: ${ended.message}` : ""}; reconnecting${
          brokers.length > 1 ? ` to ${brokers[index].url}` : ""
        } in ${(delay / 1000).toFixed(1)} s`,
        "warning",
      );
      lastLogged = ended?.message ?? "";
      await this.#sleep(delay);
    }
  }

  #where(url: string): { url: string; publicKey: string } {
    return { url, publicKey: this.#identity.publicKey };
  }

  /** One connection's life: subscribe, catch up, announce, then wait for it to end. */
  // Long because: one connection's life (subscriptions, the catch-up, the wait for its end), whose
  // steps share the connection and its subscriptions.
  async #session(nc: NatsConnection, reconnect: boolean): Promise<LinkError | undefined> {
    const s = subjectsOf(this.#identity.node);
    // A new connection hands the last declaration on again (the catch-up): the run loop
    // knows it as held, and reconciles for the reconnect.
    this.#delivered = [];
    this.#owed = true;
    let failure: LinkError | undefined;
    const watch = (async () => {
      for await (const status of nc.status()) {
        if (status.type === "staleConnection") {
          failure = new LinkError(
            "timeout",
            "network",
            `the broker stopped answering pings (${
              this.#options.timing.maxPingOut + 1
            } unanswered, ${this.#options.timing.pingIntervalMs / 1000} s apart)`,
            { hint: "the broker or the network path to it is down; the host keeps reconnecting" },
          );
          // The client does not always finish closing a stale socket on its own.
          nc.close().catch(() => {});
        } else if (status.type === "error") {
          const error = classifyLinkError(status.error, this.#where(this.#state.url));
          this.#handlers.log?.(`link: ${error.message}`, "warning");
          this.#note(error);
        }
      }
    })();
    // Declarations arrive as the stream stores them; those that come before the link is
    // up wait for the catch-up, which they most often repeat (handed on once).
    let early: Pushed[] | undefined = [];
    let dropped = 0;
    const sub: Subscription = nc.subscribe(s.push, {
      callback: (error, msg) => {
        if (error) return;
        const stored = fromStream(msg, s.declaration);
        if (!stored) {
          // Not the stream's republish of this node's declaration: a reply another node
          // steered here (its own catch-up, an acknowledgement). Dropped without a word
          // upward, so that no neighbour can make this node report noise.
          if (dropped++ === 0) {
            this.#handlers.log?.(
              `link: dropped a message on ${s.push} that is not a declaration stored for ` +
                `${this.#identity.node} (another node may have aimed a reply here)`,
              "debug",
            );
          }
          return;
        }
        if (early) early.push(stored);
        else this.#hand(stored);
      },
    });
    await nc.flush();
    if (sub.isClosed()) {
      const error = await sub.closed;
      await race(nc.close().catch(() => {}), 5000);
      await race(watch, 5000);
      throw error ??
        new LinkError(
          "permission",
          "broker",
          `the broker closed the subscription to ${s.push}`,
        );
    }
    // Once per connection: the last declaration stored for this node (any replica answers,
    // one behind the others included: an older answer than what the node holds is ignored).
    let catchUp: Pushed | undefined;
    try {
      const stored = await this.#catchUp(nc);
      this.#owed = false;
      if (stored && !this.#again(stored.seq, stored.data.length)) {
        catchUp = stored;
        if (stored.seq !== undefined && stored.seq > this.#seen) this.#seen = stored.seq;
      }
    } catch (error) {
      // Live declarations still arrive, and the next acknowledged heartbeat asks again.
      const failed = classifyLinkError(error, this.#where(this.#state.url));
      this.#handlers.log?.(
        `link: cannot fetch the declaration published while away: ${failed.message}`,
        "warning",
      );
      this.#note(failed);
    }
    this.#state.connects++;
    this.#set("up");
    this.#handlers.log?.(
      `link: up to ${this.#state.url} as ${this.#identity.node}${
        reconnect ? " (reconnected)" : ""
      }`,
    );
    this.#handlers.onUp({ reconnect, ...(catchUp ? { catchUp } : {}) });
    const waited = early;
    early = undefined;
    waited.forEach((p) => this.#hand(p));
    const closedWith = await nc.closed();
    await race(watch, 5000);
    if (failure) return failure;
    if (closedWith instanceof Error) {
      return classifyLinkError(closedWith, this.#where(this.#state.url));
    }
    return this.#stopped
      ? undefined
      : new LinkError("closed", "broker", "the broker closed the connection");
  }

  #set(phase: LinkPhase): void {
    if (this.#state.phase === phase) return;
    this.#state = { ...this.#state, phase, since: new Date().toISOString() };
    this.#handlers.onState?.(this.state);
  }

  #note(error: LinkError): void {
    this.#state.lastError = {
      code: error.code,
      side: error.side,
      message: error.message,
      at: new Date().toISOString(),
    };
    this.#handlers.onState?.(this.state);
  }

  #fail(error: LinkError): void {
    this.#state = { ...this.#state, phase: "down", since: new Date().toISOString() };
    this.#note(error);
  }

  #sleep(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }
}

/**
 * A declaration as the stream gave it (its republish, or a direct get's answer): only a
 * message whose headers name the declaration stream and `subject` (this node's own
 * declaration subject); undefined for anything else. No other node can make the broker
 * send that: what it can aim at this node's push subject is a reply to what it asks on
 * its own subjects, which names its own declaration subject or none.
 */
export function fromStream(msg: Msg, subject: string): Pushed | undefined {
  const h: MsgHdrs | undefined = msg.headers;
  if (!h || h.hasError) return undefined;
  if (h.get(PUSH_HEADERS.stream) !== DECLARATION_STREAM) return undefined;
  if (h.get(PUSH_HEADERS.subject) !== subject) return undefined;
  const out: Pushed = { data: msg.data };
  if (h.has(SIGNATURE_HEADER)) out.signature = h.get(SIGNATURE_HEADER);
  if (h.has(ROTATION_HEADER)) out.rotation = h.get(ROTATION_HEADER);
  if (h.has(TRUST_HEADER)) out.trust = h.get(TRUST_HEADER);
  const seq = Number(h.get(PUSH_HEADERS.sequence));
  if (Number.isSafeInteger(seq) && seq > 0) out.seq = seq;
  return out;
}

/** What `work` resolves to, or `otherwise` after `ms` (its timer cleared either way). */
function within<T, U>(work: Promise<T>, ms: number, otherwise: U): Promise<T | U> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    work,
    new Promise<U>((resolve) => timer = setTimeout(() => resolve(otherwise), ms)),
  ]).finally(() => clearTimeout(timer));
}

function race(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    work.then(() => {}),
    new Promise<void>((resolve) => timer = setTimeout(resolve, ms)),
  ]).finally(() => clearTimeout(timer));
}
