/**
 * The enrolment token (version 5): base64url (no padding) of a JSON object
 *
 *   { "v": 5, "node": "laptop-7",
 *     "brokers": [ "tls://nats-1.example:4222", … ],
 *     "ca": "-----BEGIN CERTIFICATE-----…" (the mesh's CA: the trust anchor),
 *     "join": "SU…" (a one-time NKey user seed), "jwt": "eyJ…" (that user's JWT,
 *     signed by the mesh's join account), "signer": "O…" (the control plane's
 *     signing public key), "expires": "2026-01-01T00:00:00Z" }
 *
 * `brokers` lists the servers of one NATS cluster (1 to 16). Before any credential is
 * sent to a server, its certificate must chain to `ca` and name that server (the host
 * of its URL): no server's own certificate is pinned, so a renewed one is taken without
 * anything done on the node, and the CA itself moves on by a signed trust update over
 * the link (trust.ts). The node connects to any of them and moves to the next when one
 * goes away (link.ts). `join` and `jwt` are a one-time user the control plane minted for
 * exactly one enrolment of `node` (NATS's operator mode: the JWT says what the key may
 * do, no server's configuration names it); it may only ask to enrol and hear the answer.
 * `signer` is pinned at enrolment: only declarations it signed are applied
 * (signature.ts). Version 1 had no `signer`, version 2 carried one broker, version 3
 * pinned each broker's own certificate, version 4 carried a join key the broker had to
 * hold in its configuration; each is refused with what to do. Unknown fields and
 * versions are refused.
 */
import * as v from "valibot";
import { X509Certificate } from "node:crypto";
import { fromSeed } from "@nats-io/nkeys";
import { NODE_ID } from "../declaration/fields.ts";
import { TokenError } from "./errors.ts";
import { base64url, unbase64url } from "./_base64url.ts";
import { isSigningKey } from "./signature.ts";

/** The token version this host writes and reads. */
export const TOKEN_VERSION = 5;

/** At most this many brokers in one token. */
export const MAX_BROKERS = 16;

/**
 * One broker of the cluster, as a node's identity keeps it: where it listens, and for a
 * node enrolled with a version 3 token the fingerprint that token named (that
 * certificate stays accepted; any other one must chain to the CA and name the broker).
 */
export interface BrokerEntry {
  /** `tls://HOST:PORT`. */
  url: string;
  /** SHA-256 fingerprint of the certificate a version 3 token named, "AB:CD:…". */
  pin?: string;
}

/** A decoded enrolment token. */
export interface EnrolmentToken {
  v: 5;
  node: string;
  /** The cluster's servers (`tls://HOST:PORT`), in the order the control plane listed them. */
  brokers: string[];
  /** The mesh's CA (PEM): every broker's certificate must chain to it. */
  ca: string;
  /** The one-time join user's seed ("SU…"). */
  join: string;
  /** That user's JWT (signed by the mesh's join account: what the key may do, until when). */
  jwt: string;
  /** The control plane's signing public key ("O…"): declarations must carry its signature. */
  signer: string;
  expires: string;
}

/** A JWT's shape: three base64url parts (the broker checks what it says). */
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

const TokenSchema = v.strictObject({
  v: v.literal(TOKEN_VERSION),
  node: v.pipe(v.string(), v.regex(NODE_ID, "a node id is 1–63 lowercase letters, digits and -")),
  brokers: v.pipe(
    v.array(v.pipe(
      v.string(),
      v.check((u) => brokerUrlProblem(u) === undefined, (i) => `${brokerUrlProblem(i.input)}`),
    )),
    v.minLength(1, "name at least one broker"),
    v.maxLength(MAX_BROKERS, `at most ${MAX_BROKERS} brokers`),
    v.check((list) => new Set(list).size === list.length, "each broker URL once"),
  ),
  ca: v.pipe(
    v.string(),
    v.check((pem) => caProblem(pem) === undefined, (i) => `${caProblem(i.input)}`),
  ),
  join: v.pipe(v.string(), v.check(isUserSeed, "a NATS user seed (SU…)")),
  jwt: v.pipe(v.string(), v.regex(JWT, "a NATS user JWT (three base64url parts)")),
  signer: v.pipe(v.string(), v.check(isSigningKey, "an NKey operator public key (O…)")),
  expires: v.pipe(v.string(), v.isoTimestamp("an ISO 8601 time with zone")),
});

/** Normalise a SHA-256 fingerprint to "AB:CD:…" (accepts lower case and no colons). */
export function normalisePin(pin: string): string {
  const hex = pin.replace(/:/g, "").toUpperCase();
  return /^[0-9A-F]{64}$/.test(hex) ? hex.match(/../g)!.join(":") : pin;
}

/**
 * Encode a token (the control plane's side; the host only decodes).
 *
 * @example
 * ```ts
 * const brokers = ["tls://b1:4222", "tls://b2:4222"];
 * const text = encodeToken({ v: 5, node: "n1", brokers, ca, join, jwt, signer, expires });
 * ```
 */
export function encodeToken(token: EnrolmentToken): string {
  return base64url(new TextEncoder().encode(JSON.stringify(token)));
}

/**
 * Decode and check a token; throws TokenError (code token.format, token.version,
 * token.invalid or token.expired) saying what is wrong with it.
 *
 * Long because: each field of the token checked in turn, each with its own message (TokenError).
 */
export function decodeToken(text: string, now: Date = new Date()): EnrolmentToken {
  const trimmed = text.trim();
  let data: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(trimmed)) throw new Error("not base64url");
    data = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(unbase64url(trimmed)));
  } catch {
    throw new TokenError(
      "token.format",
      "the enrolment token is not a token: expected base64url-encoded JSON",
      { hint: "copy the whole token the control plane printed, without quotes or line breaks" },
    );
  }
  const version = (data as { v?: unknown } | null)?.v;
  if (version === 1) {
    throw new TokenError(
      "token.version",
      "the enrolment token has version 1, which does not pin the control plane's signing key; " +
        `this host reads version ${TOKEN_VERSION} and applies only declarations signed by that key`,
      { hint: "make a new token with a control plane that signs its declarations" },
    );
  }
  if (version === 2 || version === 3) {
    throw new TokenError(
      "token.version",
      `the enrolment token has version ${version}, which pins ${
        version === 2 ? "its broker's" : "each broker's"
      } own certificate: every node enrolled with it is cut off when that certificate is ` +
        `renewed; this host reads version ${TOKEN_VERSION}, which carries the mesh's CA and ` +
        "the brokers' names (a renewed certificate is taken, the CA moves on by a signed update)",
      { hint: `make a new token with a control plane that writes version ${TOKEN_VERSION} tokens` },
    );
  }
  if (version === 4) {
    throw new TokenError(
      "token.version",
      "the enrolment token has version 4, whose one-time key the broker had to hold in its " +
        `configuration; this host reads version ${TOKEN_VERSION}, whose key comes with its own ` +
        "JWT (the broker runs in NATS's operator mode and names no node or key in its " +
        "configuration)",
      { hint: "make a new token with a control plane that writes version 5 tokens" },
    );
  }
  if (version !== TOKEN_VERSION) {
    throw new TokenError(
      "token.version",
      `the enrolment token has version ${
        JSON.stringify(version)
      }; this host reads version ${TOKEN_VERSION}`,
      { hint: "mint a token for this host's version, or upgrade the host" },
    );
  }
  const result = v.safeParse(TokenSchema, data, { abortEarly: false });
  if (!result.success) {
    const lines = result.issues.map((issue) => {
      const at = (issue.path ?? []).map((p) => String(p.key)).join(".") || "(token)";
      return issue.expected === "never" ? `${at}: is not a token field` : `${at}: ${issue.message}`;
    });
    throw new TokenError(
      "token.invalid",
      `the enrolment token is invalid:\n  ${lines.join("\n  ")}`,
      {
        hint: "mint a new token",
      },
    );
  }
  const token = result.output as EnrolmentToken;
  if (Date.parse(token.expires) <= now.getTime()) {
    throw new TokenError("token.expired", `the enrolment token expired at ${token.expires}`, {
      hint: "mint a new token",
    });
  }
  return token;
}

/** Why a broker URL is unusable, or undefined. Only tls:// is accepted: the link is always TLS. */
export function brokerUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `"${url}" is not a URL; expected tls://HOST:PORT`;
  }
  if (u.protocol !== "tls:") return `"${url}" must use tls:// (the link is always TLS)`;
  if (!u.hostname) return `"${url}" names no host`;
  if (u.pathname && u.pathname !== "/" || u.search || u.username) {
    return `"${url}" must be only tls://HOST:PORT`;
  }
  return undefined;
}

function caProblem(pem: string): string | undefined {
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) return "a PEM certificate";
  try {
    return new X509Certificate(pem).ca ? undefined : "a CA certificate (basicConstraints CA:TRUE)";
  } catch (error) {
    return `not a readable certificate (${(error as Error).message})`;
  }
}

function isUserSeed(seed: string): boolean {
  if (!seed.startsWith("SU")) return false;
  try {
    fromSeed(new TextEncoder().encode(seed));
    return true;
  } catch {
    return false;
  }
}
