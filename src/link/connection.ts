/**
 * One NATS connection to the broker: TLS that trusts only the enrolled CA and
 * pins the broker certificate's SHA-256 fingerprint (both checked during the
 * handshake, before the CONNECT that carries the signature), NKey auth, and the
 * node's own inbox prefix. No reconnect inside the client: the link's loop
 * rebuilds connections itself (src/link/link.ts).
 */
import {
  connect,
  type NatsConnection,
  nkeyAuthenticator,
  type TlsOptions,
} from "@nats-io/transport-node";
import type { PeerCertificate } from "node:tls";
import { PROGRAM, VERSION } from "../version.ts";
import { classifyLinkError, LinkError, PinMismatch } from "./errors.ts";

/** Where to connect and whom to trust. */
export interface BrokerTarget {
  url: string;
  /** CA certificate (PEM) the broker's certificate must verify against. */
  ca: string;
  /** SHA-256 fingerprint ("AB:CD:…") the broker's certificate must have. */
  pin: string;
}

/** Timing of one connection. */
export interface ConnectionTiming {
  /** Handshake timeout (ms). */
  timeoutMs: number;
  /** Client ping interval (ms); with maxPingOut it bounds how long a dead broker goes unnoticed. */
  pingIntervalMs: number;
  maxPingOut: number;
}

/** Defaults: a dead broker is noticed within about 30 s (3 pings 10 s apart). */
export const CONNECTION_TIMING: ConnectionTiming = {
  timeoutMs: 10_000,
  pingIntervalMs: 10_000,
  maxPingOut: 2,
};

/**
 * Open one connection as the holder of `seed`, or throw a LinkError naming the
 * side and the reason.
 */
export async function openConnection(
  target: BrokerTarget,
  auth: { seed: Uint8Array; publicKey: string; inboxPrefix: string; name: string },
  timing: ConnectionTiming = CONNECTION_TIMING,
): Promise<NatsConnection> {
  guardOrphanTlsErrors();
  try {
    return await connect({
      servers: target.url,
      name: `${PROGRAM} ${VERSION} ${auth.name}`,
      reconnect: false,
      // One pinned server per connection: never follow the cluster's gossip to
      // servers the token did not name (link.ts moves between the token's).
      ignoreClusterUpdates: true,
      timeout: timing.timeoutMs,
      pingInterval: timing.pingIntervalMs,
      maxPingOut: timing.maxPingOut,
      inboxPrefix: auth.inboxPrefix,
      authenticator: nkeyAuthenticator(auth.seed),
      tls: pinnedTls(target),
    });
  } catch (error) {
    throw classifyLinkError(error, { url: target.url, publicKey: auth.publicKey });
  }
}

/**
 * Open one connection to the first of `brokers` that accepts it, trying them in
 * order from `first`; throws the last failure when none does (each is passed to
 * `onFailure`). `stopOn` ends the search at once (e.g. the broker refused the key:
 * every server of a cluster would say the same).
 */
export async function openAny(
  brokers: { url: string; pin: string }[],
  ca: string,
  auth: { seed: Uint8Array; publicKey: string; inboxPrefix: string; name: string },
  options: {
    timing?: ConnectionTiming;
    first?: number;
    onFailure?: (url: string, error: LinkError) => void;
    stopOn?: (error: LinkError) => boolean;
  } = {},
): Promise<{ nc: NatsConnection; index: number }> {
  let last: LinkError | undefined;
  for (let i = 0; i < brokers.length; i++) {
    const index = ((options.first ?? 0) + i) % brokers.length;
    const broker = brokers[index];
    try {
      const nc = await openConnection(
        { url: broker.url, pin: broker.pin, ca },
        auth,
        options.timing,
      );
      return { nc, index };
    } catch (error) {
      last = classifyLinkError(error, { url: broker.url, publicKey: auth.publicKey });
      options.onFailure?.(broker.url, last);
      if (options.stopOn?.(last)) throw last;
    }
  }
  throw last ?? new LinkError("protocol", "node", "no broker to connect to");
}

/**
 * TLS options that trust only `ca` and then require the pinned fingerprint.
 * Deno's node:tls calls checkServerIdentity only after the chain verified
 * against `ca` (LAB-NOTES.md), so both checks hold; the host name check is
 * replaced by the pin, which is stricter.
 */
export function pinnedTls(target: BrokerTarget): TlsOptions {
  return {
    ca: target.ca,
    // Honoured by node:tls, not listed in the client's type.
    checkServerIdentity: (_host: string, cert: PeerCertificate) =>
      cert.fingerprint256 === target.pin
        ? undefined
        : new PinMismatch(cert.fingerprint256, target.pin),
  } as TlsOptions;
}

let guarded = false;

/**
 * Keep the process alive through a TLS error on a socket nobody listens to any more.
 * The NATS client removes its listeners from a TLS socket between the handshake and
 * its own handlers, and again when it closes one; a TLS record that arrives then (a
 * broker closing connections as it reloads its configuration writes one) makes Deno's
 * node:tls throw "cannot decrypt peer's message" with no listener to take it, an
 * uncaught error that ended `enrol` (seen in CI's broker-failover) and would end `run`.
 * That socket is already given up by its connection, which times out or has closed:
 * the error is said on stderr and dropped. Any other uncaught error still ends the
 * process.
 */
export function guardOrphanTlsErrors(): void {
  if (guarded) return;
  guarded = true;
  globalThis.addEventListener("error", (event) => {
    const error = (event as ErrorEvent).error as { message?: unknown; stack?: unknown } | null;
    if (!isOrphanTlsError(error)) return;
    event.preventDefault();
    console.error(
      `link: a TLS error on a connection already given up was ignored: ${String(error?.message)}`,
    );
  });
}

/** An error thrown by node:tls's socket wrapper itself (no listener took it). */
export function isOrphanTlsError(error: { message?: unknown; stack?: unknown } | null): boolean {
  return typeof error?.stack === "string" &&
    error.stack.includes("ext:deno_node/internal_binding/tls_wrap.ts");
}
