/**
 * What both of the link's connection modules share (connection.ts on node:net and node:tls,
 * the link's; connection_deno.ts on Deno's own sockets, the bench's variant), and nothing
 * that loads either socket layer: who connects, where to and whom to trust, the timing,
 * the JWT authenticator, the CAs usable now, a refused certificate explained, and the
 * search for the first broker that accepts.
 */
import type { Authenticator, ConnectionOptions, NatsConnection } from "@nats-io/nats-core";
import { PROGRAM, VERSION } from "../version.ts";
import { type CertificateFacts, judgeCertificate, presentedCertificate } from "./certificate.ts";
import { classifyLinkError, hostPort, LinkError } from "./errors.ts";
import { caFacts, type TrustList, usableCas } from "./trust.ts";
import { signerOf } from "./_nkeys.ts";
import { base64url } from "./_base64url.ts";

/** Who connects: a user's seed and its JWT (never sent: the JWT and a signature are). */
export interface ConnectionAuth {
  seed: Uint8Array;
  /** The user's JWT (signed by its account): what the broker lets this key do. */
  jwt: string;
  publicKey: string;
  inboxPrefix: string;
  name: string;
}

/**
 * The client's authenticator for a user JWT: the JWT, the key's public part and its
 * signature of the server's nonce, made by the runtime's Ed25519 (`_nkeys.ts`: the NATS
 * client's own signs with nkeys.js, 25 ms a connection here).
 */
export function jwtAuth(jwt: string, seed: Uint8Array): Authenticator {
  const signer = signerOf(seed);
  return (nonce?: string) => ({
    jwt,
    nkey: signer.publicKey,
    sig: nonce ? base64url(signer.sign(new TextEncoder().encode(nonce))) : "",
  });
}

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
 * A connection's options but its TLS: to the one broker of `target`, named after this
 * program and `auth`, signed in with `auth`'s JWT, with `timing`'s pings, and no reconnect
 * inside the client (the link's loop rebuilds connections itself).
 */
export function connectOptions(
  target: BrokerTarget,
  auth: ConnectionAuth,
  timing: ConnectionTiming,
): ConnectionOptions {
  return {
    servers: target.url,
    name: `${PROGRAM} ${VERSION} ${auth.name}`,
    reconnect: false,
    // One named server per connection: never follow the cluster's gossip to servers the
    // token did not name (link.ts moves between the token's).
    ignoreClusterUpdates: true,
    timeout: timing.timeoutMs,
    pingInterval: timing.pingIntervalMs,
    maxPingOut: timing.maxPingOut,
    inboxPrefix: auth.inboxPrefix,
    authenticator: jwtAuth(auth.jwt, auth.seed),
  };
}

/**
 * The CAs of `trust` usable at `now`; throws a LinkError when none is (each expired, or past
 * its `until`): then no broker's certificate can be checked.
 */
export function trustedCas(trust: TrustList, now: number): string[] {
  const cas = usableCas(trust, now);
  if (cas.length > 0) return cas;
  const ended = trust.cas.map((ca) => {
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

/**
 * A refusal of the broker's certificate, explained: the certificate is read again on a
 * connection that sends nothing but the handshake, and judged (expired and when, not
 * yet valid, an unknown or withdrawn CA). The refusal as it was when it cannot be read.
 */
export async function explained(failure: LinkError, target: BrokerTarget): Promise<LinkError> {
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

/** A broker as a token names it: its URL, and the certificate a version 3 token pinned. */
export interface BrokerAddress {
  url: string;
  pin?: string;
}

/** How the search for a broker that accepts goes (see {@link firstAccepting}). */
export interface OpenAnyOptions {
  timing?: ConnectionTiming;
  first?: number;
  onFailure?: (url: string, error: LinkError) => void;
  stopOn?: (error: LinkError) => boolean;
}

/**
 * Open one connection with `open` to the first of `brokers` that accepts it, trying them in
 * order from `first`; throws the last failure when none does (each is passed to
 * `onFailure`); `stopOn` ends the search at once.
 */
export async function firstAccepting(
  open: (
    target: BrokerTarget,
    auth: ConnectionAuth,
    timing?: ConnectionTiming,
  ) => Promise<NatsConnection>,
  brokers: BrokerAddress[],
  trust: TrustList,
  auth: ConnectionAuth,
  options: OpenAnyOptions = {},
): Promise<{ nc: NatsConnection; index: number }> {
  let last: LinkError | undefined;
  for (let i = 0; i < brokers.length; i++) {
    const index = ((options.first ?? 0) + i) % brokers.length;
    const broker = brokers[index];
    try {
      const nc = await open(
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
