/**
 * Admission from the link: a declaration that arrived over the uplink must first carry a
 * signature of the declaration statement for this node (src/link/signature.ts) by the
 * pinned signing key, or by a key the pinned key rotated to (nothing parses an unsigned or
 * wrongly signed declaration); then pass the engine's safe parse (no `action`, none of the
 * host's own files or units), be addressed to this node, carry a serial newer than the
 * last one accepted for this node from that key (the store's `link_serials`, kept across
 * restarts and re-enrolments, so a replay is refused then too), and not be past its
 * `not-after`. The same declaration arriving again (a duplicate delivery, or the catch-up
 * on reconnect) is "known", not a replay, and not judged for expiry: the node has it
 * already. The engine knows none of this: it parses and applies what this admits.
 */
import { type Declaration, DeclarationRefused, type Problem } from "../declaration/envelope.ts";
import { admit, canonicalBody, type Engine } from "../engine/mod.ts";
import {
  expiry,
  isSignatureProblem,
  notAfterOf,
  type VerifiedSignature,
  verifyDeclaration,
} from "../link/signature.ts";
import { META } from "../store/meta.ts";

/** Why a declaration from the link was refused (reported upward). */
export type RefusalReason =
  | "unsigned"
  | "bad-signature"
  | "bad-rotation"
  | "expired"
  | "unpinned"
  | "invalid"
  | "wrong-node"
  | "replay"
  | "unaddressed"
  | "unconfirmed";

/** Who signed an admitted declaration, and the rotation followed to that key, if any. */
export interface Signed {
  /** The key that signed it: the pinned key, or the end of the rotation. */
  signer: string;
  node: string;
  /** Set when `signer` is not the pinned key: the pinned key rotated to it. */
  rotatedFrom?: string;
}

/** What to do with a declaration from the link. */
export type Admission =
  | ({ verdict: "apply"; serial: number; digest: string; declaration: Declaration } & Signed)
  | ({ verdict: "known"; serial: number; digest: string; declaration: Declaration } & Signed)
  | {
    verdict: "refused";
    reason: RefusalReason;
    serial?: number;
    message: string;
    problems: Problem[];
  };

/** The signature headers a declaration arrived with (absent when the message had none). */
export interface SignatureHeaders {
  /** `Mesh-Signature`. */
  signature?: string;
  /** `Mesh-Key-Rotation`. */
  rotation?: string;
}

/**
 * Decide about `data` received on `subject` with its signature headers;
 * changes nothing (see `recordAdmitted`). `now` is the node's clock, for `not-after`.
 */
export async function admitFromLink(
  engine: Engine,
  data: Uint8Array,
  subject: string,
  { signature, rotation }: SignatureHeaders,
  now: number = Date.now(),
): Promise<Admission> {
  const refused = `${subject} refused, nothing was applied`;
  const pinned = engine.store.meta(META.signer);
  const self = engine.store.meta(META.node);
  if (!pinned || !self) {
    return {
      verdict: "refused",
      reason: "unpinned",
      serial: rawSerial(data),
      message: `${refused}: this node holds no signing key to check declarations against ` +
        "(it was enrolled with a version 1 token); make a new token and enrol again with --replace",
      problems: [{ path: "(signature)", message: "no pinned signing key" }],
    };
  }
  // Expiry is judged last, for a declaration that would be taken: one this node
  // already has stays "known" whatever its not-after (a catch-up on every reconnect).
  const verified = verifyDeclaration(pinned, self, data, signature, rotation);
  if (isSignatureProblem(verified)) {
    return {
      verdict: "refused",
      reason: verified.reason,
      serial: rawSerial(data),
      message: `${refused}: ${verified.message}`,
      problems: [{ path: "(signature)", message: verified.message }],
    };
  }
  const parsed = await parsedSigned(engine, data, subject);
  if ("verdict" in parsed) return parsed;
  return judged(engine, parsed, verified, { pinned, now, refused });
}

/** The safe parse of signed bytes, or the refusal it ends in. */
async function parsedSigned(
  engine: Engine,
  data: Uint8Array,
  subject: string,
): Promise<Declaration & { node: string; serial: number } | Admission> {
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
  const { node, serial } = declaration;
  if (node === undefined || serial === undefined) {
    const missing = node === undefined ? "node" : "serial";
    return {
      verdict: "refused",
      reason: "unaddressed",
      serial,
      message: `${subject} refused, nothing was applied: a declaration from the link must ` +
        `name its ${missing}`,
      problems: [{ path: missing, message: "is required over the link" }],
    };
  }
  return declaration as Declaration & { node: string; serial: number };
}

/** A signed, parsed declaration held to the serial floor, then to its not-after. */
function judged(
  engine: Engine,
  declaration: Declaration & { node: string; serial: number },
  verified: VerifiedSignature,
  { pinned, now, refused }: { pinned: string; now: number; refused: string },
): Admission {
  const { node, serial, digest } = declaration;
  // The floor: the highest serial accepted for this node from any key on the way
  // from the pinned key to the signer (the pinned key alone without a rotation).
  let last: { serial: number; digest: string } | undefined;
  for (const key of verified.path) {
    const record = engine.store.linkSerial(key, node);
    if (record && (!last || record.serial > last.serial)) last = record;
  }
  const signed: Signed = {
    signer: verified.signer,
    node,
    ...(verified.signer === pinned ? {} : { rotatedFrom: pinned }),
  };
  if (last && serial === last.serial && digest === last.digest) {
    return { verdict: "known", serial, digest, declaration, ...signed };
  }
  if (last && serial <= last.serial) {
    return {
      verdict: "refused",
      reason: "replay",
      serial,
      message: `${refused}: serial ${serial} is not newer than the last accepted serial ` +
        `${last.serial} (a replay or a stale declaration)`,
      problems: [{ path: "serial", message: `must be greater than ${last.serial}` }],
    };
  }
  const expired = expiry(verified.notAfter, now);
  if (expired) {
    return {
      verdict: "refused",
      reason: "expired",
      serial,
      message: `${refused}: ${expired.message}`,
      problems: [{ path: "(signature)", message: expired.message }],
    };
  }
  return { verdict: "apply", serial, digest, declaration, ...signed };
}

/** Whether a declaration refused as expired (its `Mesh-Signature`) may be taken at `now`. */
export function expiredAt(signature: string | undefined, now: number): boolean {
  return expiry(notAfterOf(signature), now) !== undefined;
}

/**
 * Record an admitted declaration as the last admitted one for its signing key and node
 * (the replay guard: before it is applied, synced to disk); a declaration signed by a key
 * the pinned key rotated to makes that key the pinned one, in the same commit. With `seq`,
 * the link stream's sequence it was stored at is recorded with it (see
 * {@link admittedAfter}); with `owed`, the declaration itself is kept as the one record of
 * what is admitted and not applied yet (src/store/store.ts `AdmittedRecord`), in the same
 * commit. Making it the store's current declaration is another step: the apply's
 * (engine/mod.ts `apply`, or `makeCurrent` while the host is held), which ends that record.
 */
export function recordAdmitted(
  engine: Pick<Engine, "store">,
  admission: { serial: number; digest: string } & Signed,
  { seq, owed }: { seq?: number; owed?: { declaration: Declaration; origin: string } } = {},
): void {
  const { signer, node, serial, digest, rotatedFrom } = admission;
  engine.store.recordLinkSerial(
    { signer, node, serial, digest },
    rotatedFrom === undefined ? undefined : {
      [META.signerRotated]: JSON.stringify({ from: rotatedFrom, at: new Date().toISOString() }),
    },
    {
      ...(seq === undefined
        ? {}
        : { meta: { [META.declarationSeq]: JSON.stringify({ node, seq }) } }),
      ...(owed === undefined ? {} : {
        admitted: {
          serial,
          digest,
          node,
          origin: owed.origin,
          body: canonicalBody(owed.declaration),
        },
      }),
    },
  );
}

/**
 * Whether stream sequence `seq` comes before that of the declaration last admitted for
 * `node` (then an older serial is a replica behind the others, not a replay).
 */
export function admittedAfter(
  engine: Pick<Engine, "store">,
  node: string | undefined,
  seq: number | undefined,
): boolean {
  let at: { node?: unknown; seq?: unknown } | undefined;
  try {
    at = JSON.parse(engine.store.meta(META.declarationSeq) ?? "null") ?? undefined;
  } catch { /* unreadable: unknown */ }
  return seq !== undefined && at?.node === node && typeof at?.seq === "number" && seq < at.seq;
}

/**
 * Whether the declaration with `digest`, delivered again, is the last admitted from the link
 * and the store does not hold it as current (no declaration, or an older one from the
 * link): after a rescue, which forgot the store's declaration, or in a store kept by a host
 * older than the admitted record (src/store/store.ts `AdmittedRecord`).
 */
export function admittedNotCurrent(engine: Pick<Engine, "store">, digest: string): boolean {
  const last = engine.store.lastLinkSerial()?.digest;
  const current = engine.store.currentHead();
  if (last === undefined || last !== digest) return false;
  return !(current && (current.source !== "link" || current.digest === last));
}

function rawSerial(data: Uint8Array): number | undefined {
  try {
    const serial = JSON.parse(new TextDecoder().decode(data))?.serial;
    return Number.isSafeInteger(serial) ? serial : undefined;
  } catch {
    return undefined;
  }
}
