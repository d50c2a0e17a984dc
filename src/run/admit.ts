/**
 * Admission of a declaration from the link: first its signature, over the exact
 * bytes, by the signing key pinned at enrolment (nothing parses an unsigned or
 * wrongly signed declaration); then the safe parse (no `action`, none of
 * the host's own files or units), addressed to this node, carrying a serial newer
 * than the last one accepted (kept in store meta, so a replay is refused across
 * restarts too). The same declaration arriving again (a duplicate delivery, or
 * the catch-up on reconnect) is "held", not a replay.
 */
import { DeclarationRefused, type Problem } from "../declaration/parse.ts";
import { type Host, parseFor } from "../host.ts";
import { META } from "../link/identity.ts";
import type { RefusalMessage } from "../link/messages.ts";
import { verifyDeclaration } from "../link/signature.ts";

/** What to do with a declaration from the link. */
export type Admission =
  | { verdict: "apply"; serial: number; digest: string }
  | { verdict: "held"; serial: number }
  | {
    verdict: "refused";
    reason: RefusalMessage["reason"];
    serial?: number;
    message: string;
    problems: Problem[];
  };

/**
 * Decide about `data` received on `subject` with the `Mesh-Signature` header
 * `signature`; changes nothing (see `accept`).
 */
export async function admit(
  host: Host,
  data: Uint8Array,
  subject: string,
  signature: string | undefined,
): Promise<Admission> {
  const refused = `${subject} refused, nothing was applied`;
  const signer = host.store.meta(META.signer);
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
    declaration = await parseFor(host, data, "link", subject);
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
  const lastText = host.store.meta(META.serial);
  const last = lastText === undefined ? undefined : Number(lastText);
  if (last !== undefined && serial === last && digest === host.store.meta(META.digest)) {
    return { verdict: "held", serial };
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
  return { verdict: "apply", serial, digest };
}

/** Record an admitted declaration as the last accepted one (before it is applied). */
export function accept(
  host: Pick<Host, "store">,
  admission: { serial: number; digest: string },
): void {
  // Synced to disk before the apply: after a power cut, a replay of an older serial is still refused.
  host.store.setMetaDurably({
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
