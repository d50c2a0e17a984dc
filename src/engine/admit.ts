/**
 * Admission: a declaration's text is parsed once, here, into the value every
 * later step uses (`admit`). From the link it must also be (`admitFromLink`) the
 * safe parse, after its signature: over the exact
 * bytes, by the signing key pinned at enrolment (nothing parses an unsigned or
 * wrongly signed declaration); then (no `action`, none of
 * the host's own files or units), addressed to this node, carrying a serial newer
 * than the last one accepted (kept in store meta, so a replay is refused across
 * restarts too). The same declaration arriving again (a duplicate delivery, or
 * the catch-up on reconnect) is "held", not a replay.
 */
import { type Declaration, DeclarationRefused, type Problem } from "../declaration/envelope.ts";
import { verifyDeclaration } from "../link/signature.ts";
import { META } from "../store/meta.ts";
import type { Engine } from "./mod.ts";
import { parseDeclaration, parseTrustedDeclaration } from "./parse.ts";
import type { Source } from "./types.ts";

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

/** Why a declaration from the link was refused (reported upward). */
export type RefusalReason =
  | "unsigned"
  | "bad-signature"
  | "unpinned"
  | "invalid"
  | "wrong-node"
  | "replay"
  | "unaddressed";

/** What to do with a declaration from the link. */
export type Admission =
  | { verdict: "apply"; serial: number; digest: string; declaration: Declaration }
  | { verdict: "held"; serial: number; declaration: Declaration }
  | {
    verdict: "refused";
    reason: RefusalReason;
    serial?: number;
    message: string;
    problems: Problem[];
  };

/**
 * Decide about `data` received on `subject` with the `Mesh-Signature` header
 * `signature`; changes nothing (see `accept`).
 */
export async function admitFromLink(
  engine: Engine,
  data: Uint8Array,
  subject: string,
  signature: string | undefined,
): Promise<Admission> {
  const refused = `${subject} refused, nothing was applied`;
  const signer = engine.store.meta(META.signer);
  if (!signer) {
    return {
      verdict: "refused",
      reason: "unpinned",
      serial: rawSerial(data),
      message: `${refused}: this node holds no signing key to check declarations against ` +
        "(it was enrolled with a version 1 token); make a new token and enrol again with --replace",
      problems: [{ path: "(signature)", message: "no pinned signing key" }],
    };
  }
  const bad = verifyDeclaration(signer, data, signature);
  if (bad) {
    return {
      verdict: "refused",
      reason: bad.reason,
      serial: rawSerial(data),
      message: `${refused}: ${bad.message}`,
      problems: [{ path: "(signature)", message: bad.message }],
    };
  }
  let declaration;
  try {
    declaration = await admit(engine, data, { source: "link", origin: subject });
  } catch (error) {
    if (!(error instanceof DeclarationRefused)) throw error;
    const wrongNode = error.problems.some((p) => p.path === "node");
    return {
      verdict: "refused",
      reason: wrongNode ? "wrong-node" : "invalid",
      serial: rawSerial(data),
      message: error.message,
      problems: error.problems,
    };
  }
  const { node, serial, digest } = declaration;
  if (node === undefined || serial === undefined) {
    const missing = node === undefined ? "node" : "serial";
    return {
      verdict: "refused",
      reason: "unaddressed",
      serial,
      message: `${refused}: a declaration from the link must name its ${missing}`,
      problems: [{ path: missing, message: "is required over the link" }],
    };
  }
  const lastText = engine.store.meta(META.serial);
  const last = lastText === undefined ? undefined : Number(lastText);
  if (last !== undefined && serial === last && digest === engine.store.meta(META.digest)) {
    return { verdict: "held", serial, declaration };
  }
  if (last !== undefined && serial <= last) {
    return {
      verdict: "refused",
      reason: "replay",
      serial,
      message: `${refused}: serial ${serial} is not newer than the last accepted serial ${last} ` +
        "(a replay or a stale declaration)",
      problems: [{ path: "serial", message: `must be greater than ${last}` }],
    };
  }
  return { verdict: "apply", serial, digest, declaration };
}

/** Record an admitted declaration as the last accepted one (before it is applied). */
export function accept(
  engine: Pick<Engine, "store">,
  admission: { serial: number; digest: string },
): void {
  // Synced to disk before the apply: after a power cut, a replay of an older serial is still refused.
  engine.store.setMetaDurably({
    [META.serial]: String(admission.serial),
    [META.digest]: admission.digest,
  });
}

function rawSerial(data: Uint8Array): number | undefined {
  try {
    const serial = JSON.parse(new TextDecoder().decode(data))?.serial;
    return Number.isSafeInteger(serial) ? serial : undefined;
  } catch {
    return undefined;
  }
}
