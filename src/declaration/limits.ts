/**
 * The size limits of a declaration (DESIGN.md §4): the parse (src/engine/parse.ts), each kind's
 * schema (src/resources/kind.ts) and the configuration (src/config.ts) read them. A module of
 * its own, below both the envelope and the kinds.
 */

/** Size limits; a declaration over any of them is refused. */
export interface Limits {
  /** The declaration's JSON text, in bytes. */
  maxBytes: number;
  /** Resources in one declaration. */
  maxResources: number;
  /** One file's content, in bytes (after base64 decoding). */
  maxFileBytes: number;
  /** One file's content declared by reference (contentSha256 + size), in bytes. */
  maxReferencedBytes: number;
}

/** The limits used when none are given. */
export const DEFAULT_LIMITS: Limits = {
  maxBytes: 8 * 1024 * 1024,
  maxResources: 10_000,
  maxFileBytes: 2 * 1024 * 1024,
  maxReferencedBytes: 256 * 1024 * 1024,
};
