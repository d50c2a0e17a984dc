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
import { describeError } from "../errors.ts";
import type { Engine } from "../engine/mod.ts";
import type { Log } from "../log.ts";
import type { Profile } from "../profile.ts";
import { VERSION } from "../version.ts";
import { ConfirmWindow } from "./confirm.ts";
import { GiveBack } from "./give_back.ts";
import { HoldWatch } from "./hold_watch.ts";
import { Intake } from "./intake.ts";
import { MemoryCeiling } from "./memory_ceiling.ts";
import { type Work, WorkQueue } from "./queue.ts";
import { Reconciler } from "./reconciler.ts";
import { ServiceStatus } from "./service_status.ts";
import { UplinkSession } from "./session.ts";
import { DriftTimer, everyJittered } from "./timers.ts";
import { ProgramWatch } from "./upgrade_watch.ts";
import type { OpenUplink } from "./uplink.ts";

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
  /**
   * Open the uplink to the control plane for the node's identity (the command line passes
   * the NATS link's, src/link/nats_uplink.ts); without it an enrolled node holds the
   * machine from the store and says the uplink cannot start.
   */
  uplink: OpenUplink;
  /** How long the first link attempt may delay the start reconcile (ms, default 10 s). */
  startLinkWaitMs?: number;
  /** While not enrolled, how often to look for an identity in the store (ms, default 2 s). */
  enrolCheckMs?: number;
  /** The clock a declaration's `not-after` is checked against (default Date.now). */
  now?: () => number;
  /** How often to look for a hold lifted or a rescue made (ms, default 2 s). */
  holdCheckMs?: number;
  /**
   * Give the memory an apply freed back to the system (the command line passes the
   * process's: cli/io.ts `memoryTrim`); called once the loop has had no work for a second
   * after a piece of work or a heartbeat tick (give_back.ts).
   */
  giveBackMemory?: () => void;
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

/** Run the service until a signal or a self-upgrade. */
export function runService(host: Engine, options: RunOptions): Promise<RunResult> {
  return new RunLoop(host, options).run();
}

/**
 * The loop: takes work from the queue one at a time (a pushed declaration, or a
 * reconcile from start, reconnect or the drift timer), hands a pushed declaration to
 * intake (intake.ts) and what is to be applied to the reconciler (reconciler.ts), keeps
 * the uplink (session.ts) and the status record, and stops for a signal, a replaced
 * program file, the memory ceiling or a new identity.
 */
class RunLoop {
  readonly #host: Engine;
  readonly #opt: RunOptions;
  readonly #queue = new WorkQueue();
  readonly #drift: DriftTimer;
  readonly #memory: MemoryCeiling;
  readonly #session: UplinkSession;
  readonly #intake: Intake;
  readonly #reconciler: Reconciler;
  readonly #confirm: ConfirmWindow;
  readonly #holdWatch: HoldWatch;
  readonly #status: ServiceStatus;
  readonly #giveBack: GiveBack | undefined;
  /** Why the loop ends (once it does), and the promise the first uplink's wait races. */
  readonly #end = {
    result: undefined as RunResult | undefined,
    ...Promise.withResolvers<"down">(),
  };
  /** What the loop is doing: at work now, worked once, the program watched, its timers. */
  readonly #at = {
    busy: false,
    worked: false,
    startedAt: performance.now(),
    heartbeatMs: 0,
    program: undefined as ProgramWatch | undefined,
    stopTicking: undefined as (() => void) | undefined,
  };

  constructor(host: Engine, options: RunOptions) {
    this.#host = host;
    this.#opt = options;
    const { log } = options;
    const enqueue = (work: Work) => this.#enqueue(work);
    const changed = () => this.#writeStatus();
    this.#drift = new DriftTimer(
      1000 * (options.driftIntervalSeconds ?? host.config.driftIntervalSeconds),
      () => this.#enqueue({ kind: "reconcile", trigger: "drift" }),
    );
    this.#at.heartbeatMs = 1000 *
      (options.heartbeatIntervalSeconds ?? host.config.heartbeatIntervalSeconds);
    this.#memory = new MemoryCeiling(host.config.memoryCeilingMiB, 2 * this.#at.heartbeatMs);
    this.#status = new ServiceStatus(host, log);
    this.#session = new UplinkSession(host, options, {
      enqueue,
      changed,
      liveness: () => ({ startedAt: this.#at.startedAt, nextDriftAt: this.#drift.nextAt }),
      stopped: this.#end.promise,
      stopping: () => this.#end.result !== undefined,
    });
    this.#confirm = new ConfirmWindow({
      store: host.store,
      windowSeconds: host.config.confirmWindowSeconds,
      log,
      probe: (timeoutMs) => this.#session.probe(timeoutMs),
      lapsed: () => this.#enqueue({ kind: "reconcile", trigger: "revert" }),
    });
    this.#holdWatch = new HoldWatch(host.store, {
      lifted: (hold) => {
        log(`run: the hold of ${hold.by} was lifted: applying the latest declaration`);
        this.#enqueue({ kind: "reconcile", trigger: "unhold" });
      },
      rescued: (rescue) => this.#rescued(rescue.by),
    });
    const [session, confirm, holdWatch] = [this.#session, this.#confirm, this.#holdWatch];
    const now = options.now ?? Date.now;
    this.#intake = new Intake({ host, session, confirm, log, now, enqueue });
    this.#reconciler = new Reconciler({
      host,
      log,
      session,
      intake: this.#intake,
      confirm,
      holdWatch,
      hooks: {
        enqueue,
        changed,
        armDrift: () => this.#armDrift(),
        upgrade: (why) => {
          if (this.#end.result === undefined) this.#upgradeExit(why);
        },
      },
    });
    this.#giveBack = options.giveBackMemory ? new GiveBack(options.giveBackMemory) : undefined;
  }

  async run(): Promise<RunResult> {
    const onSignal = () =>
      this.#halt({ reason: "signal", detail: String(this.#opt.signal?.reason ?? "signal") });
    if (this.#opt.signal?.aborted) onSignal();
    this.#opt.signal?.addEventListener("abort", onSignal, { once: true });
    const program = this.#opt.program === undefined
      ? await ProgramWatch.current()
      : this.#opt.program ?? undefined;
    this.#at.program = program;
    this.#opt.log(
      `run: ${VERSION} starting; state ${this.#host.config.stateDir}; drift every ${this.#drift.seconds} s, ` +
        `heartbeat every ${this.#at.heartbeatMs / 1000} s; ${
          program
            ? `watching ${program.path} (${program.form})`
            : "program file unknown: no self-upgrade"
        }`,
    );
    this.#confirm.resume();
    this.#writeStatus();
    // Jittered, so a fleet started (or reconnected) together does not beat in step.
    this.#at.stopTicking = everyJittered(this.#at.heartbeatMs, () => this.#tick());
    const first = await this.#session.begin();
    if (first !== "up") this.#enqueue({ kind: "reconcile", trigger: "start" });
    this.#status.phase = "running";
    this.#armDrift();
    this.#holdWatch.start(this.#opt.holdCheckMs ?? 2000);
    this.#writeStatus();
    for (let work = await this.#queue.next(); work; work = await this.#queue.next()) {
      await this.#take(work);
      // What the work freed goes back once the loop has waited a second (give_back.ts: not
      // between the pieces of a stream).
      if (this.#queue.size === 0) this.#giveBack?.idle();
      this.#checkMemory();
      if (!this.#end.result) await this.#checkUpgrade();
    }
    return await this.#shutdown();
  }

  /** One piece of work; an unexpected failure is said, and the machine stays watched. */
  async #take(work: Work): Promise<void> {
    this.#at.busy = true;
    this.#giveBack?.busy();
    try {
      await this.#do(work);
    } catch (error) {
      this.#opt.log(
        `run: ${work.kind} (${work.trigger}) failed unexpectedly: ${describeError(error)}`,
        "error",
      );
      // The drift timer is armed again at the end of every reconcile that ran to its
      // end; this one did not, and without this the machine would go unwatched.
      this.#armDrift();
    } finally {
      this.#at.busy = false;
      this.#at.worked = true;
    }
  }

  async #do(work: Work): Promise<void> {
    if (await this.#reconciler.settleWindow() && work.kind === "reconcile") return;
    if (work.kind === "reconcile") return await this.#reconciler.reconcile(work.trigger);
    const next = await this.#intake.take(work);
    if (next === undefined) return;
    if ("reconcile" in next) return await this.#reconciler.reconcile(next.reconcile);
    await this.#reconciler.applyPending(next.apply, next.trigger);
  }

  #armDrift(): void {
    if (!this.#end.result) this.#drift.arm();
  }

  #tick(): void {
    const idle = !this.#at.busy;
    this.#session.heartbeat(false);
    if (idle) this.#intake.retryExpired();
    this.#session.inventory.tick();
    if (idle) this.#checkMemory();
    if (idle) this.#checkIdentity();
    if (idle) this.#checkUpgrade().catch(() => {});
    this.#writeStatus();
    // What the timers' own work allocated since (heartbeats, the inventory's detection after
    // a burst) goes back too, a second from now unless work comes first.
    if (idle && this.#queue.size === 0) this.#giveBack?.idle();
  }

  #enqueue(work: Work): void {
    if (!this.#end.result) this.#queue.push(work);
  }

  #halt(result: RunResult): void {
    if (this.#end.result) return;
    this.#end.result = result;
    this.#end.resolve("down");
    if (result.reason === "signal") {
      this.#opt.log(
        `run: ${result.detail}: stopping (the current apply stops before its next step)`,
      );
      this.#reconciler.abort(result.detail);
    }
    this.#queue.close();
  }

  /** A rescue was made: start again (uncounted), so the new link asks the mesh afresh. */
  #rescued(by: string): void {
    if (this.#end.result) return;
    const detail = `rescued by ${by}: the store forgot what it held`;
    this.#opt.log(
      `run: ${detail}; exiting 10 so the launcher starts it again and it asks the mesh ` +
        "for this node's declaration (not counted as a failure)",
    );
    this.#halt({ reason: "rescue", detail });
  }

  /** Above the memory ceiling, after a completed piece of work: say why and stop for a restart. */
  #checkMemory(): void {
    if (this.#end.result || !this.#at.worked) return;
    const over = this.#memory.exceeded(performance.now() - this.#at.startedAt);
    if (!over) return;
    this.#opt.log(
      `run: ${over.message}; exiting 10 so the launcher starts it again (not counted as a failure)`,
    );
    this.#session.publishReport((node) => this.#memory.message(node, over.rssBytes, over.message));
    this.#halt({ reason: "memory", detail: over.message });
  }

  /**
   * Enrolled again while running (`enrol --replace`): the link still logs in with the old
   * key, which the control plane no longer admits. Stop for a restart the launcher does
   * not count; the next process links with the new identity.
   */
  #checkIdentity(): void {
    if (this.#end.result) return;
    const detail = this.#session.replaced();
    if (!detail) return;
    this.#opt.log(
      `run: ${detail}; exiting 10 so the launcher starts it again with it (not counted as a failure)`,
    );
    this.#halt({ reason: "identity", detail });
  }

  async #checkUpgrade(): Promise<void> {
    const program = this.#at.program;
    if (!program || this.#end.result) return;
    const why = await program.changed();
    if (!why) return;
    await program.settle();
    this.#upgradeExit(why);
  }

  /** A new version waits (a replaced program file, a stage): exit 0 for the supervisor. */
  #upgradeExit(why: string): void {
    this.#opt.log(
      `run: self-upgrade: ${why}; exiting 0 so the supervisor starts the new version`,
    );
    this.#halt({ reason: "upgrade", detail: why });
  }

  async #shutdown(): Promise<RunResult> {
    const result = this.#end.result ?? { reason: "signal", detail: "stopped" };
    const ending = result.reason === "upgrade"
      ? "upgrading"
      : wantsRestart(result.reason)
      ? "restarting"
      : undefined;
    this.#status.phase = ending ?? "stopping";
    this.#drift.clear();
    this.#giveBack?.busy();
    this.#holdWatch.stop();
    this.#confirm.stop();
    this.#at.stopTicking?.();
    // What the outbox holds goes out first when the link is up (bounded); the rest waits
    // in the store for the next process.
    await this.#session.close();
    this.#status.phase = ending ?? "stopped";
    this.#writeStatus();
    await this.#status.settled();
    this.#opt.log(`run: stopped (${result.reason}: ${result.detail})`);
    return result;
  }

  /** Rewrite the status record and the metrics file. */
  #writeStatus(): void {
    const stop = this.#end.result;
    const program = this.#at.program;
    const session = this.#session;
    this.#status.write({
      ...(this.#status.phase === "restarting" && stop
        ? { restartFor: RESTART_FOR[stop.reason] ?? stop.reason }
        : {}),
      link: session.state,
      ...(session.problem ? { linkProblem: session.problem } : {}),
      nextDriftAt: this.#drift.nextAt,
      lastHeartbeatAt: session.heartbeats.lastAt,
      heartbeatIntervalSeconds: this.#at.heartbeatMs / 1000,
      driftIntervalSeconds: this.#drift.seconds,
      program: program ? { path: program.path, form: program.form } : null,
    });
    this.#status.writeMetrics(stop === undefined && session.up, session.state);
  }
}
