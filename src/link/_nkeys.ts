/**
 * NKeys (the Ed25519 keys NATS names as text, "U…", "O…", "SU…") signed and checked by
 * the runtime's own Ed25519 (node:crypto), not by the pure JavaScript of `@nats-io/nkeys`:
 * measured on the 2-core build machine, its sign took 13–16 ms, its verify 19 ms and a
 * public key derived from a seed 10 ms; node:crypto takes 0.03–0.05 ms for each. A node
 * signs at every connection (the broker's nonce) and checks every declaration it takes;
 * the control plane signs every declaration and mints every node's JWT. `@nats-io/nkeys`
 * still makes new keys (its random seed) and checks a key's text.
 *
 * The text form: base32 (RFC 4648, no padding) of a prefix (one byte for a public key:
 * the key's role; two for a seed: "S" and the role), the 32 raw bytes, and a CRC-16
 * (XMODEM) of what precedes it, little-endian.
 */
import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from "node:crypto";
import type { KeyPair } from "@nats-io/nkeys";

/** The first byte of a public key of each role (its base32 letter in the comment). */
export const ROLE = {
  operator: 14 << 3, // O
  account: 0, // A
  user: 20 << 3, // U
} as const;

/** The first five bits of a seed's text ("S"). */
const SEED = 18 << 3;

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

function base32(bytes: Uint8Array): string {
  let out = "";
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

function unbase32(text: string): Uint8Array | undefined {
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const char of text) {
    const digit = ALPHABET.indexOf(char);
    if (digit < 0) return undefined;
    value = ((value << 5) | digit) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return new Uint8Array(out);
}

/** CRC-16/XMODEM (polynomial 0x1021, initial 0), the check NKeys append. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}

function withCheck(body: Uint8Array): string {
  const crc = crc16(body);
  const out = new Uint8Array(body.length + 2);
  out.set(body);
  out[body.length] = crc & 0xff;
  out[body.length + 1] = crc >>> 8;
  return base32(out);
}

/** The body of an NKey's text (its check verified), or undefined. */
function checked(text: string, length: number): Uint8Array | undefined {
  const raw = unbase32(text);
  if (!raw || raw.length !== length + 2) return undefined;
  const body = raw.subarray(0, length);
  const crc = raw[length] | (raw[length + 1] << 8);
  return crc16(body) === crc ? body : undefined;
}

/** The text of the public key of `role` whose raw bytes are `raw` (32 bytes). */
export function encodePublicKey(role: number, raw: Uint8Array): string {
  const body = new Uint8Array(33);
  body[0] = role;
  body.set(raw, 1);
  return withCheck(body);
}

/** The raw 32 bytes of public key `key` (of `role` when given), or undefined when it is not one. */
export function decodePublicKey(key: string, role?: number): Uint8Array | undefined {
  const body = checked(key, 33);
  if (!body || (role !== undefined && body[0] !== role)) return undefined;
  return body.slice(1);
}

/** The role and raw 32 bytes of seed `seed` ("S…"), or undefined when it is not one. */
export function decodeSeed(
  seed: string | Uint8Array,
): { role: number; raw: Uint8Array } | undefined {
  const text = typeof seed === "string" ? seed : new TextDecoder().decode(seed);
  const body = checked(text.trim(), 34);
  if (!body || (body[0] & 0xf8) !== SEED) return undefined;
  const role = ((body[0] & 7) << 5) | ((body[1] & 0xf8) >> 3);
  return { role, raw: body.slice(2) };
}

const PKCS8_ED25519 = Uint8Array.from([
  0x30,
  0x2e,
  0x02,
  0x01,
  0x00,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x70,
  0x04,
  0x22,
  0x04,
  0x20,
]);
const SPKI_ED25519 = Uint8Array.from([
  0x30,
  0x2a,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x70,
  0x03,
  0x21,
  0x00,
]);

function der(prefix: Uint8Array, raw: Uint8Array): Uint8Array {
  const out = new Uint8Array(prefix.length + raw.length);
  out.set(prefix);
  out.set(raw, prefix.length);
  return out;
}

/** Something that signs as an NKey: its public key's text and its signatures. */
export interface NkeySigner {
  readonly publicKey: string;
  sign(data: Uint8Array): Uint8Array;
}

/**
 * The signer of seed `seed` ("S…"): its public key derived once, each signature by the
 * runtime. Throws when `seed` is not a seed.
 */
export function signerOf(seed: string | Uint8Array): NkeySigner {
  const decoded = decodeSeed(seed);
  if (!decoded) throw new Error("not an NKey seed");
  const key = createPrivateKey({
    key: der(PKCS8_ED25519, decoded.raw) as unknown as Buffer,
    format: "der",
    type: "pkcs8",
  });
  const spki = createPublicKey(key).export({ format: "der", type: "spki" });
  const publicKey = encodePublicKey(decoded.role, new Uint8Array(spki).subarray(12));
  return {
    publicKey,
    sign: (data) => new Uint8Array(sign(null, data, key)),
  };
}

/** Public keys already turned into the runtime's keys (a node checks with one key, mostly). */
const publicKeys = new Map<string, KeyObject>();

/** Whether `sig` is `publicKey`'s Ed25519 signature of `data` (false for anything malformed). */
export function verifies(publicKey: string, data: Uint8Array, sig: Uint8Array): boolean {
  let key = publicKeys.get(publicKey);
  if (!key) {
    const raw = decodePublicKey(publicKey);
    if (!raw) return false;
    key = createPublicKey({
      key: der(SPKI_ED25519, raw) as unknown as Buffer,
      format: "der",
      type: "spki",
    });
    if (publicKeys.size > 64) publicKeys.clear();
    publicKeys.set(publicKey, key);
  }
  try {
    return sig.length === 64 && verify(null, data, key, sig);
  } catch {
    return false;
  }
}

/**
 * A `@nats-io/nkeys` KeyPair for seed `seed` whose public key and signatures come from
 * the runtime (what `@nats-io/jwt` and this repository's signers take).
 */
export function keyPairOf(seed: string | Uint8Array): KeyPair {
  const text = typeof seed === "string" ? seed.trim() : new TextDecoder().decode(seed).trim();
  const signer = signerOf(text);
  const fail = (): never => {
    throw new Error("not available on this key pair");
  };
  return {
    getPublicKey: () => signer.publicKey,
    // Asked by @nats-io/jwt only to check the pair can sign (it holds a seed).
    getPrivateKey: () => decodeSeed(text)!.raw,
    getSeed: () => new TextEncoder().encode(text),
    sign: (input) => signer.sign(input),
    verify: (input, sig) => verifies(signer.publicKey, input, sig),
    clear: () => {},
    seal: fail,
    open: fail,
  };
}
