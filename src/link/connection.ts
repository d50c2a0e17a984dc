/**
 * One NATS connection to the broker: TLS that trusts only the mesh's CA (the CAs of
 * the node's trust list: trust.ts) and requires the broker's certificate to name the
 * broker the node asked for (both checked during the handshake, before the CONNECT
 * that carries the signature), the user's JWT and its key's signature of the broker's
 * nonce (NATS's operator mode: the JWT says what the key may do), and the node's own
 * inbox prefix. The
 * broker's own certificate is never pinned: it renews. A certificate refused is
 * explained (certificate.ts): expired and when, or issued by a CA the node does not
 * trust. No reconnect inside the client: the link's loop rebuilds connections itself
 * (src/link/link.ts). Everything that opens a connection to the broker goes through
 * here, so the transport can be swapped in one place.
 */
import { connect, type NatsConnection, type TlsOptions } from "@nats-io/transport-node";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import { peerFacts } from "./certificate.ts";
import { classifyLinkError, hostPort, NameMismatch } from "./errors.ts";
import type { TrustList } from "./trust.ts";
import {
  type BrokerAddress,
  type BrokerTarget,
  CONNECTION_TIMING,
  type ConnectionAuth,
  type ConnectionTiming,
  connectOptions,
  explained,
  firstAccepting,
  type OpenAnyOptions,
  trustedCas,
} from "./_connect.ts";

export {
  type BrokerTarget,
  CONNECTION_TIMING,
  type ConnectionAuth,
  type ConnectionTiming,
  jwtAuth,
} from "./_connect.ts";

/**
 * Open one connection as the holder of `seed`, or throw a LinkError naming the
 * side and the reason.
 */
export async function openConnection(
  target: BrokerTarget,
  auth: ConnectionAuth,
  timing: ConnectionTiming = CONNECTION_TIMING,
): Promise<NatsConnection> {
  guardOrphanTlsErrors();
  try {
    return await connect({
      ...connectOptions(target, auth, timing),
      tls: brokerTls(target),
    });
  } catch (error) {
    const failure = classifyLinkError(error, { url: target.url, publicKey: auth.publicKey });
    throw failure.reason === "tls-ca" ? await explained(failure, target) : failure;
  }
}

/**
 * Open one connection to the first of `brokers` that accepts it, trying them in
 * order from `first`; throws the last failure when none does (each is passed to
 * `onFailure`). `stopOn` ends the search at once (e.g. the broker refused the key:
 * every server of a cluster would say the same).
 */
export function openAny(
  brokers: BrokerAddress[],
  trust: TrustList,
  auth: ConnectionAuth,
  options: OpenAnyOptions = {},
): Promise<{ nc: NatsConnection; index: number }> {
  return firstAccepting(openConnection, brokers, trust, auth, options);
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
  const cas = trustedCas(target.trust, now);
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
