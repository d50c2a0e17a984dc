/**
 * The uplink: what the run loop asks of the way to the control plane, whatever carries it.
 * The NATS link implements it (src/link/nats_uplink.ts, `natsUplink`); the command line
 * hands the loop a way to open one (`RunOptions.uplink`), and the loop never names a
 * transport. What travels is the mesh's own: reports, heartbeats and the inventory
 * (src/link/messages.ts), content by digest (src/store/content.ts), declarations as the
 * exact bytes that were signed (the trust module checks them: src/trust/). Adding a
 * transport: docs/contributing.md, "Add a transport".
 */
import type { CertificateFacts } from "../link/certificate.ts";
import type { Identity } from "../link/identity.ts";
import type { TrustList } from "../link/trust.ts";
import type { Log } from "../log.ts";
import type { ContentSource } from "../store/content.ts";

/** Where an uplink is. */
export type UplinkPhase = "connecting" | "up" | "down" | "stopped";

/**
 * An uplink's state, for the status record, heartbeats and metrics. A transport adds its
 * own facts (the NATS link: its brokers, its moves, its last error, `LinkState`); the
 * status record keeps them as they are.
 */
export interface UplinkState {
  phase: UplinkPhase;
  /** When it entered this phase (ISO). */
  since: string;
  /**
   * The certificate of the peer it came up on last, when it speaks TLS: when it expires
   * goes into the heartbeat, status and metrics.
   */
  certificate?: CertificateFacts & { url: string };
}

/** A declaration as it arrived: the exact bytes and the signature headers (unchecked). */
export interface Pushed {
  data: Uint8Array;
  /** The `Mesh-Signature` header, absent when the message had none. */
  signature?: string;
  /** The `Mesh-Key-Rotation` header, absent when the message had none. */
  rotation?: string;
  /** The `Mesh-Trust` header (a signed trust update, src/link/trust.ts), absent when none. */
  trust?: string;
  /**
   * Its sequence in the declaration stream, when the transport said it: the stream's own
   * order of what was stored, which tells a replica behind the others (an older sequence)
   * from an old declaration published again (a newer one).
   */
  seq?: number;
}

/** What the run loop hears from the uplink: declarations in, and its state. */
export interface UplinkHandlers {
  /** A declaration was pushed while the uplink was up. */
  onDeclaration(pushed: Pushed): void;
  /**
   * The uplink came up. `catchUp` is the node's last declaration the control plane holds
   * (possibly one already applied), absent when there is none.
   */
  onUp(event: { reconnect: boolean; catchUp?: Pushed }): void;
  /** The state changed. */
  onState?(state: UplinkState): void;
  log?: Log;
}

/** The way to the control plane, as the run loop, the outbox, heartbeats and the inventory use it. */
export interface Uplink {
  /** The current state (a copy). */
  readonly state: UplinkState;
  /** Where this node's declarations come from (the store records it as their origin). */
  readonly origin: string;
  /** Start connecting; the uplink then keeps itself up until close(). */
  start(): void;
  /** Send a JSON message, unacknowledged; false when not up or too large to be kept. */
  publish(kind: "report" | "heartbeat", message: unknown): boolean;
  /**
   * Deliver `body` (JSON text) with message id `id`, and wait until the control plane
   * stored it (`duplicate`: it had it already under that id); rejects with why not.
   */
  deliver(
    kind: "report" | "inventory",
    body: string,
    id: string,
    timeoutMs?: number,
  ): Promise<{ duplicate: boolean }>;
  /** Content by digest, read from the control plane while the uplink is up. */
  contentSource(): ContentSource;
  /** Whether the peer answers on the connection that is up, within `timeoutMs`. */
  roundTrip(timeoutMs: number): Promise<boolean>;
  /**
   * Whether a new connection can be made now (a rule may refuse new ones while the one
   * that is up lasts): undefined when it can, else why not.
   */
  freshConnection(timeoutMs: number): Promise<{ message: string } | undefined>;
  /** Trust `list` from the next connection on (a signed trust update the loop took). */
  setTrust(list: TrustList): void;
  /** Send what is buffered, within `timeoutMs`. */
  flush(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Open an uplink for the node `identity` names (not started): what the command line hands
 * the run loop. Rejects when it cannot (its key unreadable, say), with why.
 */
export type OpenUplink = (identity: Identity, handlers: UplinkHandlers) => Promise<Uplink>;
