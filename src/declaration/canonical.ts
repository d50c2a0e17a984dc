/**
 * Canonical JSON (keys sorted, no spaces) and SHA-256 digests of it, with Web
 * Crypto (built in; node:crypto would add tens of milliseconds to every start).
 */

/**
 * JSON with object keys sorted at every depth, so equal values give equal text.
 *
 * @example
 * ```ts
 * canonicalJson({ b: 1, a: [2, { d: 3, c: 4 }] }); // '{"a":[2,{"c":4,"d":3}],"b":1}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  // The native serialiser does the escaping; the replacer only orders keys.
  return JSON.stringify(value, sortKeys) ?? "null";
}

function sortKeys(_key: string, value: unknown): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    sorted[key] = (value as Record<string, unknown>)[key];
  }
  return sorted;
}

/** The SHA-256 of text (as UTF-8) or bytes, as lowercase hex. */
export async function sha256Hex(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
  );
  let hex = "";
  for (const byte of hash) hex += byte.toString(16).padStart(2, "0");
  return hex;
}

/** The digest that identifies a value: "sha256:" + SHA-256 of its canonical JSON. */
export async function digestOf(value: unknown): Promise<string> {
  return `sha256:${await sha256Hex(canonicalJson(value))}`;
}
