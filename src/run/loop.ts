/**
 * `run` (R6): the service. Four triggers and only one clock:
 *   start       reconcile what the store holds (or the bundle, with nothing yet);
 *   declaration a pushed declaration, checked (safe parse, addressed to this
 *               node, serial newer than the last accepted) and applied;
 *   reconnect   the declaration published while away (if newer), else the store;
 *   drift       a timer (default 600 s) that re-applies what the store holds.
 * One apply at a time, through the engine's admit-then-apply road, as the command line.
 * Heartbeats on link, after every apply and every heartbeat interval. After
 * the first reconcile that ran to its end and recorded its outcome (converged, or
 * failed on a resource; never a crash, an internal error, an interrupted apply or a
 * refusal before applying): known-good written and launcher failures cleared, one event.
 * When the program file was replaced, or an apply made a change that takes effect only at
 * the next start (an upgrade staged for the launcher): finish the apply, report, exit 0.
 * Above the memory ceiling: finish the apply, say why, exit for a restart the
 * launcher does not count (memory_ceiling.ts).
 */
import { BusyError, describeError } from "../errors.ts";
import { type Declaration, DeclarationRefused } from "../declaration/envelope.ts";
import {
  admit,
  admitFromLink,
  admittedAfter,
  admittedNotCurrent,
  apply,
  type Engine,
  HeldError,
  isLastAdmitted,
  makeCurrent,
  plan,
  recordAdmitted,
  SupersededError,
} from "../engine/mod.ts";
import { type Hold, pendingRescue } from "../engine/hold.ts";
import { HoldWatch } from "./hold_watch.ts";
import { metricsFacts, MetricsFile } from "./metrics.ts";
import { type Source, tally } from "../engine/types.ts";
import { VERSION } from "../version.ts";
import { type Identity, readIdentity, readSeed, writeTrust } from "../link/identity.ts";
import { caFacts, isTrustProblem, verifyTrust } from "../link/trust.ts";
import { Link, type LinkOptions } from "../link/link.ts";
import { subjectsOf } from "../link/subjects.ts";
import { expiry, notAfterOf } from "../link/signature.ts";
import {
  applyMessage,
  heldMessage,
  type RefusalMessage,
  refusalMessage,
  type Trigger,
} from "../link/messages.ts";
import { LauncherContract } from "../launcher_files.ts";
import { Heartbeats } from "./heartbeat.ts";
import { type Work, WorkQueue } from "./queue.ts";
import { type RunStatus, type ServicePhase, writeRunStatus } from "./run_status.ts";
import { DriftTimer, every, everyJittered } from "./timers.ts";
import { MemoryCeiling } from "./memory_ceiling.ts";
import { ProgramWatch } from "./upgrade_watch.ts";
import type { Log } from "../log.ts";
import type { Profile } from "../profile.ts";
import { OutboxSender } from "./outbox.ts";
import { InventoryReporter } from "./inventory.ts";
import { ConfirmWindow } from "./confirm.ts";

/** How to run the service. */
export interface RunOptions {
  /** Aborted on SIGTERM/SIGINT: stop taking work, abort the apply between steps, close the link. */
  signal?: AbortSignal;
  /** One line per event (the service's log), with its level (src/log.ts). */
  log: Log;
  /** Detects this machine's profile for the inventory (the command line passes the OS's). */
  profile?: () => Promise<Profile>;
  /** Override the configured drift interval (seconds). */
  driftIntervalSeconds?: number;
  /** Override the configured heartbeat interval (seconds). */
  heartbeatIntervalSeconds?: number;
  /** The program file to watch for self-upgrade; undefined detects it, null disables. */
  program?: ProgramWatch | null;
  link?: LinkOptions;
  /** How long the first link attempt may delay the start reconcile (ms, default 10 s). */
  startLinkWaitMs?: number;
  /** While not enrolled, how often to look for an identity in the store (ms, default 2 s). */
  enrolCheckMs?: number;
  /** The clock a declaration's `not-after` is checked against (default Date.now). */
  now?: () => number;
  /** How often to look for a hold lifted or a rescue made (ms, default 2 s). */
  holdCheckMs?: number;
}

/** Why the service ended (signal, upgrade: exit 0; memory, identity, rescue: EXIT.restart). */
export interface RunResult {
  reason: "signal" | "upgrade" | "memory" | "identity" | "rescue";
  detail: string;
}

/** Whether the service ended to be started again at once (exit 10, not counted). */
export function wantsRestart(reason: RunResult["reason"]): boolean {
  return reason === "memory" || reason === "identity" || reason === "rescue";
}

/** Why a restart was wanted, for the status record. */
const RESTART_FOR: Partial<Record<RunResult["reason"], string>> = {
  identity: "enrolled again",
  memory: "memory ceiling",
  rescue: "rescue",
};

/** A declaration admitted from the link (its serial recorded: `recordAdmitted`) and not applied yet. */
interface Pending {
  declaration: Declaration;
  digest: string;
  origin: string;
}

/** Run the service until a signal or a self-upgrade. */
export function runService(host: Engine, options: RunOptions): Promise<RunResult> {
  return new RunLoop(host, options).run();
}

/**
 * The loop: takes work from the queue one at a time (a pushed declaration, or a
 * reconcile from start, reconnect or the drift timer), admits and applies it
 * through the engine, reports and heartbeats over the link, keeps the status
 * record, and stops for a signal or a replaced program file.
 */
class RunLoop {
  readonly #host: Engine;
  readonly #opt: RunOptions;
  readonly #log: Log;
  readonly #outbox: OutboxSender;
  readonly #inventory: InventoryReporter;
  readonly #drift: DriftTimer;
  readonly #heartbeatMs: number;
  readonly #heartbeats: Heartbeats;
  readonly #memory: MemoryCeiling;
  readonly #confirm: ConfirmWindow;
  #worked = false;
  /** Why the confirm window's last new connection failed (logged once per reason). */
  #freshFailure: string | undefined;
  readonly #queue = new WorkQueue();
  readonly #applyAbort = new AbortController();
  readonly #startedAt = performance.now();
  readonly #startedIso = new Date().toISOString();
  #stop: RunResult | undefined;
  #halted!: () => void;
  readonly #stopped = new Promise<"down">((resolve) => this.#halted = () => resolve("down"));
  #busy = false;
  #identity: Identity | undefined;
  #link: Link | undefined;
  #linkProblem: string | undefined;
  #program: ProgramWatch | undefined;
  readonly #launcher: LauncherContract;
  #pending: Pending | undefined;
  /**
   * The last declaration refused as expired (reported once), kept as it arrived: each
   * tick looks at its not-after against the clock here, and hands it on again once the
   * clock allows it (a node whose clock was wrong takes it when the clock is set right).
   */
  #expired: (Work & { kind: "declaration" }) | undefined;
  /** The signature of the last declaration reported as expired. */
  #expiredSaid: string | undefined;
  /** The last trust update refused (said once). */
  #trustSaid: string | undefined;
  #startDone = false;
  #stopTicking: (() => void) | undefined;
  #stopEnrolWatch: (() => void) | undefined;
  #phase: ServicePhase = "starting";
  readonly #holdWatch: HoldWatch;
  readonly #metrics: MetricsFile | undefined;

  constructor(host: Engine, options: RunOptions) {
    this.#host = host;
    this.#opt = options;
    this.#log = options.log;
    this.#drift = new DriftTimer(
      1000 * (options.driftIntervalSeconds ?? host.config.driftIntervalSeconds),
      () => this.#enqueue({ kind: "reconcile", trigger: "drift" }),
    );
    this.#heartbeatMs = 1000 *
      (options.heartbeatIntervalSeconds ?? host.config.heartbeatIntervalSeconds);
    this.#heartbeats = new Heartbeats(host.store);
    this.#memory = new MemoryCeiling(host.config.memoryCeilingMiB, 2 * this.#heartbeatMs);
    this.#launcher = new LauncherContract(host.config.stateDir, VERSION, options.log);
    const { store, config } = host;
    this.#outbox = new OutboxSender({ store, bounds: config.outbox, log: options.log });
    this.#confirm = new ConfirmWindow({
      store,
      windowSeconds: config.confirmWindowSeconds,
      log: options.log,
      probe: (timeoutMs) => this.#probeLink(timeoutMs),
      lapsed: () => this.#enqueue({ kind: "reconcile", trigger: "revert" }),
    });
    this.#inventory = new InventoryReporter({
      store,
      stateDir: config.stateDir,
      profile: options.profile,
      log: options.log,
    });
    this.#holdWatch = new HoldWatch(store, {
      lifted: (hold) => {
        this.#log(`run: the hold of ${hold.by} was lifted: applying the latest declaration`);
        this.#enqueue({ kind: "reconcile", trigger: "unhold" });
      },
      rescued: (rescue) => this.#rescued(rescue.by),
    });
    const metricsFile = host.config.metricsFile;
    this.#metrics = metricsFile
      ? new MetricsFile(metricsFile, () => host.providers.fs, options.log)
      : undefined;
  }

  /** Rewrite the metrics file (host.json metricsFile), when there is one. */
  #writeMetrics(): void {
    this.#metrics?.update(() =>
      metricsFacts(
        this.#host.store,
        this.#stop === undefined && this.#link?.state.phase === "up",
        this.#link?.state.certificate,
      )
    );
  }

  async run(): Promise<RunResult> {
    const onSignal = () =>
      this.#halt({ reason: "signal", detail: String(this.#opt.signal?.reason ?? "signal") });
    if (this.#opt.signal?.aborted) onSignal();
    this.#opt.signal?.addEventListener("abort", onSignal, { once: true });
    this.#program = this.#opt.program === undefined
      ? await ProgramWatch.current()
      : this.#opt.program ?? undefined;
    this.#log(
      `run: ${VERSION} starting; state ${this.#host.config.stateDir}; drift every ${this.#drift.seconds} s, ` +
        `heartbeat every ${this.#heartbeatMs / 1000} s; ${
          this.#program
            ? `watching ${this.#program.path} (${this.#program.form})`
            : "program file unknown: no self-upgrade"
        }`,
    );
    this.#confirm.resume();
    this.#writeStatus();
    // Jittered, so a fleet started (or reconnected) together does not beat in step.
    this.#stopTicking = everyJittered(this.#heartbeatMs, () => this.#tick());

    this.#identity = readIdentity(this.#host.store);
    if (this.#identity) {
      const first = await this.#startLink(this.#identity);
      if (first !== "up") this.#enqueue({ kind: "reconcile", trigger: "start" });
    } else {
      this.#log(
        "run: not enrolled: holding the machine to the store (or the bundle) until a token is used",
      );
      this.#enqueue({ kind: "reconcile", trigger: "start" });
      this.#stopEnrolWatch = every(this.#opt.enrolCheckMs ?? 2000, () => this.#checkEnrolment());
    }
    this.#phase = "running";
    this.#armDrift();
    this.#holdWatch.start(this.#opt.holdCheckMs ?? 2000);
    this.#writeStatus();
    this.#writeMetrics();

    for (let work = await this.#queue.next(); work; work = await this.#queue.next()) {
      this.#busy = true;
      try {
        await this.#do(work);
      } catch (error) {
        this.#log(
          `run: ${work.kind} (${work.trigger}) failed unexpectedly: ${describeError(error)}`,
          "error",
        );
        // The drift timer is armed again at the end of every reconcile that ran to its
        // end; this one did not, and without this the machine would go unwatched.
        this.#armDrift();
      } finally {
        this.#busy = false;
        this.#worked = true;
      }
      this.#checkMemory();
      if (!this.#stop) await this.#checkUpgrade();
    }
    return await this.#shutdown();
  }

  // ---- triggers -------------------------------------------------------------

  async #startLink(identity: Identity): Promise<"up" | "down"> {
    let seed: Uint8Array;
    try {
      seed = await readSeed(identity);
    } catch (error) {
      this.#linkProblem = describeError(error);
      this.#log(`link: cannot start: ${this.#linkProblem}`, "error");
      this.#writeStatus();
      return "down";
    }
    let settle: (outcome: "up" | "down") => void = () => {};
    const first = new Promise<"up" | "down">((resolve) => settle = resolve);
    this.#link = new Link(identity, seed, {
      onDeclaration: (pushed) =>
        this.#enqueue({ kind: "declaration", ...pushed, trigger: "declaration" }),
      onUp: ({ catchUp }) => {
        const trigger: Trigger = this.#startDone ? "reconnect" : "start";
        this.#startDone = true;
        settle("up");
        this.#heartbeat(true);
        this.#outbox.kick();
        this.#inventory.linked();
        this.#enqueue(
          catchUp ? { kind: "declaration", ...catchUp, trigger } : { kind: "reconcile", trigger },
        );
      },
      onState: (state) => {
        if (state.phase === "down") settle("down");
        this.#writeStatus();
        this.#writeMetrics();
      },
      log: this.#log,
    }, this.#opt.link);
    this.#outbox.attach(this.#link, identity.node);
    this.#inventory.attach(this.#link, identity);
    this.#link.start();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const outcome = await Promise.race([
      first,
      this.#stopped,
      new Promise<"down">((resolve) =>
        timer = setTimeout(() => resolve("down"), this.#opt.startLinkWaitMs ?? 10_000)
      ),
    ]);
    clearTimeout(timer);
    if (outcome === "down") this.#startDone = true;
    return outcome;
  }

  #checkEnrolment(): void {
    const identity = readIdentity(this.#host.store);
    if (!identity || this.#stop) return;
    this.#stopEnrolWatch?.();
    this.#stopEnrolWatch = undefined;
    this.#identity = identity;
    this.#log(`run: enrolled as ${identity.node}; starting the link`);
    this.#startLink(identity).catch((error) => this.#log(`link: ${describeError(error)}`));
  }

  #armDrift(): void {
    if (!this.#stop) this.#drift.arm();
  }

  #tick(): void {
    this.#heartbeat(false);
    this.#retryExpired();
    this.#inventory.tick();
    if (!this.#busy) this.#checkMemory();
    if (!this.#busy) this.#checkIdentity();
    if (!this.#busy) this.#checkUpgrade().catch(() => {});
    this.#writeStatus();
    this.#writeMetrics();
  }

  // ---- the work loop --------------------------------------------------------

  #enqueue(work: Work): void {
    if (!this.#stop) this.#queue.push(work);
  }

  #halt(result: RunResult): void {
    if (this.#stop) return;
    this.#stop = result;
    this.#halted();
    if (result.reason === "signal") {
      this.#log(`run: ${result.detail}: stopping (the current apply stops before its next step)`);
      this.#applyAbort.abort(result.detail);
    }
    this.#queue.close();
  }

  async #do(work: Work): Promise<void> {
    if (await this.#settleWindow() && work.kind === "reconcile") return;
    if (work.kind === "reconcile") return await this.#reconcile(work.trigger);
    const subject = subjectsOf(this.#identity?.node ?? "").declaration;
    const admission = await admitFromLink(
      this.#host,
      work.data,
      subject,
      work,
      (this.#opt.now ?? Date.now)(),
    );
    if (admission.verdict !== "refused") this.#expired = this.#expiredSaid = undefined;
    // A trust update rides with a declaration signed by the key it must be signed by.
    if (admission.verdict !== "refused" && work.trust !== undefined) {
      this.#takeTrust(work.trust, admission.signer);
    }
    // Refused when its confirm window lapsed: never applied again (reported then).
    if (admission.verdict !== "refused" && this.#confirm.refuses(admission.digest)) {
      return await this.#afterRefusal(work.trigger);
    }
    if (admission.verdict === "held") {
      // Signed again by a key the pinned key rotated to: that key is pinned now.
      if (admission.rotatedFrom !== undefined) this.#recordAdmitted(admission);
      const pending = this.#unapplied(admission.declaration, subject);
      // Accepted, but its apply never started (the lock was busy, or the process ended
      // in between): the link will not deliver it again, so it is applied now.
      if (pending) {
        return await this.#apply(pending.declaration, "link", subject, work.trigger, pending);
      }
      // The declaration this node already holds (delivered again, or fetched on reconnect).
      if (work.trigger !== "declaration") return await this.#reconcile(work.trigger);
      this.#log(`link: serial ${admission.serial} again: already held, nothing to do`);
      return;
    }
    if (admission.verdict === "refused") {
      const { serial, reason, message, problems } = admission;
      if (reason === "expired") {
        // Perhaps this node's clock is wrong: kept, and taken once the clock is right
        // (#retryExpired, no network); said once.
        this.#expired = { ...work, trigger: "declaration" };
        if (this.#expiredSaid === work.signature) return await this.#afterRefusal(work.trigger);
        this.#expiredSaid = work.signature;
      }
      if (reason === "replay" && admittedAfter(this.#host, this.#identity?.node, work.seq)) {
        // Older than what this node admitted, and stored before it: not a replay, but a
        // replica behind the others (any one answers the catch-up's direct get).
        this.#log(
          `link: serial ${serial} (stream sequence ${work.seq}) is older than the accepted ` +
            "one, from a replica behind the others: ignored",
          "debug",
        );
        return await this.#afterRefusal(work.trigger);
      }
      this.#refuse(serial, reason, message, problems);
      return await this.#afterRefusal(work.trigger);
    }
    this.#recordAdmitted(admission, work.seq);
    const { declaration, digest } = admission;
    const pending = { declaration, digest, origin: subject };
    this.#pending = pending;
    await this.#apply(declaration, "link", subject, work.trigger, pending);
  }

  /**
   * A trust update (src/link/trust.ts) that came with a declaration signed by `signer`:
   * taken when it is signed by that key and newer than the list this node holds (kept
   * durably, used from the next connection on); said and left otherwise.
   */
  #takeTrust(header: string, signer: string): void {
    if (!this.#identity) return;
    const list = verifyTrust(header, signer);
    if (isTrustProblem(list)) {
      if (this.#trustSaid !== header) {
        this.#trustSaid = header;
        this.#log(`link: a trust update was not taken: ${list.problem}`, "warning");
      }
      return;
    }
    const held = readIdentity(this.#host.store)?.trust ?? this.#identity.trust;
    if (list.serial <= held.serial) return; // the one held, or an older one replayed
    writeTrust(this.#host.store, list);
    this.#identity = { ...this.#identity, trust: list };
    this.#link?.setTrust(list);
    const now = Date.now();
    this.#log(
      `link: trust update ${list.serial} taken: brokers' certificates must now chain to ${
        list.cas.map((ca) => {
          const f = caFacts(ca, now);
          return `"${f.subject}" (until ${f.ends})`;
        }).join(" or ")
      }`,
      "warning",
    );
  }

  /** The declaration refused as expired, handed on again once this node's clock allows it. */
  #retryExpired(): void {
    const expired = this.#expired;
    if (!expired || this.#busy) return;
    if (expiry(notAfterOf(expired.signature), (this.#opt.now ?? Date.now)())) return;
    this.#expired = undefined;
    this.#enqueue(expired);
  }

  /**
   * Record an admitted declaration (the replay guard; with `seq`, its stream sequence), and
   * a rotation followed to its key.
   */
  #recordAdmitted(admission: Parameters<typeof recordAdmitted>[1], seq?: number): void {
    recordAdmitted(this.#host, admission, seq);
    if (admission.rotatedFrom !== undefined) {
      this.#log(
        `link: the control plane's signing key moved from ${admission.rotatedFrom} to ` +
          `${admission.signer} (a rotation signed by the key pinned before); only the new key ` +
          "is trusted from now on",
        "warning",
      );
      if (this.#identity) this.#identity = { ...this.#identity, signer: admission.signer };
    }
  }

  /**
   * The admitted `declaration` when it is the last admitted one and the store
   * does not hold it yet (no declaration, or an older one from the link).
   */
  #unapplied(declaration: Declaration, origin: string): Pending | undefined {
    if (this.#pending?.digest === declaration.digest) return this.#pending;
    const { digest } = declaration;
    if (!admittedNotCurrent(this.#host, digest)) return undefined;
    return this.#pending = { declaration, digest, origin };
  }

  /** A confirm window that lapsed: its serial refused and reported, the machine taken back. */
  async #settleWindow(): Promise<boolean> {
    const lapse = await this.#confirm.settle();
    if (!lapse) return false;
    if (this.#pending?.digest === lapse.digest) this.#pending = undefined;
    this.#refuse(lapse.serial, "unconfirmed", lapse.message, lapse.problems);
    await this.#reconcile("revert");
    return true;
  }

  /** A refusal on (re)connect still owes the machine its reconcile from the store. */
  async #afterRefusal(trigger: Trigger): Promise<void> {
    if (trigger !== "declaration") await this.#reconcile(trigger);
  }

  async #reconcile(asked: Trigger): Promise<void> {
    // A hold lifted since the watch last looked: this reconcile is the one that applies
    // what was withheld (and says so), whatever asked for it (the drift timer, say).
    const lifted = this.#holdWatch.takeLifted();
    if (lifted && asked !== "unhold") {
      this.#log(`run: the hold of ${lifted.by} was lifted: applying the latest declaration`);
    }
    const trigger: Trigger = lifted ? "unhold" : asked;
    // A declaration admitted from the link whose apply could not start yet (the
    // lock was busy) comes first: its serial is already recorded as admitted, so the link will
    // not deliver it again, and the store still holds the older declaration.
    const pending = this.#pending;
    if (pending) {
      if (isLastAdmitted(this.#host, pending.digest)) {
        return await this.#apply(pending.declaration, "link", pending.origin, trigger, pending);
      }
      this.#pending = undefined; // superseded by a newer admitted declaration
    }
    const current = this.#host.store.current();
    const bundlePath = this.#host.config.bundlePath;
    // After a rescue an enrolled node holds nothing until the mesh answers: the bundle
    // would re-derive the machine from the package's substrate instead.
    if (!current && this.#identity && pendingRescue(this.#host.store)) {
      this.#log(`run: rescued: holding nothing until the mesh declares this node (${trigger})`);
      await this.#launcher.reconciled();
      this.#armDrift();
      return;
    }
    const expectCurrent = current?.digest ?? null;
    // Only the configured bundle (the file the package ships, or the configuration's
    // "bundle") is read again, with the trusted parse: it is the authority and the
    // store keeps a copy. Anything else (a file, stdin, `apply --bundle OTHER`) is
    // held to the body stored when it was applied; a later edit of that file is
    // never read, so it can never become trusted.
    if (current && (current.source !== "bundle" || current.origin !== bundlePath)) {
      return await this.#admitAndApply(
        current.body,
        current.source,
        current.origin,
        trigger,
        expectCurrent,
      );
    }
    let text: string | undefined;
    try {
      text = await Deno.readTextFile(bundlePath);
    } catch (error) {
      if (!current) {
        const why = error instanceof Deno.errors.NotFound ? "does not exist" : describeError(error);
        this.#log(
          `run: nothing to hold yet: no declaration in the store, and the bundle ${bundlePath} ${why}`,
        );
        await this.#launcher.reconciled();
        this.#armDrift();
        return;
      }
    }
    await this.#admitAndApply(text ?? current!.body, "bundle", bundlePath, trigger, expectCurrent);
  }

  /** Admit what the store (or the bundle) holds, then apply it. */
  async #admitAndApply(
    text: string,
    source: Source,
    origin: string,
    trigger: Trigger,
    expectCurrent: string | null,
  ): Promise<void> {
    let declaration;
    try {
      declaration = await admit(this.#host, text, { source, origin });
    } catch (error) {
      if (!(error instanceof DeclarationRefused)) throw error;
      // Refused before applying: this version has not got through a reconcile, so it
      // confirms nothing (a version that refuses what the previous one held is rolled back).
      this.#log(`apply (${trigger}): ${error.message}`, "warning");
      if (source === "link") this.#refuse(undefined, "invalid", error.message, error.problems);
      this.#armDrift();
      return;
    }
    await this.#apply(declaration, source, origin, trigger, undefined, expectCurrent);
  }

  async #apply(
    declaration: Declaration,
    source: Source,
    origin: string,
    trigger: Trigger,
    pending?: Pending,
    expectCurrent?: string | null,
  ): Promise<void> {
    let report;
    try {
      // Pushed over the link: a change to what can cut the node off opens the window.
      await this.#confirm.before(declaration, origin, pending !== undefined);
      report = await apply(this.#host, declaration, {
        source,
        origin,
        signal: this.#applyAbort.signal,
        lockWaitMs: 10_000,
        ...(this.#link ? { contentSources: [this.#link.contentSource()] } : {}),
        ...(expectCurrent === undefined ? {} : { expectCurrent }),
        ...(trigger === "revert" ? { networkFirst: true } : {}),
      });
    } catch (error) {
      if (error instanceof HeldError) {
        this.#confirm.abandon(); // nothing was applied: no window runs for it
        return await this.#whileHeld(error.hold, declaration, source, origin, trigger, pending);
      }
      if (error instanceof SupersededError) {
        this.#confirm.abandon(); // nothing was applied: no window runs for it
        // What this reconcile read was replaced while it waited (an apply by hand, a
        // rescue): reconcile again from what the store holds now.
        this.#log(`apply (${trigger}): ${error.message}; reconciling again`);
        this.#enqueue({ kind: "reconcile", trigger });
        return;
      }
      if (error instanceof BusyError) {
        this.#confirm.abandon();
        // An admitted declaration stays pending: the retry applies it, not the store's older one.
        this.#log(
          `apply (${trigger}): another apply holds the lock; trying again in 15 s` +
            (pending ? " (the declaration just accepted stays pending until then)" : ""),
          "warning",
        );
        setTimeout(() => this.#enqueue({ kind: "reconcile", trigger }), 15_000);
        return;
      }
      if (pending && this.#pending === pending) this.#pending = undefined;
      throw error;
    }
    if (pending && this.#pending === pending) this.#pending = undefined;
    // The apply that answered a rescue is reported as one, whatever started it.
    if (report.rescue) trigger = "rescue";
    const c = report.counts;
    this.#log(
      `apply (${trigger}, ${source}${
        report.serial === undefined ? "" : ` serial ${report.serial}`
      }): ` +
        `${report.outcome}: ${tally(c)} in ${report.durationMs} ms${
          report.error ? `: ${report.error}` : ""
        }`,
      report.outcome === "failed" ? "error" : report.outcome === "converged" ? "info" : "warning",
    );
    this.#confirm.applied(report);
    // It got through a reconcile (converged, or a resource failed: the machine's problem,
    // not the program's): known-good and the cleared counter, one event. Interrupted: not.
    if (report.outcome !== "interrupted") await this.#launcher.reconciled();
    // Into the outbox first (delivered in order, removed once the broker acknowledged it).
    if (this.#identity) {
      this.#outbox.keep(applyMessage(this.#identity.node, report, trigger));
      this.#heartbeat(false);
      if (c.changed + c.removed + c.forgotten > 0) this.#inventory.changed();
    }
    // An upgrade of the host staged for the launcher: after the report, exit 0 as for a
    // replaced program file, so the launcher applies it and starts the new version.
    if (report.restart !== undefined && !this.#stop) this.#upgradeExit(report.restart);
    this.#armDrift();
    this.#writeStatus();
    this.#writeMetrics();
  }

  /**
   * The host is held (engine/hold.ts): nothing is applied. A declaration pushed over the
   * link is stored as the one to hold the machine to (the hold's end applies it); the
   * machine is only checked against it, and what differs is logged and reported.
   */
  async #whileHeld(
    hold: Hold,
    declaration: Declaration,
    source: Source,
    origin: string,
    trigger: Trigger,
    pending: Pending | undefined,
  ): Promise<void> {
    this.#holdWatch.withheld(hold);
    const held = `held by ${hold.by} since ${hold.since} (${hold.reason})`;
    if (source === "link" && pending) {
      makeCurrent(this.#host, declaration, { source, origin });
      if (this.#pending === pending) this.#pending = undefined;
      this.#log(
        `apply (${trigger}, link serial ${declaration.serial}): ${held}: stored, not applied; ` +
          "`nox-mesh-host unhold` applies it",
        "warning",
      );
    }
    let entries: Awaited<ReturnType<typeof plan>> = [];
    let error: string | undefined;
    try {
      entries = await plan(this.#host, declaration);
    } catch (cause) {
      error = `the check failed: ${describeError(cause)}`;
    }
    const differ = entries.filter((e) => e.status !== "in-sync");
    this.#log(
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
    if (this.#identity) {
      this.#outbox.keep(
        heldMessage(this.#identity.node, trigger, hold, declaration, entries, error),
      );
      this.#heartbeat(false);
    }
    this.#armDrift();
    this.#writeStatus();
    this.#writeMetrics();
  }

  /** A rescue was made: start again (uncounted), so the new link asks the mesh afresh. */
  #rescued(by: string): void {
    if (this.#stop) return;
    const detail = `rescued by ${by}: the store forgot what it held`;
    this.#log(
      `run: ${detail}; exiting 10 so the launcher starts it again and it asks the mesh ` +
        "for this node's declaration (not counted as a failure)",
    );
    this.#halt({ reason: "rescue", detail });
  }

  #refuse(
    serial: number | undefined,
    reason: RefusalMessage["reason"],
    message: string,
    problems: RefusalMessage["problems"],
  ): void {
    this.#log(`link: ${message.replace(/:\n\s*/, ": ").replace(/\n\s*/g, "; ")}`, "warning");
    if (this.#identity) {
      this.#outbox.keep(refusalMessage(this.#identity.node, serial, reason, message, problems));
    }
  }

  // ---- heartbeats, upgrade, status, shutdown --------------------------------

  #heartbeat(withList: boolean): boolean {
    if (!this.#identity || !this.#link) return false;
    const liveness = { startedAt: this.#startedAt, nextDriftAt: this.#drift.nextAt };
    return this.#heartbeats.send(this.#identity, this.#link, liveness, withList);
  }

  /**
   * A heartbeat, then whether the broker answered behind it and took a new connection,
   * all within `timeoutMs` (confirm.ts): the connection the link has may outlive a rule
   * that refuses new ones, which would cut the node off at its next reconnect.
   */
  async #probeLink(timeoutMs: number): Promise<boolean> {
    const link = this.#link;
    if (!link || !this.#heartbeat(false)) return false;
    const started = performance.now();
    if (!await link.roundTrip(timeoutMs)) return false;
    const failed = await link.freshConnection(timeoutMs - (performance.now() - started));
    if (!failed) {
      this.#freshFailure = undefined;
      return true;
    }
    // Said once per reason: the window probes again every second.
    if (failed.message !== this.#freshFailure) {
      this.#freshFailure = failed.message;
      this.#log(
        `confirm: the link's connection answers, but a new one fails: ${failed.message}; ` +
          "a rule may refuse new connections to the broker (not confirmed yet)",
        "warning",
      );
    }
    return false;
  }

  /** Above the memory ceiling, after a completed piece of work: say why and stop for a restart. */
  #checkMemory(): void {
    if (this.#stop || !this.#worked) return;
    const over = this.#memory.exceeded(performance.now() - this.#startedAt);
    if (!over) return;
    this.#log(
      `run: ${over.message}; exiting 10 so the launcher starts it again (not counted as a failure)`,
    );
    if (this.#identity && this.#link) {
      this.#link.publish(
        "report",
        this.#memory.message(this.#identity.node, over.rssBytes, over.message),
      );
    }
    this.#halt({ reason: "memory", detail: over.message });
  }

  /**
   * Enrolled again while running (`enrol --replace`): the link still logs in with the old
   * key, which the control plane no longer admits. Stop for a restart the launcher does
   * not count; the next process links with the new identity.
   */
  #checkIdentity(): void {
    if (!this.#identity || this.#stop) return;
    const now = readIdentity(this.#host.store);
    if (now?.publicKey === this.#identity.publicKey && now.node === this.#identity.node) return;
    const detail = now
      ? `the node was enrolled again as "${now.node}" (key ${now.publicKey})`
      : "the node's identity is gone from the store";
    this.#log(
      `run: ${detail}; exiting 10 so the launcher starts it again with it (not counted as a failure)`,
    );
    this.#halt({ reason: "identity", detail });
  }

  async #checkUpgrade(): Promise<void> {
    if (!this.#program || this.#stop) return;
    const why = await this.#program.changed();
    if (!why) return;
    await this.#program.settle();
    this.#upgradeExit(why);
  }

  /** A new version waits (a replaced program file, a stage): exit 0 for the supervisor. */
  #upgradeExit(why: string): void {
    this.#log(`run: self-upgrade: ${why}; exiting 0 so the supervisor starts the new version`);
    this.#halt({ reason: "upgrade", detail: why });
  }

  async #shutdown(): Promise<RunResult> {
    const result = this.#stop ?? { reason: "signal", detail: "stopped" };
    this.#phase = result.reason === "upgrade"
      ? "upgrading"
      : wantsRestart(result.reason)
      ? "restarting"
      : "stopping";
    this.#drift.clear();
    this.#holdWatch.stop();
    this.#confirm.stop();
    this.#stopTicking?.();
    this.#stopEnrolWatch?.();
    // What the outbox holds goes out first when the link is up (bounded); the rest waits
    // in the store for the next process.
    await this.#outbox.settle(5000);
    await this.#outbox.stop();
    await this.#inventory.settled();
    if (this.#link) {
      await this.#link.flush();
      await this.#link.close();
    }
    this.#phase = result.reason === "upgrade"
      ? "upgrading"
      : wantsRestart(result.reason)
      ? "restarting"
      : "stopped";
    this.#writeStatus();
    this.#writeMetrics();
    await this.#metrics?.settled();
    this.#log(`run: stopped (${result.reason}: ${result.detail})`);
    return result;
  }

  #writeStatus(): void {
    const status: RunStatus = {
      pid: Deno.pid,
      version: VERSION,
      startedAt: this.#startedIso,
      updatedAt: new Date().toISOString(),
      phase: this.#phase,
      ...(this.#phase === "restarting" && this.#stop
        ? { restartFor: RESTART_FOR[this.#stop.reason] ?? this.#stop.reason }
        : {}),
      link: this.#link ? this.#link.state : null,
      ...(this.#linkProblem ? { linkProblem: this.#linkProblem } : {}),
      nextDriftAt: this.#drift.nextAt,
      lastHeartbeatAt: this.#heartbeats.lastAt,
      heartbeatIntervalSeconds: this.#heartbeatMs / 1000,
      driftIntervalSeconds: this.#drift.seconds,
      program: this.#program ? { path: this.#program.path, form: this.#program.form } : null,
    };
    try {
      writeRunStatus(this.#host.store, status);
    } catch (error) {
      this.#log(`run: cannot write the status record: ${describeError(error)}`, "warning");
    }
  }
}
