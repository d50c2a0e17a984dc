/**
 * connection.ts on Deno's own sockets (deno_transport.ts) instead of node:net and
 * node:tls: the same exports the link and enrolment use (`openConnection`, `openAny`,
 * `CONNECTION_TIMING`), the same LinkErrors. Not the link's transport: the bench builds
 * the host with this module in place of connection.ts (`bench:link --transport deno`) to
 * measure what leaving the node layer's sockets out of `run` is worth (issue 37, item 2;
 * tests/bench/RESULTS.md says what it measured and why it was not kept).
 *
 * What it keeps: TLS under the CAs of the node's trust list usable now and the broker's
 * name checked by the TLS layer (rustls, during the handshake, before the CONNECT); a
 * refused certificate explained as connection.ts explains it (certificate.ts, which then
 * loads node:tls for that one probe); the JWT and the nonce's signature; the inbox prefix;
 * no reconnect inside the client (the link's loop reconnects).
 * What it cannot keep on Deno 2.9.6: "only the mesh's CA" (Deno adds `caCerts` to the
 * runtime's own roots, Mozilla's unless DENO_TLS_CA_STORE says otherwise), the broker's
 * certificate in the link's state (Deno's TLS shows nothing of the peer's certificate:
 * no expiry for the heartbeat, `status` and the metrics), and a version 3 token's pin
 * (a pinned certificate must then name the broker as well).
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { denoConnect, type DenoTlsOptions } from "./deno_transport.ts";
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
 * Open one connection as the holder of `auth`'s seed, or throw a LinkError naming the
 * side and the reason.
 */
export async function openConnection(
  target: BrokerTarget,
  auth: ConnectionAuth,
  timing: ConnectionTiming = CONNECTION_TIMING,
): Promise<NatsConnection> {
  try {
    return await denoConnect({
      ...connectOptions(target, auth, timing),
      tls: denoTls(target),
    });
  } catch (error) {
    const failure = classifyLinkError(denoFailure(error, target.url), {
      url: target.url,
      publicKey: auth.publicKey,
    });
    throw failure.reason === "tls-ca" ? await explained(failure, target) : failure;
  }
}

/** As connection.ts's: the first of `brokers` that accepts, from `first` on. */
export function openAny(
  brokers: BrokerAddress[],
  trust: TrustList,
  auth: ConnectionAuth,
  options: OpenAnyOptions = {},
): Promise<{ nc: NatsConnection; index: number }> {
  return firstAccepting(openConnection, brokers, trust, auth, options);
}

/**
 * The transport's TLS for `target`: the CAs of its trust list usable now and the URL's host
 * as the name the certificate must carry. Throws a LinkError when no trusted CA is usable.
 */
export function denoTls(target: BrokerTarget, now: number = Date.now()): DenoTlsOptions {
  const cas = trustedCas(target.trust, now);
  return { caCerts: cas, hostname: hostPort(target.url).host };
}

/**
 * A failure of Deno's sockets in the words classifyLinkError knows (node's codes), so that
 * both transports fail alike: refused, reset, unreachable, a name that does not resolve,
 * and rustls's verdicts on the certificate (not for the name: `tls-name`; anything else
 * about the chain: `tls-ca`, explained afterwards by reading the certificate).
 */
export function denoFailure(error: unknown, url: string): unknown {
  const message = String((error as Error)?.message ?? error);
  const as = (code: string) => Object.assign(new Error(message, { cause: error }), { code });
  if (error instanceof Deno.errors.ConnectionRefused) return as("ECONNREFUSED");
  if (error instanceof Deno.errors.ConnectionReset) return as("ECONNRESET");
  if (error instanceof Deno.errors.ConnectionAborted) return as("ECONNRESET");
  if (error instanceof Deno.errors.BrokenPipe) return as("EPIPE");
  // The server closed the socket in the TLS handshake (node:tls says ECONNRESET).
  if (error instanceof Deno.errors.UnexpectedEof || /unexpected end of file/i.test(message)) {
    return as("ECONNRESET");
  }
  if (error instanceof Deno.errors.TimedOut) return as("ETIMEDOUT");
  if (/failed to lookup address|Name or service not known|No address associated/i.test(message)) {
    return as("ENOTFOUND");
  }
  if (/network is unreachable/i.test(message)) return as("ENETUNREACH");
  if (/no route to host/i.test(message)) return as("EHOSTUNREACH");
  const peer = /invalid peer certificate: (.*)$/i.exec(message);
  if (peer) {
    if (/NotValidForName|not valid for name/i.test(peer[1])) {
      return new NameMismatch(hostPort(url).host, peer[1]);
    }
    return as("UNABLE_TO_VERIFY_LEAF_SIGNATURE");
  }
  return error;
}
