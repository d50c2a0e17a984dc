/**
 * Admission: a declaration's text is parsed once, here, into the value every
 * later step uses (`admit`): the bundle with the trusted parse, anything else with the
 * safe one, and refused when addressed to another node. What arrives from the link is
 * first held to its signature and its serial by the trust module (src/trust/), which
 * then admits it here.
 */
import { type Declaration, DeclarationRefused } from "../declaration/envelope.ts";
import { META } from "../store/meta.ts";
import type { Engine } from "./types.ts";
import { parseDeclaration, parseTrustedDeclaration } from "./parse.ts";
import type { Source } from "../store/records.ts";

/** Where a declaration's text came from, for the parse it gets and for messages. */
export interface AdmitOptions {
  source: Source;
  /** A file name, the link's subject, or the bundle's path. */
  origin: string;
}

/**
 * Admit declaration text: parsed once (the bundle with the trusted parse, every
 * other source the safe one), and refused when it is addressed to another node.
 * Throws {@link DeclarationRefused} with every problem.
 */
export async function admit(
  engine: Engine,
  text: string | Uint8Array,
  { source, origin }: AdmitOptions,
): Promise<Declaration> {
  const options = {
    managedRoots: engine.config.managedRoots,
    own: engine.config.own,
    permit: engine.config.permit,
    limits: engine.config.limits,
    origin,
  };
  // The same text from the same place parses to the same value (the engine's
  // configuration does not change while it is open): the drift timer re-admits what
  // the store holds, so the last parse of a text (a string: immutable) is kept.
  const last = lastAdmitted.get(engine);
  let declaration: Declaration;
  if (last && last.source === source && last.origin === origin && last.text === text) {
    declaration = last.declaration;
  } else {
    declaration = source === "bundle"
      ? await parseTrustedDeclaration(text, options)
      : await parseDeclaration(text, options);
    if (typeof text === "string") lastAdmitted.set(engine, { source, origin, text, declaration });
  }
  const self = engine.store.meta(META.node);
  if (self !== undefined && declaration.node !== undefined && declaration.node !== self) {
    throw new DeclarationRefused(
      [{
        path: "node",
        message: `is addressed to "${declaration.node}", but this node is "${self}"`,
      }],
      origin,
    );
  }
  return declaration;
}

/** The last declaration each engine admitted, with the text and place it came from. */
const lastAdmitted = new WeakMap<
  Engine,
  { source: Source; origin: string; text: string; declaration: Declaration }
>();
