/**
 * CIDR blocks (IPv4 and IPv6) as the overlay kind needs them: parsed strictly,
 * written in one normal form (so "10.0.0.1/32" declared equals what `wg` and
 * `ip` print), and compared for overlap.
 */

/** A parsed CIDR block. */
export interface Cidr {
  family: 4 | 6;
  /** The address as a 32- or 128-bit number. */
  address: bigint;
  prefix: number;
}

/** An IPv4 address in its one spelling (four decimal numbers 0–255, no leading zeros). */
export function parseV4(text: string): bigint | undefined {
  const n = v4Number(text);
  return n === undefined ? undefined : BigInt(n);
}

/** {@link parseV4} as a number (one loop over the characters: lists may be long). */
function v4Number(text: string): number | undefined {
  let value = 0, part = 0, digits = 0, parts = 0;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 0x2e;
    if (c === 0x2e) { // "." (or the end)
      if (digits === 0 || part > 255 || ++parts > 4) return undefined;
      value = value * 256 + part;
      part = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      if (digits === 1 && part === 0) return undefined; // a leading zero
      part = part * 10 + (c - 0x30);
      if (++digits > 3) return undefined;
    } else return undefined;
  }
  return parts === 4 ? value : undefined;
}

/** An IPv6 address, in any of its spellings (upper or lower case, zeros compressed or not). */
export function parseV6(text: string): bigint | undefined {
  const w = v6Words(text);
  if (w === undefined) return undefined;
  const part = (i: number) => BigInt(w[i] * 65536 + w[i + 1]);
  return (part(0) << 96n) | (part(2) << 64n) | (part(4) << 32n) | part(6);
}

const COLON = 0x3a, DOT = 0x2e;

/** The value of a hex digit, or -1. */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/**
 * An IPv6 address as its eight 16-bit words (one loop over the characters: lists may be
 * long): groups of 1–4 hex digits, one "::" for one or more zero words, an IPv4 address
 * as the last two words.
 */
function v6Words(text: string): number[] | undefined {
  const n = text.length;
  const words: number[] = [];
  let gap = -1;
  let i = 0;
  if (text.charCodeAt(0) === COLON) {
    if (text.charCodeAt(1) !== COLON) return undefined;
    gap = 0;
    i = 2;
  }
  while (i < n) {
    let j = i, value = 0;
    for (; j < n && j - i < 4; j++) {
      const h = hexValue(text.charCodeAt(j));
      if (h < 0) break;
      value = value * 16 + h;
    }
    if (j < n && text.charCodeAt(j) === DOT) { // an IPv4 address ends it
      const v4 = v4Number(text.slice(i));
      if (v4 === undefined) return undefined;
      words.push(Math.floor(v4 / 65536), v4 % 65536);
      break;
    }
    if (j === i) return undefined;
    words.push(value);
    if (words.length > 8) return undefined;
    if (j === n) break;
    if (text.charCodeAt(j) !== COLON) return undefined;
    if (text.charCodeAt(j + 1) === COLON) {
      if (gap >= 0) return undefined;
      gap = words.length;
      i = j + 2;
    } else if (j + 1 === n) return undefined;
    else i = j + 1;
  }
  if (gap < 0) return words.length === 8 ? words : undefined;
  if (words.length > 7) return undefined;
  // Move the words after "::" to the end, zeros between.
  const tail = words.length - gap;
  words.length = 8;
  for (let k = 0; k < tail; k++) words[7 - k] = words[gap + tail - 1 - k];
  for (let k = gap; k < 8 - tail; k++) words[k] = 0;
  return words;
}

/**
 * A block's first and last address as keys that compare with < within a family, without
 * big integers (lists of blocks may be long): IPv4 numbers; for IPv6 eight characters, one
 * per 16-bit word (strings compare by their 16-bit code units). `undefined` when `text` is
 * not a CIDR block.
 */
export function blockRange(
  text: string,
):
  | { family: 4; first: number; last: number }
  | { family: 6; first: string; last: string }
  | undefined {
  const c = cidrParts(text);
  if (c === undefined) return undefined;
  if (c.v4 !== undefined) {
    const size = 2 ** (32 - c.prefix);
    const first = c.v4 - c.v4 % size;
    return { family: 4, first, last: first + size - 1 };
  }
  const first = c.v6!, last = new Array<number>(8);
  for (let k = 0; k < 8; k++) {
    const keep = Math.max(0, Math.min(16, c.prefix - 16 * k));
    const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff;
    first[k] &= mask;
    last[k] = first[k] | (~mask & 0xffff);
  }
  return {
    family: 6,
    first: String.fromCharCode(...first),
    last: String.fromCharCode(...last),
  };
}

/** Parse "ADDRESS/PREFIX" (or a bare address, as a host route); `undefined` when malformed. */
export function parseCidr(text: string): Cidr | undefined {
  const parts = cidrParts(text);
  if (parts === undefined) return undefined;
  const { v4, v6, prefix } = parts;
  if (v4 !== undefined) return { family: 4, address: BigInt(v4), prefix };
  const part = (i: number) => BigInt(v6![i] * 65536 + v6![i + 1]);
  return {
    family: 6,
    address: (part(0) << 96n) | (part(2) << 64n) | (part(4) << 32n) | part(6),
    prefix,
  };
}

/** Whether text is an address with its prefix ("10.60.0.7/24") or without (a host). */
export function isCidr(text: string): boolean {
  return cidrParts(text) !== undefined;
}

/** A CIDR block's address (as a number, or eight words) and prefix, without big integers. */
function cidrParts(
  text: string,
): { v4?: number; v6?: number[]; prefix: number } | undefined {
  const slash = text.indexOf("/");
  const addr = slash < 0 ? text : text.slice(0, slash);
  let prefix: number | undefined;
  if (slash >= 0) {
    // 0, or 1–3 digits without a leading zero (a second "/" is no digit).
    const digits = text.length - slash - 1;
    if (digits < 1 || digits > 3 || (digits > 1 && text.charCodeAt(slash + 1) === 0x30)) {
      return undefined;
    }
    prefix = 0;
    for (let i = slash + 1; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c < 0x30 || c > 0x39) return undefined;
      prefix = prefix * 10 + (c - 0x30);
    }
  }
  const v4 = v4Number(addr);
  if (v4 !== undefined) return (prefix ?? 32) > 32 ? undefined : { v4, prefix: prefix ?? 32 };
  const v6 = v6Words(addr);
  if (v6 === undefined || (prefix ?? 128) > 128) return undefined;
  return { v6, prefix: prefix ?? 128 };
}

/** The network part of a block (host bits cleared): its first address. */
export function network(c: Cidr): bigint {
  const bits = BigInt(c.family === 4 ? 32 : 128);
  const host = bits - BigInt(c.prefix);
  return (c.address >> host) << host;
}

/** Whether two blocks share an address. */
export function overlaps(a: Cidr, b: Cidr): boolean {
  if (a.family !== b.family) return false;
  const shorter = Math.min(a.prefix, b.prefix);
  const wide = { ...a, prefix: shorter };
  return network(wide) === network({ ...b, prefix: shorter });
}

/** The one spelling of an address: lower case, zeros compressed as RFC 5952 says. */
export function formatAddress(family: 4 | 6, value: bigint): string {
  if (family === 4) {
    return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 0xffn)).join(".");
  }
  const words = [...Array(8)].map((_, i) => Number((value >> BigInt(112 - 16 * i)) & 0xffffn));
  // The longest run of two or more zero words becomes "::" (RFC 5952).
  let best = -1, bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = words.map((w) => w.toString(16));
  if (best < 0) return hex.join(":");
  return `${hex.slice(0, best).join(":")}::${hex.slice(best + bestLen).join(":")}`;
}

/** The normal form of an address with its prefix, host bits kept ("10.60.0.7/24"). */
export function formatCidr(c: Cidr): string {
  return `${formatAddress(c.family, c.address)}/${c.prefix}`;
}

/** The normal form of a block as a route (host bits cleared: "10.60.0.0/24"). */
export function formatRoute(c: Cidr): string {
  return formatCidr({ ...c, address: network(c) });
}

/** Normalise CIDR text for comparison; malformed text is returned as is. */
export function normalCidr(text: string, asRoute = false): string {
  const c = parseCidr(text);
  return c ? (asRoute ? formatRoute(c) : formatCidr(c)) : text;
}

/** The last address of a block. */
export function lastAddress(c: Cidr): bigint {
  const host = BigInt((c.family === 4 ? 32 : 128) - c.prefix);
  return network(c) + (1n << host) - 1n;
}
