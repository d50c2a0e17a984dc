/**
 * Heartbeats (R5): on link, after every apply and every heartbeat interval,
 * the node says it is alive, what it runs and what it manages. The list of managed
 * resources rides along when asked for or when it changed since it was last sent.
 */
import type { Identity } from "../link/identity.ts";
import type { Uplink } from "./uplink.ts";
import { heartbeatMessage, managedSummary } from "../link/messages.ts";
import { readHold } from "../engine/hold.ts";
import type { Store } from "../store/store.ts";
import { tlsExpiry } from "../link/trust.ts";

/** What a heartbeat says about the running process. */
export interface Liveness {
  /** performance.now() when the process started (uptime). */
  startedAt: number;
  /** When the next drift reconcile is due, if any. */
  nextDriftAt: string | null;
}

/** The heartbeats of one process. */
export class Heartbeats {
  readonly #store: Store;
  #lastAt: string | null = null;
  #managedDigestSent: string | undefined;

  constructor(store: Store) {
    this.#store = store;
  }

  /**
   * Send one heartbeat over `link` when it is up; `withList` sends the managed list too.
   * True when it was handed to the connection.
   */
  send(identity: Identity, link: Uplink, liveness: Liveness, withList: boolean): boolean {
    if (link.state.phase !== "up") return false;
    const managed = managedSummary(this.#store);
    const sendList = withList || managed.digest !== this.#managedDigestSent;
    const message = heartbeatMessage(
      identity.node,
      this.#store,
      {
        ...liveness,
        serial: this.#store.lastLinkSerial()?.serial ?? null,
        hold: readHold(this.#store),
        tls: tlsExpiry(identity.trust, link.state.certificate),
      },
      managed,
      sendList,
    );
    if (!link.publish("heartbeat", message)) return false;
    this.#lastAt = message.at;
    if (sendList) this.#managedDigestSent = managed.digest;
    return true;
  }

  /** When the last heartbeat went out (ISO time), or `null`. */
  get lastAt(): string | null {
    return this.#lastAt;
  }
}
