/**
 * Signed declarations (DESIGN.md §18): the control plane signs the EXACT bytes
 * of a declaration with its Ed25519 NKey signing key (an operator key pair,
 * public key "O…"), and sends the signature in the NATS header
 * `Mesh-Signature` (base64url, no padding). JetStream keeps headers with the
 * stored message, so the catch-up (direct get) carries it too. The enrolment
 * token pins the signing public key; the host verifies before anything else
 * looks at the bytes. The broker is transport, not authority: whoever holds the
 * signing key holds root on every node.
 */
import { createOperator, fromPublic, fromSeed, type KeyPair } from "@nats-io/nkeys";
import { base64url, unbase64url } from "./_base64url.ts";

/** The NATS header that carries a declaration's signature. */
export const SIGNATURE_HEADER = "Mesh-Signature";

/** Why a declaration's signature does not hold. */
export interface SignatureProblem {
  reason: "unsigned" | "bad-signature";
  message: string;
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

/** A new signing key pair (the control plane's side). */
export function createSigningKey(): KeyPair {
  return createOperator();
}

/** The signing key pair of a seed ("SO…"). */
export function signingKeyFromSeed(seed: string): KeyPair {
  return fromSeed(new TextEncoder().encode(seed));
}

/**
 * The signature of `bytes` as the `Mesh-Signature` header value.
 *
 * @example
 * ```ts
 * headers.set(SIGNATURE_HEADER, signDeclaration(key, bytes));
 * ```
 */
export function signDeclaration(key: KeyPair, bytes: Uint8Array): string {
  return base64url(key.sign(bytes));
}

/**
 * Check that `signature` is `signer`'s signature of exactly `bytes`; returns
 * undefined when it is, else what is wrong (never throws on bad input).
 */
export function verifyDeclaration(
  signer: string,
  bytes: Uint8Array,
  signature: string | undefined,
): SignatureProblem | undefined {
  if (signature === undefined || signature.trim() === "") {
    return {
      reason: "unsigned",
      message: `the declaration carries no ${SIGNATURE_HEADER} header; only declarations signed ` +
        `by the control plane's key ${signer} are applied`,
    };
  }
  let sig: Uint8Array;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(signature.trim())) throw new Error("not base64url");
    sig = unbase64url(signature.trim());
  } catch {
    return {
      reason: "bad-signature",
      message: `the ${SIGNATURE_HEADER} header is not a base64url signature`,
    };
  }
  let ok = false;
  try {
    ok = sig.length === 64 && fromPublic(signer).verify(bytes, sig);
  } catch {
    ok = false;
  }
  return ok ? undefined : {
    reason: "bad-signature",
    message: `the signature does not verify against the pinned signing key ${signer} ` +
      "(the bytes were changed after signing, or another key signed them)",
  };
}
