/**
 * A transport that lives in this process: a real implementation of the run loop's uplink
 * (src/run/uplink.ts), with the control plane's side in the same object. It is what a new
 * transport implements (docs/contributing.md, "Add a transport"), and it drives the run
 * loop's tests that need no broker (tests/stub_transport_test.ts): declarations pushed in,
 * reports and the inventory delivered and kept by message id (a second delivery under an
 * id is a duplicate), heartbeats published, content served by digest, the link cut and
 * restored (the catch-up on the way up is the last declaration pushed).
 */
import type { Identity } from "../src/link/identity.ts";
import type { TrustList } from "../src/link/trust.ts";
import type { ContentSource } from "../src/store/content.ts";
import type { OpenUplink, Pushed, Uplink, UplinkHandlers, UplinkState } from "../src/run/uplink.ts";

/** What the node sent, as the control plane's side holds it. */
export interface Sent {
  kind: "report" | "inventory" | "heartbeat";
  /** The message id it was delivered under (absent for a published heartbeat or report). */
  id?: string;
  message: Record<string, unknown>;
}

/** The in-memory uplink, and the control plane's end of it. */
export class MemoryUplink implements Uplink {
  readonly identity: Identity;
  readonly #handlers: UplinkHandlers;
  #state: UplinkState = { phase: "connecting", since: new Date().toISOString() };
  #connects = 0;
  /** Everything the node sent, in order (deliveries once per id). */
  readonly sent: Sent[] = [];
  readonly #ids = new Set<string>();
  /** The last declaration pushed (the catch-up on the way up). */
  #last: Pushed | undefined;
  /** Content by sha256, as the control plane's object store would serve it. */
  readonly content = new Map<string, Uint8Array>();
  /** A rule refuses new connections (the confirm window's probe fails). */
  refuseNew = false;
  trust: TrustList | undefined;
  closed = false;

  constructor(identity: Identity, handlers: UplinkHandlers) {
    this.identity = identity;
    this.#handlers = handlers;
  }

  get state(): UplinkState {
    return { ...this.#state };
  }

  get origin(): string {
    return `memory:${this.identity.node}`;
  }

  start(): void {
    queueMicrotask(() => this.#comeUp());
  }

  #comeUp(): void {
    if (this.closed) return;
    this.#set("up");
    this.#handlers.onUp({
      reconnect: this.#connects++ > 0,
      ...(this.#last ? { catchUp: this.#last } : {}),
    });
  }

  #set(phase: UplinkState["phase"]): void {
    this.#state = { phase, since: new Date().toISOString() };
    this.#handlers.onState?.(this.state);
  }

  /** The control plane pushes a declaration: handed on at once when up, kept for the catch-up. */
  push(pushed: Pushed): void {
    this.#last = pushed;
    if (this.#state.phase === "up") this.#handlers.onDeclaration(pushed);
  }

  /** The way to the control plane is cut. */
  cut(): void {
    this.#set("down");
  }

  /** It is back: up again, with the catch-up. */
  restore(): void {
    this.#comeUp();
  }

  publish(kind: "report" | "heartbeat", message: unknown): boolean {
    if (this.#state.phase !== "up") return false;
    this.sent.push({ kind, message: structuredClone(message) as Record<string, unknown> });
    return true;
  }

  deliver(
    kind: "report" | "inventory",
    body: string,
    id: string,
  ): Promise<{ duplicate: boolean }> {
    if (this.#state.phase !== "up") return Promise.reject(new Error("the memory uplink is down"));
    const duplicate = this.#ids.has(id);
    if (!duplicate) {
      this.#ids.add(id);
      this.sent.push({ kind, id, message: JSON.parse(body) });
    }
    return Promise.resolve({ duplicate });
  }

  contentSource(): ContentSource {
    return {
      name: "the memory uplink's content",
      get: (sha256) => {
        if (this.#state.phase !== "up") {
          return Promise.reject(new Error("the memory uplink is down"));
        }
        return Promise.resolve(this.content.get(sha256) ?? null);
      },
    };
  }

  roundTrip(): Promise<boolean> {
    return Promise.resolve(this.#state.phase === "up");
  }

  freshConnection(): Promise<{ message: string } | undefined> {
    if (this.#state.phase !== "up") return Promise.resolve({ message: "the uplink is down" });
    return Promise.resolve(this.refuseNew ? { message: "new connections refused" } : undefined);
  }

  setTrust(list: TrustList): void {
    this.trust = list;
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closed = true;
    this.#set("stopped");
    return Promise.resolve();
  }

  /** What the node sent of `kind`. */
  of(kind: Sent["kind"]): Record<string, unknown>[] {
    return this.sent.filter((s) => s.kind === kind).map((s) => s.message);
  }
}

/** An opener for the run loop that keeps each uplink it opened in `opened`. */
export function memoryUplinks(): { open: OpenUplink; opened: MemoryUplink[] } {
  const opened: MemoryUplink[] = [];
  return {
    opened,
    open: (identity, handlers) => {
      const uplink = new MemoryUplink(identity, handlers);
      opened.push(uplink);
      return Promise.resolve(uplink);
    },
  };
}
