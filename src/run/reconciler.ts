/**
 * The reconciler: holds the machine to a declaration. A reconcile applies what intake
 * left pending, else what the store holds (or the bundle, with nothing yet); an apply
 * goes through the engine (the lock, the hold), opens the confirm window for a pushed
 * change to what can cut the node off, and its report goes into the outbox. While a
 * person holds the host it only checks, and reports what differs.
 */
import { BusyError, describeError } from "../errors.ts";
import { type Declaration, DeclarationRefused } from "../declaration/envelope.ts";
import {
  admit,
  apply,
  type ApplyReport,
  type Engine,
  HeldError,
  makeCurrent,
  plan,
  SupersededError,
} from "../engine/mod.ts";
import { type Hold, pendingRescue } from "../engine/hold.ts";
import { tally } from "../engine/types.ts";
import { LauncherContract } from "../launcher_files.ts";
import { applyReportText, heldMessage } from "../link/messages.ts";
import type { Log } from "../log.ts";
import type { Source } from "../store/records.ts";
import { VERSION } from "../version.ts";
import type { ConfirmWindow } from "./confirm.ts";
import type { HoldWatch } from "./hold_watch.ts";
import type { Intake, Pending } from "./intake.ts";
import type { Trigger, Work } from "./queue.ts";
import type { UplinkSession } from "./session.ts";

/** What the reconciler asks of the loop. */
export interface ReconcilerHooks {
  enqueue(work: Work): void;
  /** Arm the drift timer again (a reconcile ran to its end). */
  armDrift(): void;
  /** A piece of work ended: the status record and the metrics are written again. */
  changed(): void;
  /** An upgrade was staged for the launcher: exit 0 once reported. */
  upgrade(why: string): void;
}

/** What the reconciler works with. */
export interface ReconcilerParts {
  host: Engine;
  log: Log;
  session: UplinkSession;
  intake: Intake;
  confirm: ConfirmWindow;
  holdWatch: HoldWatch;
  hooks: ReconcilerHooks;
}

/** Where a declaration to apply came from, and why it is applied. */
interface Origin {
  source: Source;
  origin: string;
  trigger: Trigger;
}

/** The reconciler of one run process. */
export class Reconciler {
  readonly #p: ReconcilerParts;
  readonly #launcher: LauncherContract;
  /** Aborted when the service stops: the apply under way stops before its next step. */
  readonly #abort = new AbortController();

  constructor(parts: ReconcilerParts) {
    this.#p = parts;
    this.#launcher = new LauncherContract(parts.host.config.stateDir, VERSION, parts.log);
  }

  /** Stop the apply under way before its next step. */
  abort(reason: string): void {
    this.#abort.abort(reason);
  }

  /** A confirm window that lapsed: its serial refused and reported, the machine taken back. */
  async settleWindow(): Promise<boolean> {
    const lapse = await this.#p.confirm.settle();
    if (!lapse) return false;
    this.#p.intake.drop(lapse.digest);
    this.#p.intake.refuse(lapse.serial, "unconfirmed", lapse.message, lapse.problems);
    await this.reconcile("revert");
    return true;
  }

  /** Apply a declaration intake admitted and left pending. */
  async applyPending(pending: Pending, trigger: Trigger): Promise<void> {
    const { declaration, origin } = pending;
    await this.#apply(declaration, { source: "link", origin, trigger }, pending);
  }

  async reconcile(asked: Trigger): Promise<void> {
    // A hold lifted since the watch last looked: this reconcile is the one that applies
    // what was withheld (and says so), whatever asked for it (the drift timer, say).
    const lifted = this.#p.holdWatch.takeLifted();
    if (lifted && asked !== "unhold") {
      this.#p.log(`run: the hold of ${lifted.by} was lifted: applying the latest declaration`);
    }
    const trigger: Trigger = lifted ? "unhold" : asked;
    // A declaration admitted from the link whose apply could not start yet (the
    // lock was busy) comes first: its serial is already recorded as admitted, so the link will
    // not deliver it again, and the store still holds the older declaration.
    const pending = await this.#p.intake.pendingFirst();
    if (pending) return await this.applyPending(pending, trigger);
    const { store, config } = this.#p.host;
    const current = store.current();
    const bundlePath = config.bundlePath;
    // After a rescue an enrolled node holds nothing until the mesh answers: the bundle
    // would re-derive the machine from the package's substrate instead.
    if (!current && this.#p.session.identity && pendingRescue(store)) {
      this.#p.log(`run: rescued: holding nothing until the mesh declares this node (${trigger})`);
      return await this.#nothingToHold();
    }
    const expectCurrent = current?.digest ?? null;
    // Only the configured bundle (the file the package ships, or the configuration's
    // "bundle") is read again, with the trusted parse: it is the authority and the
    // store keeps a copy. Anything else (a file, stdin, `apply --bundle OTHER`) is
    // held to the body stored when it was applied; a later edit of that file is
    // never read, so it can never become trusted.
    if (current && (current.source !== "bundle" || current.origin !== bundlePath)) {
      const { source, origin } = current;
      return await this.#admitAndApply(current.body, { source, origin, trigger }, expectCurrent);
    }
    let text: string | undefined;
    try {
      text = await Deno.readTextFile(bundlePath);
    } catch (error) {
      if (!current) {
        const why = error instanceof Deno.errors.NotFound ? "does not exist" : describeError(error);
        this.#p.log(
          `run: nothing to hold yet: no declaration in the store, and the bundle ${bundlePath} ${why}`,
        );
        return await this.#nothingToHold();
      }
    }
    const from = { source: "bundle" as const, origin: bundlePath, trigger };
    await this.#admitAndApply(text ?? current!.body, from, expectCurrent);
  }

  async #nothingToHold(): Promise<void> {
    await this.#launcher.reconciled();
    this.#p.hooks.armDrift();
  }

  /** Admit what the store (or the bundle) holds, then apply it. */
  async #admitAndApply(text: string, from: Origin, expectCurrent: string | null): Promise<void> {
    let declaration;
    try {
      declaration = await admit(this.#p.host, text, from);
    } catch (error) {
      if (!(error instanceof DeclarationRefused)) throw error;
      // Refused before applying: this version has not got through a reconcile, so it
      // confirms nothing (a version that refuses what the previous one held is rolled back).
      this.#p.log(`apply (${from.trigger}): ${error.message}`, "warning");
      if (from.source === "link") {
        this.#p.intake.refuse(undefined, "invalid", error.message, error.problems);
      }
      this.#p.hooks.armDrift();
      return;
    }
    await this.#apply(declaration, from, undefined, expectCurrent);
  }

  async #apply(
    declaration: Declaration,
    from: Origin,
    pending?: Pending,
    expectCurrent?: string | null,
  ): Promise<void> {
    const { source, origin, trigger } = from;
    let report;
    try {
      // Pushed over the link: a change to what can cut the node off opens the window.
      await this.#p.confirm.before(declaration, origin, pending !== undefined);
      const contentSources = this.#p.session.contentSources();
      report = await apply(this.#p.host, declaration, {
        source,
        origin,
        signal: this.#abort.signal,
        lockWaitMs: 10_000,
        ...(contentSources.length > 0 ? { contentSources } : {}),
        ...(expectCurrent === undefined ? {} : { expectCurrent }),
        ...(trigger === "revert" ? { networkFirst: true } : {}),
      });
    } catch (error) {
      if (!await this.#notApplied(error, declaration, from, pending)) {
        this.#p.intake.done(pending);
        throw error;
      }
      return;
    }
    this.#p.intake.done(pending);
    await this.#applied(report, from);
  }

  /** An apply that did not start: held, superseded or busy (true), or another error. */
  async #notApplied(
    error: unknown,
    declaration: Declaration,
    from: Origin,
    pending: Pending | undefined,
  ): Promise<boolean> {
    const { trigger } = from;
    if (error instanceof HeldError) {
      this.#p.confirm.abandon(); // nothing was applied: no window runs for it
      await this.#whileHeld(error.hold, declaration, from, pending);
      return true;
    }
    if (error instanceof SupersededError) {
      this.#p.confirm.abandon(); // nothing was applied: no window runs for it
      // What this reconcile read was replaced while it waited (an apply by hand, a
      // rescue): reconcile again from what the store holds now.
      this.#p.log(`apply (${trigger}): ${error.message}; reconciling again`);
      this.#p.hooks.enqueue({ kind: "reconcile", trigger });
      return true;
    }
    if (error instanceof BusyError) {
      this.#p.confirm.abandon();
      // An admitted declaration stays pending: the retry applies it, not the store's older one.
      this.#p.log(
        `apply (${trigger}): another apply holds the lock; trying again in 15 s` +
          (pending ? " (the declaration just accepted stays pending until then)" : ""),
        "warning",
      );
      setTimeout(() => this.#p.hooks.enqueue({ kind: "reconcile", trigger }), 15_000);
      return true;
    }
    return false;
  }

  /** An apply ran: logged, the window told, the launcher told, reported upward. */
  async #applied(report: ApplyReport, from: Origin): Promise<void> {
    const { session, hooks } = this.#p;
    // The apply that answered a rescue is reported as one, whatever started it.
    const trigger = report.rescue ? "rescue" : from.trigger;
    const c = report.counts;
    this.#p.log(
      `apply (${trigger}, ${from.source}${
        report.serial === undefined ? "" : ` serial ${report.serial}`
      }): ` +
        `${report.outcome}: ${tally(c)} in ${report.durationMs} ms${
          report.error ? `: ${report.error}` : ""
        }`,
      report.outcome === "failed" ? "error" : report.outcome === "converged" ? "info" : "warning",
    );
    this.#p.confirm.applied(report);
    // It got through a reconcile (converged, or a resource failed: the machine's problem,
    // not the program's): known-good and the cleared counter, one event. Interrupted: not.
    if (report.outcome !== "interrupted") await this.#launcher.reconciled();
    // Into the outbox first (delivered in order, removed once the broker acknowledged it).
    const node = session.identity?.node;
    if (node !== undefined) {
      session.keep(applyReportText(node, report, trigger).text);
      session.heartbeat(false);
      if (c.changed + c.removed + c.forgotten > 0) session.inventory.changed();
    }
    // An upgrade of the host staged for the launcher: after the report, exit 0 as for a
    // replaced program file, so the launcher applies it and starts the new version.
    if (report.restart !== undefined) hooks.upgrade(report.restart);
    hooks.armDrift();
    hooks.changed();
  }

  /**
   * The host is held (engine/hold.ts): nothing is applied. A declaration pushed over the
   * link is stored as the one to hold the machine to (the hold's end applies it); the
   * machine is only checked against it, and what differs is logged and reported.
   */
  async #whileHeld(
    hold: Hold,
    declaration: Declaration,
    { source, origin, trigger }: Origin,
    pending: Pending | undefined,
  ): Promise<void> {
    this.#p.holdWatch.withheld(hold);
    const held = `held by ${hold.by} since ${hold.since} (${hold.reason})`;
    if (source === "link" && pending) {
      makeCurrent(this.#p.host, declaration, { source, origin });
      this.#p.intake.done(pending);
      this.#p.log(
        `apply (${trigger}, link serial ${declaration.serial}): ${held}: stored, not applied; ` +
          "`nox-mesh-host unhold` applies it",
        "warning",
      );
    }
    let entries: Awaited<ReturnType<typeof plan>> = [];
    let error: string | undefined;
    try {
      entries = await plan(this.#p.host, declaration);
    } catch (cause) {
      error = `the check failed: ${describeError(cause)}`;
    }
    const differ = entries.filter((e) => e.status !== "in-sync");
    this.#p.log(
      `check (${trigger}): ${held}: nothing applied; ` +
        (error ??
          (differ.length === 0
            ? "the machine matches the declaration"
            : `${differ.length} would change: ${
              differ.slice(0, 5).map((e) => `${e.type} "${e.id}" ${e.status}`).join(", ")
            }${differ.length > 5 ? ", …" : ""}`)),
      differ.length > 0 || error ? "warning" : "info",
    );
    // A held check ran to its end and recorded its outcome: the program works (ADR 0059's
    // "started and got through a reconcile"), whatever the machine looks like.
    await this.#launcher.reconciled();
    const node = this.#p.session.identity?.node;
    if (node !== undefined) {
      this.#p.session.keep(
        JSON.stringify(heldMessage(node, trigger, hold, declaration, entries, error)),
      );
      this.#p.session.heartbeat(false);
    }
    this.#p.hooks.armDrift();
    this.#p.hooks.changed();
  }
}
