/**
 * The envelope of declaration v1 (DESIGN.md §4): version, node, serial and the
 * ordered resources, and what a parse answers (a declaration, or the problems
 * that refused it). The resources themselves are each kind's business
 * (src/resources/); the parse that joins them is src/engine/parse.ts. Size limits are
 * limits.ts, what the parse is told of the host options.ts and the problems a refusal lists
 * refused.ts: the kinds (src/resources/kind.ts) need them and this module names `Resource`,
 * so they live below both (no import circle).
 */
import * as v from "valibot";
import type { Resource } from "../resources/mod.ts";
import { NODE_ID } from "./fields.ts";

export { DeclarationRefused, type Problem } from "./refused.ts";

/** A parsed declaration: valid, complete, addressed (or not), with its digest. */
export interface Declaration {
  version: 1;
  node?: string;
  serial?: number;
  resources: Resource[];
  /** "sha256:…" of the canonical JSON of the whole declaration. */
  digest: string;
  /**
   * Parsed with the trusted parse (the bundle the host carries): what only the bundle may do
   * is accepted at the check too. Not part of the digest.
   */
  trusted?: boolean;
}

/** The envelope, with resources checked one by one by their kinds. */
export const EnvelopeSchema = v.strictObject({
  version: v.literal(
    1,
    (i) => `version ${JSON.stringify(i.input)} is not supported; this host reads version 1`,
  ),
  node: v.optional(
    v.pipe(v.string(), v.regex(NODE_ID, "a node id is 1–63 lowercase letters, digits and -")),
  ),
  serial: v.optional(
    v.pipe(v.number(), v.safeInteger("serial is an integer"), v.minValue(0, "serial is >= 0")),
  ),
  resources: v.array(v.unknown()),
});
