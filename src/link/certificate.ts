/**
 * The broker's certificate, as the node judges it (DESIGN.md §7): it must chain to a CA
 * the node trusts and name the broker the node asked for. When the TLS layer refuses it,
 * it says only "unable to verify the first certificate" (Deno's node:tls, for an expired
 * certificate and an unknown CA alike): the node then looks at the certificate itself,
 * on a connection of its own that sends nothing but the TLS handshake (the NATS server
 * speaks first, in plain text, then the client starts TLS), and says what is wrong:
 * expired and when, not valid yet, or issued by a CA it does not (or no longer) trust.
 */
import { X509Certificate } from "node:crypto";
import type * as tls from "node:tls";
import { caFacts, type TrustList } from "./trust.ts";

/** What the node saw of a broker's certificate (kept in the link's state). */
export interface CertificateFacts {
  subject: string;
  issuer: string;
  /** SHA-256 fingerprint, "AB:CD:…". */
  fingerprint: string;
  notBefore: string;
  notAfter: string;
}

/** The facts of a peer certificate as node:tls gives it. */
export function peerFacts(cert: tls.PeerCertificate): CertificateFacts {
  const name = (n: unknown) =>
    Object.entries((n ?? {}) as Record<string, unknown>).map(([k, v]) => `${k}=${v}`).join(", ");
  return {
    subject: name(cert.subject),
    issuer: name(cert.issuer),
    fingerprint: cert.fingerprint256,
    notBefore: new Date(cert.valid_from).toISOString(),
    notAfter: new Date(cert.valid_to).toISOString(),
  };
}

/**
 * The certificate the NATS server at `host:port` presents (DER), read without
 * verifying it and without sending anything but the TLS handshake; undefined when it
 * cannot be read within `timeoutMs`.
 */
export async function presentedCertificate(
  host: string,
  port: number,
  timeoutMs = 5000,
): Promise<X509Certificate | undefined> {
  // Loaded for this probe only: a link on Deno's own sockets (connection_deno.ts) loads no
  // node:net or node:tls until a certificate is refused.
  const [net, tls] = await Promise.all([import("node:net"), import("node:tls")]);
  return new Promise((resolve) => {
    let done = false;
    let secure: tls.TLSSocket | undefined;
    const socket = net.connect(port, host);
    const finish = (value: X509Certificate | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      secure?.destroy();
      socket.destroy();
      resolve(value);
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    socket.on("error", () => finish(undefined));
    let seen = "";
    const onData = (chunk: Uint8Array) => {
      seen += new TextDecoder().decode(chunk);
      if (!seen.includes("\r\n")) return;
      socket.off("data", onData);
      // Only to read the certificate: nothing is sent over this connection. (An address
      // is no server name: node:tls refuses one as `servername`.)
      const servername = net.isIP(host) ? undefined : host;
      try {
        secure = tls.connect({ socket, rejectUnauthorized: false, servername }, () => {
          const raw = secure!.getPeerCertificate()?.raw;
          try {
            finish(raw ? new X509Certificate(raw) : undefined);
          } catch {
            finish(undefined);
          }
        });
        secure.on("error", () => finish(undefined));
      } catch {
        finish(undefined);
      }
    };
    socket.on("data", onData);
  });
}

/** What is wrong with a certificate that did not verify, in words a person can act on. */
export interface CertificateVerdict {
  reason: "expired" | "not-yet-valid" | "unknown-ca" | "withdrawn-ca";
  message: string;
  hint: string;
}

/**
 * Why `cert` (presented by `where`) does not verify against `trust` at `now`: expired,
 * not yet valid, issued by a CA this node no longer trusts, or by one it never did.
 * Undefined when none of these holds (the refusal had another cause).
 *
 * Long because: each way a broker's certificate can be refused, tried in the order a person would
 * check them, each with its own message.
 */
export function judgeCertificate(
  cert: X509Certificate,
  where: string,
  trust: TrustList,
  now: number = Date.now(),
): CertificateVerdict | undefined {
  const subject = cert.subject.replace(/\n/g, ", ");
  const clock = `this node's clock reads ${new Date(now).toISOString()}`;
  const issuers = trust.cas.map((ca) => ({ ca, x: new X509Certificate(ca.pem) })).filter((
    { x },
  ) => {
    try {
      return cert.checkIssued(x) && cert.verify(x.publicKey);
    } catch {
      return false;
    }
  });
  const usable = issuers.find(({ ca }) => caFacts(ca, now).usable);
  if (usable) {
    const notAfter = new Date(cert.validTo).toISOString();
    const notBefore = new Date(cert.validFrom).toISOString();
    if (now >= Date.parse(notAfter)) {
      return {
        reason: "expired",
        message: `TLS: the broker at ${where} presented a certificate (${subject}) that ` +
          `expired at ${notAfter}; ${clock}; refused before sending any credential`,
        hint: "the broker's certificate must be renewed (under the same CA: no action is " +
          "needed on the nodes); if it was, this node's clock may be wrong",
      };
    }
    if (now < Date.parse(notBefore)) {
      return {
        reason: "not-yet-valid",
        message: `TLS: the broker at ${where} presented a certificate (${subject}) that is ` +
          `valid only from ${notBefore}; ${clock}; refused before sending any credential`,
        hint: "this node's clock is probably behind: set it right (NTP)",
      };
    }
    return undefined;
  }
  if (issuers.length > 0) {
    const facts = caFacts(issuers[0].ca, now);
    const why = facts.until && Date.parse(facts.until) <= Date.parse(facts.notAfter)
      ? `was trusted until ${facts.until} (the mesh's CA was rotated)`
      : `expired at ${facts.notAfter}`;
    return {
      reason: "withdrawn-ca",
      message: `TLS: the broker at ${where} presented a certificate (${subject}) issued by ` +
        `the CA "${facts.subject}", which ${why}; ${clock}; refused before sending any ` +
        "credential",
      hint: facts.until
        ? "the broker still uses a certificate of the old CA: renew it under the new CA"
        : "the mesh's CA must be renewed or rotated; if this node's clock is wrong, set it right",
    };
  }
  const facts = trust.cas.map((ca) => caFacts(ca, now));
  const trusted = facts.map((f) =>
    `"${f.subject}" (${f.usable ? `until ${f.ends}` : `not since ${f.ends}`})`
  ).join(", ");
  const issuer = cert.issuer.replace(/\n/g, ", ");
  const namesake = facts.some((f) => f.subject === issuer)
    ? " (a CA of that name, but not the one this node trusts: another key)"
    : "";
  return {
    reason: "unknown-ca",
    message: `TLS: the broker at ${where} presented a certificate (${subject}) issued by ` +
      `"${issuer}"${namesake}, a CA this node does not trust; it trusts ` +
      `${trusted}; refused before sending any credential`,
    hint: "if the mesh's CA was rotated while this node was away (past the overlap), enrol " +
      "again with a new token (enrol --replace); otherwise something else answers at that address",
  };
}
