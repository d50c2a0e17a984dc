/**
 * What a node trusts a broker's certificate by (DESIGN.md §7): the mesh's CA, never a
 * leaf. The enrolment token carries the first CA; the control plane moves the node on
 * to another through a **trust update**, signed by its declaration signing key and sent
 * with a declaration in the header `Mesh-Trust`:
 *
 *     v1 key=<O…> sig=<base64url> body=<base64url of the JSON below>
 *
 *     { "serial": 2, "issued": "<ISO time>",
 *       "cas": [ { "pem": "<old CA>", "until": "<ISO time>" }, { "pem": "<new CA>" } ] }
 *
 * The signature is over `nox-mesh-host trust v1\n\n` followed by the body's bytes, so a
 * signature made for a declaration or a key rotation is none for a trust update. A node
 * takes an update only with a higher serial than the one it holds (the token's CA is
 * serial 0): an older list, replayed by whoever carries the messages, cannot bring back
 * a CA a later update dropped. A CA is used while its own certificate is valid and, when
 * the list gives an `until`, until then: the new CA beside the old until a date, or until
 * a later update leaves the old one out.
 */
import { X509Certificate } from "node:crypto";
import { fromPublic, type KeyPair } from "@nats-io/nkeys";
import { base64url, unbase64url } from "./_base64url.ts";
import { isSigningKey } from "./signature.ts";

/** The NATS header that carries a trust update. */
export const TRUST_HEADER = "Mesh-Trust";

/** The first line of a signed trust update statement. */
export const TRUST_PURPOSE = "nox-mesh-host trust v1";

/** The most CAs a trust list holds. */
export const MAX_TRUSTED_CAS = 8;

/** One CA a node trusts: its certificate, and the time it stops being trusted, if any. */
export interface TrustedCa {
  pem: string;
  /** ISO time: trusted until then (a rotation's overlap), whatever the certificate says. */
  until?: string;
}

/** What a node trusts: the token's CA (serial 0), or the last trust update it took. */
export interface TrustList {
  serial: number;
  /** When the control plane issued it (absent for the token's CA). */
  issued?: string;
  cas: TrustedCa[];
}

/** What a node knows of one trusted CA, for the heartbeat, status and metrics. */
export interface CaFacts {
  subject: string;
  /** SHA-256 fingerprint of the CA certificate, "AB:CD:…". */
  fingerprint: string;
  /** When the CA's certificate expires (ISO). */
  notAfter: string;
  /** When the trust list stops trusting it, if it says (ISO). */
  until?: string;
  /** The earlier of the two: when this node stops using it. */
  ends: string;
  /** Whole days from `now` to `ends` (negative once past). */
  daysLeft: number;
  /** Whether it verifies a broker now. */
  usable: boolean;
}

const DAY_MS = 86_400_000;

/** The facts of one trusted CA at `now`. */
export function caFacts(ca: TrustedCa, now: number = Date.now()): CaFacts {
  const x = new X509Certificate(ca.pem);
  const notAfter = new Date(x.validTo).toISOString();
  const ends = ca.until && Date.parse(ca.until) < Date.parse(notAfter) ? ca.until : notAfter;
  return {
    subject: x.subject.replace(/\n/g, ", "),
    fingerprint: x.fingerprint256,
    notAfter,
    ...(ca.until ? { until: ca.until } : {}),
    ends,
    daysLeft: Math.floor((Date.parse(ends) - now) / DAY_MS),
    usable: Date.parse(x.validFrom) <= now && now < Date.parse(ends),
  };
}

/** The trust list of a node that trusts one CA (the token's: serial 0). */
export function caTrust(pem: string): TrustList {
  return { serial: 0, cas: [{ pem }] };
}

/** The certificates of the CAs that verify a broker at `now` (PEM). */
export function usableCas(list: TrustList, now: number = Date.now()): string[] {
  return list.cas.filter((ca) => caFacts(ca, now).usable).map((ca) => ca.pem);
}

/** Whole days from `now` to an ISO time (negative once past). */
export function daysLeft(iso: string, now: number = Date.now()): number {
  return Math.floor((Date.parse(iso) - now) / DAY_MS);
}

/** Why a trust update is not taken. */
export interface TrustProblem {
  problem: string;
}

/** The exact bytes signed for a trust update's body. */
export function trustStatement(body: Uint8Array): Uint8Array {
  const head = new TextEncoder().encode(`${TRUST_PURPOSE}\n\n`);
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

/**
 * The `Mesh-Trust` header value for `list`, signed by `key` (the control plane's side).
 *
 * @example
 * ```ts
 * headers.set(TRUST_HEADER, signTrust(key, { serial: 2, cas: [{ pem: newCa }] }));
 * ```
 */
export function signTrust(key: KeyPair, list: TrustList): string {
  const body = new TextEncoder().encode(JSON.stringify(list));
  const sig = base64url(key.sign(trustStatement(body)));
  return `v1 key=${key.getPublicKey()} sig=${sig} body=${base64url(body)}`;
}

/**
 * The trust list `header` carries when it is signed by `signer` (the key that signed the
 * declaration it came with) and well formed, or what is wrong. Never throws.
 */
export function verifyTrust(header: string, signer: string): TrustList | TrustProblem {
  const [version, ...fields] = header.trim().split(" ");
  if (version !== "v1") {
    return { problem: `the ${TRUST_HEADER} header is not "v1 key=… sig=… body=…"` };
  }
  const values = new Map<string, string>();
  for (const field of fields) {
    const at = field.indexOf("=");
    const name = field.slice(0, at);
    if (at < 1 || !["key", "sig", "body"].includes(name) || values.has(name)) {
      return {
        problem: `the ${TRUST_HEADER} header has a malformed field "${field.slice(0, 40)}"`,
      };
    }
    values.set(name, field.slice(at + 1));
  }
  const key = values.get("key") ?? "";
  if (!isSigningKey(key)) return { problem: `the ${TRUST_HEADER} header names no signing key` };
  if (key !== signer) {
    return {
      problem: `the trust update is signed by ${key}, not by ${signer}, the key that signed ` +
        "the declaration it came with",
    };
  }
  let body: Uint8Array;
  let sig: Uint8Array;
  try {
    body = unbase64url(values.get("body") ?? "");
    sig = unbase64url(values.get("sig") ?? "");
  } catch {
    return { problem: `the ${TRUST_HEADER} header's body or signature is not base64url` };
  }
  let verified = false;
  try {
    verified = sig.length === 64 && fromPublic(key).verify(trustStatement(body), sig);
  } catch { /* not verified */ }
  if (!verified) {
    return { problem: `the trust update's signature does not verify against ${key}` };
  }
  return parseTrustList(new TextDecoder().decode(body));
}

/** A trust list from its JSON text, checked, or what is wrong with it. */
export function parseTrustList(text: string): TrustList | TrustProblem {
  let data: { serial?: unknown; issued?: unknown; cas?: unknown };
  try {
    data = JSON.parse(text);
  } catch {
    return { problem: "the trust list is not JSON" };
  }
  if (!Number.isSafeInteger(data?.serial) || (data.serial as number) < 0) {
    return { problem: "the trust list has no serial (a whole number)" };
  }
  if (data.issued !== undefined && typeof data.issued !== "string") {
    return { problem: "the trust list's issued time is not a string" };
  }
  if (!Array.isArray(data.cas) || data.cas.length === 0 || data.cas.length > MAX_TRUSTED_CAS) {
    return { problem: `the trust list names 1 to ${MAX_TRUSTED_CAS} CAs` };
  }
  const cas: TrustedCa[] = [];
  for (const [i, ca] of data.cas.entries()) {
    const { pem, until } = (ca ?? {}) as { pem?: unknown; until?: unknown };
    if (typeof pem !== "string" || !pem.includes("-----BEGIN CERTIFICATE-----")) {
      return { problem: `CA ${i + 1} of the trust list is not a PEM certificate` };
    }
    try {
      const x = new X509Certificate(pem);
      if (!x.ca) return { problem: `CA ${i + 1} of the trust list is not a CA certificate` };
    } catch (error) {
      return {
        problem: `CA ${i + 1} of the trust list is unreadable: ${(error as Error).message}`,
      };
    }
    if (until !== undefined && (typeof until !== "string" || Number.isNaN(Date.parse(until)))) {
      return { problem: `CA ${i + 1} of the trust list has an "until" that is not a time` };
    }
    cas.push({ pem, ...(until === undefined ? {} : { until }) });
  }
  return {
    serial: data.serial as number,
    ...(data.issued === undefined ? {} : { issued: data.issued as string }),
    cas,
  };
}

/** Whether a verify result is a problem. */
export function isTrustProblem(result: TrustList | TrustProblem): result is TrustProblem {
  return "problem" in result;
}

/**
 * When what the link's TLS rests on expires, for the heartbeat, `status` and the metrics
 * file (so monitoring warns before a node is cut off): the broker's certificate the link
 * came up with last, and each trusted CA.
 */
export interface TlsExpiry {
  /** The broker's certificate seen last, or null before the link first came up. */
  broker:
    | { url: string; subject: string; issuer: string; notAfter: string; daysLeft: number }
    | null;
  /** The trust list's serial (0: the token's CA). */
  trustSerial: number;
  cas: { subject: string; fingerprint: string; ends: string; daysLeft: number; usable: boolean }[];
}

/** The TLS expiry facts of `trust` and the certificate `seen` (link state) at `now`. */
export function tlsExpiry(
  trust: TrustList,
  seen: { url: string; subject: string; issuer: string; notAfter: string } | undefined,
  now: number = Date.now(),
): TlsExpiry {
  return {
    broker: seen
      ? {
        url: seen.url,
        subject: seen.subject,
        issuer: seen.issuer,
        notAfter: seen.notAfter,
        daysLeft: daysLeft(seen.notAfter, now),
      }
      : null,
    trustSerial: trust.serial,
    cas: trust.cas.map((ca) => {
      const f = caFacts(ca, now);
      return {
        subject: f.subject,
        fingerprint: f.fingerprint,
        ends: f.ends,
        daysLeft: f.daysLeft,
        usable: f.usable,
      };
    }),
  };
}
