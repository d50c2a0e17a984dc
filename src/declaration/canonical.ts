/** Canonical JSON (keys sorted, no spaces) and SHA-256 digests of it. */
import { createHash } from "node:crypto";

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
export function sha256Hex(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** The digest that identifies a value: "sha256:" + SHA-256 of its canonical JSON. */
export function digestOf(value: unknown): string {
  return `sha256:${sha256Hex(canonicalJson(value))}`;
}
