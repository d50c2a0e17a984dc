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

function parseV4(text: string): bigint | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part) || Number(part) > 255) return undefined;
    value = (value << 8n) | BigInt(part);
  }
  return value;
}

function parseV6(text: string): bigint | undefined {
  if (!/^[0-9a-fA-F:.]+$/.test(text) || text.split("::").length > 2) return undefined;
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const words = (s: string | undefined): number[] | undefined => {
    if (s === undefined || s === "") return [];
    const out: number[] = [];
    const pieces = s.split(":");
    for (const [i, piece] of pieces.entries()) {
      if (i === pieces.length - 1 && piece.includes(".")) {
        const v4 = parseV4(piece);
        if (v4 === undefined) return undefined;
        out.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
      } else if (/^[0-9a-fA-F]{1,4}$/.test(piece)) out.push(parseInt(piece, 16));
      else return undefined;
    }
    return out;
  };
  const front = words(head);
  const back = words(tail);
  if (!front || !back) return undefined;
  const missing = 8 - front.length - back.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return undefined;
  const all = [...front, ...Array(Math.max(missing, 0)).fill(0), ...back];
  return all.reduce((acc, w) => (acc << 16n) | BigInt(w), 0n);
}

/** Parse "ADDRESS/PREFIX" (or a bare address, as a host route); `undefined` when malformed. */
export function parseCidr(text: string): Cidr | undefined {
  const [addr, prefixText, ...rest] = text.split("/");
  if (rest.length > 0) return undefined;
  const v4 = parseV4(addr);
  const family = v4 !== undefined ? 4 : 6;
  const address = v4 ?? parseV6(addr);
  if (address === undefined) return undefined;
  const bits = family === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^(0|[1-9][0-9]{0,2})$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return undefined;
  return { family, address, prefix };
}

/** The network part of a block (host bits cleared). */
function network(c: Cidr): bigint {
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

function formatAddress(family: 4 | 6, value: bigint): string {
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
