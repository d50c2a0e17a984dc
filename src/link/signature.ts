/**
 * Signed declarations (DESIGN.md §18). The control plane never signs bare bytes:
 * it signs a **statement** that names its purpose, the node it is for and how
 * long it holds, followed by the exact bytes of the declaration:
 *
 *     nox-mesh-host declaration v1\n
 *     node <node>\n
 *     not-after <ISO time, or "none">\n
 *     \n
 *     <the declaration's bytes>
 *
 * with its Ed25519 NKey signing key (an operator pair, public key "O…"), and
 * sends it in the NATS header `Mesh-Signature`:
 *
 *     v1 key=<O…> [not-after=<ISO time>] sig=<base64url>
 *
 * The node rebuilds the statement from its OWN node id, the header's
 * `not-after` and the bytes, so a signature made for another node, another
 * purpose (a key rotation, below) or other bytes does not verify. JetStream keeps
 * headers with the stored message, so the catch-up (direct get) carries it too.
 *
 * **Key rotation**: the current key signs
 *
 *     nox-mesh-host signing key rotation v1\n
 *     from <old O…>\n
 *     to <new O…>\n
 *
 * and the control plane sends its rotations (oldest first) with every
 * declaration signed by a later key, in the header `Mesh-Key-Rotation`:
 *
 *     v1 <from>:<to>:<sig> <from>:<to>:<sig> …
 *
 * A node whose pinned key is `from` of one of them follows the chain from there,
 * each step signed by the key before it, to the key that signed the declaration,
 * and then pins that key (src/trust/admission.ts). A rotation not signed by the key
 * the node trusts leads nowhere and is refused. The broker is transport, not
 * authority: whoever holds the current signing key holds root on every node.
 */
import { createOperator, fromPublic, type KeyPair } from "@nats-io/nkeys";
import { base64url, unbase64url } from "./_base64url.ts";
import { keyPairOf, verifies as ed25519Verifies } from "./_nkeys.ts";

/** The NATS header that carries a declaration's signature. */
export const SIGNATURE_HEADER = "Mesh-Signature";

/** The NATS header that carries the control plane's key rotations. */
export const ROTATION_HEADER = "Mesh-Key-Rotation";

/** The first line of a signed declaration statement: the purpose and its version. */
export const DECLARATION_PURPOSE = "nox-mesh-host declaration v1";

/** The first line of a signed key rotation statement. */
export const ROTATION_PURPOSE = "nox-mesh-host signing key rotation v1";

/**
 * How far past its `not-after` a declaration is still taken: clocks of nodes and
 * of the control plane differ by this much without anything being refused.
 */
export const NOT_AFTER_SKEW_MS = 5 * 60_000;

/** The most rotations a declaration may carry. */
export const MAX_ROTATIONS = 32;

/** Why a declaration's signature does not hold. */
export interface SignatureProblem {
  reason: "unsigned" | "bad-signature" | "bad-rotation" | "expired";
  message: string;
}

/** A signature that holds: who signed, the keys from the pinned one to it, and until when. */
export interface VerifiedSignature {
  /** The key that signed the declaration (the pinned key, or the end of a rotation). */
  signer: string;
  /** The keys from the pinned key to `signer`, both included (one key without a rotation). */
  path: string[];
  /** The statement's `not-after`, when it has one. */
  notAfter?: string;
}

/**
 * Whether `key` is a signing public key (an NKey operator public key, "O…").
 *
 * @example
 * ```ts
 * isSigningKey(createOperator().getPublicKey()); // true
 * ```
 */
export function isSigningKey(key: string): boolean {
  if (!/^O[A-Z2-7]{55}$/.test(key)) return false;
  try {
    fromPublic(key);
    return true;
  } catch {
    return false;
  }
}

/** A new signing key pair (the control plane's side; it signs with the runtime's Ed25519). */
export function createSigningKey(): KeyPair {
  return keyPairOf(createOperator().getSeed());
}

/** The signing key pair of a seed ("SO…"). */
export function signingKeyFromSeed(seed: string): KeyPair {
  return keyPairOf(seed);
}

/** The exact bytes signed for a declaration to `node` (see the module's comment). */
export function declarationStatement(
  node: string,
  notAfter: string | undefined,
  bytes: Uint8Array,
): Uint8Array {
  const head = new TextEncoder().encode(
    `${DECLARATION_PURPOSE}\nnode ${node}\nnot-after ${notAfter ?? "none"}\n\n`,
  );
  const out = new Uint8Array(head.length + bytes.length);
  out.set(head);
  out.set(bytes, head.length);
  return out;
}

/** The exact bytes signed for a rotation from `from` to `to`. */
export function rotationStatement(from: string, to: string): Uint8Array {
  return new TextEncoder().encode(`${ROTATION_PURPOSE}\nfrom ${from}\nto ${to}\n`);
}

/**
 * The `Mesh-Signature` header value for `bytes` sent to `node`, signed by `key`;
 * `notAfter` (a time) makes nodes refuse it after then.
 *
 * @example
 * ```ts
 * headers.set(SIGNATURE_HEADER, signDeclaration(key, "node-7", bytes));
 * ```
 */
export function signDeclaration(
  key: KeyPair,
  node: string,
  bytes: Uint8Array,
  { notAfter }: { notAfter?: Date } = {},
): string {
  const until = notAfter?.toISOString();
  const sig = base64url(key.sign(declarationStatement(node, until, bytes)));
  return `v1 key=${key.getPublicKey()}${until ? ` not-after=${until}` : ""} sig=${sig}`;
}

/** One rotation, `from:to:sig`, signed by `from` (the current key) to name `to`. */
export function signRotation(from: KeyPair, to: string): string {
  if (!isSigningKey(to)) throw new Error(`${to} is not a signing public key (O…)`);
  const key = from.getPublicKey();
  return `${key}:${to}:${base64url(from.sign(rotationStatement(key, to)))}`;
}

/** The `Mesh-Key-Rotation` header value for rotations (each from `signRotation`), oldest first. */
export function rotationHeader(rotations: readonly string[]): string {
  return ["v1", ...rotations].join(" ");
}

/**
 * Check that `header` is a signature of `bytes` for `node` by the pinned key
 * `pinned`, or by a key the pinned key rotated to (`rotation`, the
 * `Mesh-Key-Rotation` header), and, when `now` is given, that it has not expired
 * then (see {@link expiry}). Returns what holds, or what is wrong; never throws on
 * bad input.
 */
export function verifyDeclaration(
  pinned: string,
  node: string,
  bytes: Uint8Array,
  header: string | undefined,
  rotation?: string,
  now?: number,
): VerifiedSignature | SignatureProblem {
  if (header === undefined || header.trim() === "") {
    return {
      reason: "unsigned",
      message: `the declaration carries no ${SIGNATURE_HEADER} header; only declarations signed ` +
        `by the control plane's key ${pinned} are applied`,
    };
  }
  const parsed = parseSignatureHeader(header.trim());
  if (typeof parsed === "string") {
    return { reason: "bad-signature", message: `the ${SIGNATURE_HEADER} header ${parsed}` };
  }
  let path = [pinned];
  if (parsed.key !== pinned) {
    if (rotation === undefined || rotation.trim() === "") {
      return {
        reason: "bad-signature",
        message: `the declaration is signed by ${parsed.key}, not by the pinned signing key ` +
          `${pinned}, and carries no rotation from it`,
      };
    }
    const chain = followRotations(pinned, parsed.key, rotation.trim());
    if (typeof chain === "string") {
      return {
        reason: "bad-rotation",
        message: `the declaration is signed by ${parsed.key}, not by the pinned signing key ` +
          `${pinned}, and its ${ROTATION_HEADER} header ${chain}`,
      };
    }
    path = chain;
  }
  if (!verifies(parsed.key, declarationStatement(node, parsed.notAfter, bytes), parsed.sig)) {
    return {
      reason: "bad-signature",
      message:
        `the signature does not verify against the ${
          path.length > 1 ? "rotated-to" : "pinned"
        } signing key ${parsed.key} for a declaration to ${node} (the bytes were changed after ` +
        "signing, it was signed for another node or purpose, or another key signed it)",
    };
  }
  const expired = now === undefined ? undefined : expiry(parsed.notAfter, now);
  if (expired) return expired;
  return {
    signer: parsed.key,
    path,
    ...(parsed.notAfter === undefined ? {} : { notAfter: parsed.notAfter }),
  };
}

/** The not-after a `Mesh-Signature` header names (unchecked), if any. */
export function notAfterOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const parsed = parseSignatureHeader(header);
  return typeof parsed === "string" ? undefined : parsed.notAfter;
}

/**
 * Whether a declaration signed to be taken until `notAfter` is expired at `now`
 * (this node's clock), with {@link NOT_AFTER_SKEW_MS} of skew allowed.
 */
export function expiry(notAfter: string | undefined, now: number): SignatureProblem | undefined {
  if (notAfter === undefined || now <= Date.parse(notAfter) + NOT_AFTER_SKEW_MS) return undefined;
  return {
    reason: "expired",
    message: `the declaration was signed to be taken until ${notAfter}, and this node's clock ` +
      `reads ${new Date(now).toISOString()}; if that clock is wrong, set it right (the node ` +
      "takes the declaration again once it is), else the control plane must sign it again",
  };
}

/** Whether a verify result is a problem. */
export function isSignatureProblem(
  result: VerifiedSignature | SignatureProblem,
): result is SignatureProblem {
  return "reason" in result;
}

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const B64URL = /^[A-Za-z0-9_-]+$/;

/** The header's fields, or what is wrong with it. */
function parseSignatureHeader(
  header: string,
): { key: string; notAfter?: string; sig: Uint8Array } | string {
  const [version, ...fields] = header.split(" ");
  if (version !== "v1") {
    return B64URL.test(header)
      ? "is a bare signature of the bytes (an older control plane): the control plane must sign " +
        `the ${DECLARATION_PURPOSE} statement`
      : `is not "v1 key=… sig=…"`;
  }
  const values = new Map<string, string>();
  for (const field of fields) {
    const at = field.indexOf("=");
    const name = field.slice(0, at);
    if (at < 1 || !["key", "not-after", "sig"].includes(name) || values.has(name)) {
      return `has an unknown, repeated or malformed field "${field.slice(0, 40)}"`;
    }
    values.set(name, field.slice(at + 1));
  }
  const key = values.get("key");
  const sigText = values.get("sig");
  const notAfter = values.get("not-after");
  if (!key || !isSigningKey(key)) return "names no signing public key (key=O…)";
  if (!sigText || !B64URL.test(sigText)) return "carries no base64url signature (sig=…)";
  if (notAfter !== undefined && (!ISO_UTC.test(notAfter) || Number.isNaN(Date.parse(notAfter)))) {
    return `has a not-after that is not an ISO 8601 UTC time: "${notAfter.slice(0, 40)}"`;
  }
  let sig: Uint8Array;
  try {
    sig = unbase64url(sigText);
  } catch {
    return "carries no base64url signature (sig=…)";
  }
  if (sig.length !== 64) return "carries a signature of the wrong length";
  return { key, sig, ...(notAfter === undefined ? {} : { notAfter }) };
}

/**
 * The keys from `pinned` to `target` through the rotations of `header`, each
 * signed by the key before it, or what is wrong.
 */
function followRotations(pinned: string, target: string, header: string): string[] | string {
  const [version, ...links] = header.split(" ");
  if (version !== "v1") return `is not "v1 FROM:TO:SIG …"`;
  if (links.length === 0 || links.length > MAX_ROTATIONS) {
    return `carries ${links.length} rotations (1 to ${MAX_ROTATIONS} are read)`;
  }
  const parsed = links.map((link) => link.split(":"));
  const start = parsed.findIndex(([from]) => from === pinned);
  if (start < 0) return `names no rotation from the pinned key ${pinned}`;
  const path = [pinned];
  for (const [index, fields] of parsed.slice(start).entries()) {
    const [from, to, sigText] = fields;
    const current = path[path.length - 1];
    if (
      fields.length !== 3 || from !== current || !isSigningKey(to) || !B64URL.test(sigText ?? "")
    ) {
      return `breaks at rotation ${start + index + 1}: it does not follow from ${current}`;
    }
    let sig: Uint8Array;
    try {
      sig = unbase64url(sigText);
    } catch {
      return `breaks at rotation ${start + index + 1}: its signature is not base64url`;
    }
    if (sig.length !== 64 || !verifies(from, rotationStatement(from, to), sig)) {
      return `breaks at rotation ${start + index + 1}: the rotation from ${from} to ${to} is ` +
        `not signed by ${from}`;
    }
    path.push(to);
    if (to === target) return path;
  }
  return `leads from ${pinned} to ${path[path.length - 1]}, never to ${target}`;
}

/** Checked by the runtime's Ed25519 (src/link/_nkeys.ts: 0.05 ms, against 19 for nkeys.js). */
function verifies(key: string, statement: Uint8Array, sig: Uint8Array): boolean {
  return ed25519Verifies(key, statement, sig);
}
