/**
 * Intake: what becomes of a declaration that came over the uplink before anything is
 * applied. The trust module admits it (src/trust/admission.ts: signature, node, serial
 * floor, not-after); intake records it as admitted and as owed, in one record of the store
 * (src/store/store.ts `AdmittedRecord`, written in the commit of its serial), until its
 * apply starts; keeps one refused as expired for when this node's clock allows it; takes
 * a trust update that rode with it; and reports refusals. What to apply it hands to the
 * reconciler (reconciler.ts).
 */
import { type Declaration, DeclarationRefused, type Problem } from "../declaration/envelope.ts";
import { admit, type Engine } from "../engine/mod.ts";
import { readIdentity, writeTrust } from "../link/identity.ts";
import { type RefusalMessage, refusalMessage } from "../link/messages.ts";
import { caFacts, isTrustProblem, verifyTrust } from "../link/trust.ts";
import type { Log } from "../log.ts";
import { META } from "../store/meta.ts";
import {
  type Admission,
  admitFromLink,
  admittedAfter,
  admittedNotCurrent,
  expiredAt,
  recordAdmitted,
} from "../trust/admission.ts";
import type { ConfirmWindow } from "./confirm.ts";
import type { Trigger, Work } from "./queue.ts";
import type { UplinkSession } from "./session.ts";

/**
 * A declaration admitted from the uplink and not applied yet: the store's admitted record,
 * parsed.
 */
export interface Pending {
  declaration: Declaration;
  digest: string;
  origin: string;
}

/** What intake hands on: a pending declaration to apply, or a reconcile still owed. */
export type Next =
  | { apply: Pending; trigger: Trigger }
  | { reconcile: Trigger }
  | undefined;

/** A declaration pushed over the uplink, as the queue holds it. */
type Pushed = Work & { kind: "declaration" };

/** What intake works with. */
export interface IntakeParts {
  host: Engine;
  session: UplinkSession;
  confirm: ConfirmWindow;
  log: Log;
  /** The clock a declaration's `not-after` is checked against. */
  now: () => number;
  enqueue(work: Work): void;
}

/** Intake of one run process. */
export class Intake {
  readonly #p: IntakeParts;
  /** The store's admitted record, parsed (what it says is the truth: read again when it moved). */
  #pending: Pending | undefined;
  /**
   * The last declaration refused as expired (reported once), kept as it arrived: each
   * tick looks at its not-after against the clock here, and hands it on again once the
   * clock allows it (a node whose clock was wrong takes it when the clock is set right).
   */
  #expired: Pushed | undefined;
  /** The signature of the last declaration reported as expired. */
  #expiredSaid: string | undefined;
  /** The last trust update refused (said once). */
  #trustSaid: string | undefined;

  constructor(parts: IntakeParts) {
    this.#p = parts;
  }

  /**
   * The declaration admitted and not applied yet, as the store's record says (the lock was
   * busy when it came, or the process ended before its apply started): the next reconcile
   * applies it first. After a restart it is read from the store alone, with no uplink.
   */
  async pendingFirst(): Promise<Pending | undefined> {
    const store = this.#p.host.store;
    const digest = store.admittedDigest();
    if (digest !== undefined && this.#pending?.digest === digest) return this.#pending;
    this.#pending = undefined;
    const { record, problem } = store.admitted();
    if (problem !== undefined) {
      this.#p.log(`link: ${problem}; dropped (the link's catch-up brings the last one)`, "warning");
      store.dropAdmitted();
    }
    if (record === undefined) return undefined;
    const { serial, origin, body } = record;
    const dropped = (why: string) => {
      this.#p.log(`link: serial ${serial}, admitted at ${record.at}, ${why}: dropped`, "warning");
      store.dropAdmitted(record.digest);
      return undefined;
    };
    if (record.node !== store.meta(META.node)) {
      return dropped(`was for node "${record.node}", and this node is enrolled as another`);
    }
    let declaration: Declaration;
    try {
      declaration = await admit(this.#p.host, body, { source: "link", origin });
    } catch (error) {
      if (!(error instanceof DeclarationRefused)) throw error;
      this.refuse(serial, "invalid", error.message, error.problems);
      return dropped("is refused by this version of the host");
    }
    if (declaration.digest !== record.digest) return dropped("does not match its digest");
    this.#p.log(
      `link: serial ${serial}, admitted at ${record.at}, was not applied yet: applying it`,
    );
    return this.#pending = { declaration, digest: record.digest, origin };
  }

  /** Its apply ran (or the host, held, stored it): no longer owed. */
  done(pending: Pending | undefined): void {
    if (!pending) return;
    this.#p.host.store.dropAdmitted(pending.digest);
    if (this.#pending === pending) this.#pending = undefined;
  }

  /** The declaration with `digest` was refused (a confirm window lapsed): no longer owed. */
  drop(digest: string): void {
    this.#p.host.store.dropAdmitted(digest);
    if (this.#pending?.digest === digest) this.#pending = undefined;
  }

  /** Admit a pushed declaration, and say what is to be done with it. */
  async take(work: Pushed): Promise<Next> {
    const { host, confirm } = this.#p;
    const subject = this.#p.session.origin;
    const admission = await admitFromLink(host, work.data, subject, work, this.#p.now());
    if (admission.verdict === "refused") return this.#refused(work, admission);
    this.#expired = this.#expiredSaid = undefined;
    // A trust update rides with a declaration signed by the key it must be signed by.
    if (work.trust !== undefined) this.#takeTrust(work.trust, admission.signer);
    // Refused when its confirm window lapsed: never applied again (reported then).
    if (confirm.refuses(admission.digest)) return afterRefusal(work.trigger);
    if (admission.verdict === "known") {
      // Signed again by a key the pinned key rotated to: that key is pinned now.
      if (admission.rotatedFrom !== undefined) this.#recordAdmitted(admission);
      const pending = this.#unapplied(admission.declaration, subject);
      // Accepted, but its apply never started (the lock was busy, or the process ended
      // in between): the link will not deliver it again, so it is applied now.
      if (pending) return { apply: pending, trigger: work.trigger };
      // The declaration this node already has (delivered again, or fetched on reconnect).
      if (work.trigger !== "declaration") return { reconcile: work.trigger };
      this.#p.log(
        `link: serial ${admission.serial} again: this node has it already, nothing to do`,
      );
      return undefined;
    }
    const { declaration, digest } = admission;
    this.#recordAdmitted(admission, { seq: work.seq, owed: { declaration, origin: subject } });
    this.#pending = { declaration, digest, origin: subject };
    return { apply: this.#pending, trigger: work.trigger };
  }

  #refused(work: Pushed, admission: Admission & { verdict: "refused" }): Next {
    const { serial, reason, message, problems } = admission;
    if (reason === "expired") {
      // Perhaps this node's clock is wrong: kept, and taken once the clock is right
      // (retryExpired, no network); said once.
      this.#expired = { ...work, trigger: "declaration" };
      if (this.#expiredSaid === work.signature) return afterRefusal(work.trigger);
      this.#expiredSaid = work.signature;
    }
    const node = this.#p.session.identity?.node;
    if (reason === "replay" && admittedAfter(this.#p.host, node, work.seq)) {
      // Older than what this node admitted, and stored before it: not a replay, but a
      // replica behind the others (any one answers the catch-up's direct get).
      this.#p.log(
        `link: serial ${serial} (stream sequence ${work.seq}) is older than the accepted ` +
          "one, from a replica behind the others: ignored",
        "debug",
      );
      return afterRefusal(work.trigger);
    }
    this.refuse(serial, reason, message, problems);
    return afterRefusal(work.trigger);
  }

  /** Report a refusal upward (through the outbox), and log it. */
  refuse(
    serial: number | undefined,
    reason: RefusalMessage["reason"],
    message: string,
    problems: Problem[],
  ): void {
    this.#p.log(`link: ${message.replace(/:\n\s*/, ": ").replace(/\n\s*/g, "; ")}`, "warning");
    const node = this.#p.session.identity?.node;
    if (node !== undefined) {
      this.#p.session.keep(
        JSON.stringify(refusalMessage(node, serial, reason, message, problems)),
      );
    }
  }

  /** The declaration refused as expired, handed on again once this node's clock allows it. */
  retryExpired(): void {
    const expired = this.#expired;
    if (!expired || expiredAt(expired.signature, this.#p.now())) return;
    this.#expired = undefined;
    this.#p.enqueue(expired);
  }

  /**
   * A trust update (src/link/trust.ts) that came with a declaration signed by `signer`:
   * taken when it is signed by that key and newer than the list this node holds (kept
   * durably, used from the next connection on); said and left otherwise.
   */
  #takeTrust(header: string, signer: string): void {
    const identity = this.#p.session.identity;
    if (!identity) return;
    const list = verifyTrust(header, signer);
    if (isTrustProblem(list)) {
      if (this.#trustSaid !== header) {
        this.#trustSaid = header;
        this.#p.log(`link: a trust update was not taken: ${list.problem}`, "warning");
      }
      return;
    }
    const kept = readIdentity(this.#p.host.store)?.trust ?? identity.trust;
    if (list.serial <= kept.serial) return; // the one kept, or an older one replayed
    writeTrust(this.#p.host.store, list);
    this.#p.session.trusted(list);
    const now = Date.now();
    this.#p.log(
      `link: trust update ${list.serial} taken: brokers' certificates must now chain to ${
        list.cas.map((ca) => {
          const f = caFacts(ca, now);
          return `"${f.subject}" (until ${f.ends})`;
        }).join(" or ")
      }`,
      "warning",
    );
  }

  /**
   * Record an admitted declaration (the replay guard; with `seq`, its stream sequence; with
   * `owed`, the store's admitted record), and a rotation followed to its key.
   */
  #recordAdmitted(
    admission: Parameters<typeof recordAdmitted>[1],
    more?: Parameters<typeof recordAdmitted>[2],
  ): void {
    recordAdmitted(this.#p.host, admission, more);
    if (admission.rotatedFrom !== undefined) {
      this.#p.log(
        `link: the control plane's signing key moved from ${admission.rotatedFrom} to ` +
          `${admission.signer} (a rotation signed by the key pinned before); only the new key ` +
          "is trusted from now on",
        "warning",
      );
      this.#p.session.signedBy(admission.signer);
    }
  }

  /**
   * The admitted `declaration`, delivered again, when it is still owed: the store's admitted
   * record, or the last admitted one that the store does not hold (after a rescue).
   */
  #unapplied(declaration: Declaration, origin: string): Pending | undefined {
    const { digest } = declaration;
    if (this.#pending?.digest === digest) return this.#pending;
    const owed = this.#p.host.store.admittedDigest() === digest;
    if (!owed && !admittedNotCurrent(this.#p.host, digest)) return undefined;
    return this.#pending = { declaration, digest, origin };
  }
}

/** A refusal on (re)connect still owes the machine its reconcile from the store. */
function afterRefusal(trigger: Trigger): Next {
  return trigger !== "declaration" ? { reconcile: trigger } : undefined;
}
