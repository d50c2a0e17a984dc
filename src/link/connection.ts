/**
 * One NATS connection to the broker: TLS that trusts only the mesh's CA (the CAs of
 * the node's trust list: trust.ts) and requires the broker's certificate to name the
 * broker the node asked for (both checked during the handshake, before the CONNECT
 * that carries the signature), NKey auth, and the node's own inbox prefix. The
 * broker's own certificate is never pinned: it renews. A certificate refused is
 * explained (certificate.ts): expired and when, or issued by a CA the node does not
 * trust. No reconnect inside the client: the link's loop rebuilds connections itself
 * (src/link/link.ts). Everything that opens a connection to the broker goes through
 * here, so the transport can be swapped in one place.
 */
import {
  connect,
  type NatsConnection,
  nkeyAuthenticator,
  type TlsOptions,
} from "@nats-io/transport-node";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import { PROGRAM, VERSION } from "../version.ts";
import {
  type CertificateFacts,
  judgeCertificate,
  peerFacts,
  presentedCertificate,
} from "./certificate.ts";
import { classifyLinkError, hostPort, LinkError, NameMismatch } from "./errors.ts";
import { caFacts, type TrustList, usableCas } from "./trust.ts";

/** Where to connect and whom to trust. */
export interface BrokerTarget {
  url: string;
  /** The CAs the broker's certificate must chain to (the node's trust list). */
  trust: TrustList;
  /**
   * The SHA-256 fingerprint ("AB:CD:…") of the certificate a version 3 token named
   * for this broker: that certificate is accepted as before, and any other that chains
   * to a trusted CA and names the broker (a renewed one) as well.
   */
  pin?: string;
  /** Told the broker's certificate once it was accepted. */
  onCertificate?: (facts: CertificateFacts) => void;
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
      // One named server per connection: never follow the cluster's gossip to
      // servers the token did not name (link.ts moves between the token's).
      ignoreClusterUpdates: true,
      timeout: timing.timeoutMs,
      pingInterval: timing.pingIntervalMs,
      maxPingOut: timing.maxPingOut,
      inboxPrefix: auth.inboxPrefix,
      authenticator: nkeyAuthenticator(auth.seed),
      tls: brokerTls(target),
    });
  } catch (error) {
    const failure = classifyLinkError(error, { url: target.url, publicKey: auth.publicKey });
    throw failure.reason === "tls-ca" ? await explained(failure, target) : failure;
  }
}

/**
 * A refusal of the broker's certificate, explained: the certificate is read again on a
 * connection that sends nothing but the handshake, and judged (expired and when, not
 * yet valid, an unknown or withdrawn CA). The refusal as it was when it cannot be read.
 */
async function explained(failure: LinkError, target: BrokerTarget): Promise<LinkError> {
  const { host, port } = hostPort(target.url);
  const cert = await presentedCertificate(host, port);
  const verdict = cert && judgeCertificate(cert, `${host}:${port}`, target.trust);
  if (!verdict) return failure;
  return new LinkError(
    verdict.reason === "unknown-ca" ? "tls-ca" : "tls-expired",
    "broker",
    verdict.message,
    {
      hint: verdict.hint,
      cause: failure,
    },
  );
}

/**
 * Open one connection to the first of `brokers` that accepts it, trying them in
 * order from `first`; throws the last failure when none does (each is passed to
 * `onFailure`). `stopOn` ends the search at once (e.g. the broker refused the key:
 * every server of a cluster would say the same).
 */
export async function openAny(
  brokers: { url: string; pin?: string }[],
  trust: TrustList,
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
        { url: broker.url, trust, ...(broker.pin ? { pin: broker.pin } : {}) },
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
 * TLS options that trust only the CAs of `target.trust` usable now, and then require
 * the certificate to name the broker of `target.url` (its host, a DNS name or an
 * address). Deno's node:tls calls checkServerIdentity only after the chain verified
 * against `ca` (LAB-NOTES.md), so both checks hold, and it passes the name it was
 * given, not the URL's (the NATS client upgrades a socket it opened: "localhost" for
 * an address), so the name is taken from the URL here. Throws a LinkError when no
 * trusted CA is usable now (each expired, or past its `until`).
 */
export function brokerTls(target: BrokerTarget, now: number = Date.now()): TlsOptions {
  const cas = usableCas(target.trust, now);
  if (cas.length === 0) {
    const ended = target.trust.cas.map((ca) => {
      const f = caFacts(ca, now);
      return `"${f.subject}" ${f.until === f.ends ? "was trusted until" : "expired at"} ${f.ends}`;
    }).join("; ");
    throw new LinkError(
      "tls-expired",
      "node",
      `TLS: no CA this node trusts is valid now (${ended}; this node's clock reads ${
        new Date(now).toISOString()
      }): it cannot check any broker's certificate`,
      {
        hint: "if this node's clock is wrong, set it right; otherwise enrol again with a new " +
          "token (enrol --replace), which carries the mesh's current CA",
      },
    );
  }
  const { host } = hostPort(target.url);
  return {
    ca: cas,
    // Honoured by node:tls, not listed in the client's type.
    checkServerIdentity: (_given: string, cert: PeerCertificate) => {
      if (target.pin === undefined || cert.fingerprint256 !== target.pin) {
        const wrong = checkServerIdentity(host, cert);
        if (wrong) return new NameMismatch(host, wrong.message);
      }
      target.onCertificate?.(peerFacts(cert));
      return undefined;
    },
  } as unknown as TlsOptions;
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
