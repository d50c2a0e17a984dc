/** base64url without padding (RFC 4648 §5), for tokens and signatures: the platform's codec. */

/** Encode bytes as base64url without padding. */
export function base64url(bytes: Uint8Array): string {
  return bytes.toBase64({ alphabet: "base64url", omitPadding: true });
}

/** Decode base64url (padding optional); throws on characters outside the alphabet. */
export function unbase64url(text: string): Uint8Array {
  return Uint8Array.fromBase64(text, { alphabet: "base64url" });
}
