/**
 * The confirm window (like `commit confirmed` on network equipment): a change pushed
 * over the link that touches what can cut the node off its broker (a firewall, an
 * overlay, a kernel setting: kinds with `mayCutLink`) stands only once the link
 * confirms it; when the window lapses first, the host goes back to what it held before
 * and refuses the serial for good. When it opens, what confirms it, what a lapse does
 * and what a restart inside it keeps: src/run/README.md, "The confirm window".
 */
import type { Declaration } from "../declaration/envelope.ts";
import type { ApplyReport } from "../engine/types.ts";
import {
  type PendingWindow,
  readPending,
  readRefused,
  recordLapse,
  type RefusedSerial,
  type WindowChange,
  writePending,
} from "../store/confirm_records.ts";
import { mayCutLink } from "../resources/mod.ts";
import {
  changesAgainstManaged,
  type ConfirmOptions,
  describeChanges,
  type Lapse,
  networkOf,
  nothing,
  PROBE_TIMEOUT_MS,
  restoreName,
  restorePoint,
} from "./_confirm_parts.ts";

export type { ConfirmOptions, Lapse };

/** The confirm window of one run process. */
export class ConfirmWindow {
  readonly #opt: ConfirmOptions;
  readonly #now: () => number;
  #pending: PendingWindow | undefined;
  /** When the open window lapses in this process (ms), at most one window after resuming it. */
  #deadline = 0;
  /** The open window's declaration was applied by this process (probes count only then). */
  #applied = false;
  /** Changes whenever a push moves the window on: a probe counts only for its own. */
  #generation = 0;
  #refused: RefusedSerial | undefined;
  /** `before` prepared the apply under way: its outcome says what changed (see `applied`). */
  #fresh = false;
  /** What `before` replaced, until the apply it was called for ends (see `abandon`). */
  #opened: { before: PendingWindow | undefined; deadline: number; applied: boolean } | undefined;
  /** The refused digest last said to be delivered again (said once). */
  #toldAgain: string | undefined;
  #lapseTimer: ReturnType<typeof setTimeout> | undefined;
  #probeTimer: ReturnType<typeof setTimeout> | undefined;
  #probing = false;
  #stopped = false;

  constructor(options: ConfirmOptions) {
    this.#opt = options;
    this.#now = options.now ?? Date.now;
  }

  /** The open window, if any. */
  get pending(): Readonly<PendingWindow> | undefined {
    return this.#pending;
  }

  /**
   * Take up what the store holds: the last refused serial, and a window an earlier
   * process left open (it lapses at its deadline, and never later than one window
   * from now).
   */
  resume(): void {
    const refused = readRefused(this.#opt.store);
    if (refused.problem) this.#opt.log(`confirm: ${refused.problem}; ignored`, "error");
    this.#refused = refused.record;
    // The process ended between a lapse and the apply that goes back: that apply is owed,
    // what can cut the node off first.
    const last = this.#opt.store.lastApply();
    if (refused.record && (!last || last.startedAt < refused.record.at)) {
      this.#opt.log(
        `confirm: serial ${refused.record.serial} was refused, and the last process ended ` +
          "before it went back; going back now",
        "warning",
      );
      this.#opt.lapsed();
    }
    const pending = readPending(this.#opt.store);
    if (pending.problem) {
      this.#opt.log(
        `confirm: ${pending.problem}; dropped, nothing goes back (if the store was edited, ` +
          "find out how)",
        "error",
      );
      writePending(this.#opt.store, undefined);
    }
    const record = pending.record;
    if (!record) return;
    this.#pending = record;
    this.#applied = false;
    if (record.deadline === null) {
      this.#deadline = Infinity;
      this.#opt.log(
        `confirm: serial ${record.serial} has changes to what can cut this node off that no ` +
          "apply has reached yet; its window runs from the apply that does",
      );
      return;
    }
    const window = this.#opt.windowSeconds * 1000;
    this.#deadline = Math.min(Date.parse(record.deadline), this.#now() + window);
    const left = Math.max(0, Math.round((this.#deadline - this.#now()) / 1000));
    this.#opt.log(
      `confirm: serial ${record.serial} changed what can cut this node off (${
        describeChanges(record.changed) || "its apply did not end"
      }) and was not confirmed before the last process ended; ` +
        (left > 0
          ? `it stands if the broker acknowledges a heartbeat and takes a new connection ` +
            `within ${left} s, else the node goes back to ${restoreName(record.restore)}`
          : `its window has lapsed: the node goes back to ${restoreName(record.restore)}`),
      "warning",
    );
    this.#scheduleLapse();
  }

  /** Whether the link's declaration with `digest` was refused because its window lapsed. */
  refuses(digest: string): boolean {
    if (this.#refused?.digest !== digest) return false;
    if (this.#toldAgain !== digest) {
      this.#toldAgain = digest;
      this.#opt.log(
        `link: serial ${this.#refused.serial} arrived again; it was refused when its confirm ` +
          "window lapsed (reported then) and is never applied again; waiting for a newer serial",
      );
    }
    return true;
  }

  /**
   * Before an apply. A declaration pushed over the link opens the window when applying
   * it would change what can cut the node off (or moves an open one on to it); an apply
   * of the declaration a waiting window is for starts it. Either is on disk before the
   * apply starts, with a deadline one window away, so a process that dies during the
   * apply leaves a window that lapses.
   */
  async before(declaration: Declaration, origin: string, pushed: boolean): Promise<void> {
    const open = this.#pending;
    if (pushed) return await this.#open(declaration, origin);
    if (open?.deadline !== null || open.digest !== declaration.digest) return;
    this.#opened = { before: open, deadline: this.#deadline, applied: this.#applied };
    this.#fresh = true;
    this.#set({ ...open, deadline: this.#isoFromNow() });
  }

  async #open(declaration: Declaration, origin: string): Promise<void> {
    const { store } = this.#opt;
    const network = await networkOf(declaration);
    const open = this.#pending;
    if (!open && changesAgainstManaged(store, network) === 0) return;
    const now = this.#now();
    // An open window keeps its place to go back to (the declaration held before its first
    // push); one that waits keeps it only while its declaration is still the one held (an
    // apply of it stopped before what can cut the node off): otherwise something else
    // was applied meanwhile, and that is the place to go back to.
    const keep = open !== undefined &&
      (open.deadline !== null || store.currentHead()?.digest === open.digest);
    this.#opened = { before: open, deadline: this.#deadline, applied: this.#applied };
    this.#fresh = true;
    this.#set({
      serial: declaration.serial ?? 0,
      digest: declaration.digest,
      origin,
      openedAt: keep ? open.openedAt : new Date(now).toISOString(),
      deadline: this.#isoFromNow(),
      restore: keep ? open.restore : restorePoint(store),
      changed: keep ? open.changed : [],
      network,
    });
  }

  /**
   * The apply `before` was called for did not happen (another apply held the lock, or
   * the host is held): the window is again what it was, and a push that opened one
   * leaves it waiting for the apply that will come.
   */
  abandon(): void {
    const opened = this.#opened;
    if (!opened) return;
    this.#opened = undefined;
    this.#fresh = false;
    const open = this.#pending;
    if (!opened.before && open) {
      this.#set({ ...open, deadline: null });
      return;
    }
    this.#set(opened.before);
    this.#deadline = opened.deadline;
    this.#applied = opened.applied;
    this.#scheduleLapse();
    this.#kick(0);
  }

  /**
   * After an apply of the window's declaration. The apply `before` prepared for: when
   * it changed nothing that can cut the node off, the window closes (all of it is as
   * held) or waits (an earlier resource failed before it); otherwise it runs one window
   * from now. Any apply of it lets the probes count.
   */
  applied(report: ApplyReport): void {
    const fresh = this.#fresh;
    this.#fresh = false;
    this.#opened = undefined;
    const open = this.#pending;
    if (!open || report.digest !== open.digest || report.outcome === "interrupted") return;
    const touched: WindowChange[] = report.results
      .filter((r) => mayCutLink(r.type) && ["changed", "removed", "failed"].includes(r.outcome))
      .map((r) => ({ type: r.type, id: r.id, key: r.key, outcome: r.outcome }));
    const changed = [
      ...open.changed.filter((c) => !touched.some((t) => t.key === c.key)),
      ...touched,
    ];
    if (fresh && changed.length === 0) {
      if (changesAgainstManaged(this.#opt.store, open.network) === 0) {
        this.#close(); // nothing that can cut the node off changed under this window
        return;
      }
      if (open.deadline !== null) {
        this.#opt.log(
          `confirm: serial ${open.serial}: its apply stopped before what can cut this node ` +
            "off; the confirm window runs from the apply that reaches it",
        );
      }
      this.#set({ ...open, deadline: null });
      return;
    }
    if (fresh) {
      this.#set({ ...open, changed, deadline: this.#isoFromNow() });
      this.#opt.log(
        `confirm: serial ${open.serial} changed what can cut this node off (${
          describeChanges(changed)
        }); it stands once the broker acknowledges a heartbeat and takes a new connection within ` +
          `${this.#opt.windowSeconds} s, else the node goes back to ${restoreName(open.restore)}`,
      );
    } else if (touched.length > 0) {
      // A drift pass under the window: its deadline stays.
      this.#set({ ...open, changed }, false);
    }
    this.#applied = true;
    this.#kick(0);
  }

  /**
   * When the open window has lapsed: go back (one durable commit: the declaration held
   * before is current again, the serial refused) and say what to report. The caller
   * then applies the current declaration with `networkFirst`.
   */
  async settle(): Promise<Lapse | undefined> {
    const open = this.#pending;
    if (!open || open.deadline === null || this.#now() < this.#deadline) return undefined;
    const { store } = this.#opt;
    const restore = open.restore ?? await nothing(open.origin);
    const current = store.currentHead();
    const ours = current?.digest === open.digest && current.source === "link";
    if (!ours && (current?.digest ?? null) === (open.restore?.digest ?? null)) {
      // Its apply never started (the process ended first): nothing changed; the loop
      // applies it later (the link's catch-up), under a window of its own.
      this.#close();
      return undefined;
    }
    // Otherwise someone applied another declaration meanwhile (a person's `apply FILE`):
    // that one stays; the serial is refused all the same.
    const refused = { serial: open.serial, digest: open.digest, at: new Date().toISOString() };
    recordLapse(store, refused, ours ? restore : undefined);
    this.#refused = refused;
    this.#toldAgain = open.digest;
    this.#close(false);
    const what = describeChanges(open.changed) || "an apply that did not end";
    const back = ours
      ? `the node went back to ${restoreName(open.restore)}`
      : "the declaration held now (applied by someone else meanwhile) stays";
    const message = `serial ${open.serial} was applied, but the broker acknowledged no ` +
      `heartbeat within the confirm window (${this.#opt.windowSeconds} s, host.json ` +
      `confirmWindowSeconds) after it, or took no new connection from the node: what it ` +
      `changed (${what}) may have cut this node off. ` +
      `${back[0].toUpperCase()}${back.slice(1)}; serial ${open.serial} is refused from now on ` +
      "(publish a corrected declaration with a newer serial)";
    const problems = open.changed.map((c) => ({
      path: "(unconfirmed)",
      message: `${c.type} "${c.id}" (${c.key}): ${c.outcome}`,
    }));
    return { serial: open.serial, digest: open.digest, message, problems };
  }

  /** Stop probing and timing (the process ends; the window stays in the store). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#lapseTimer);
    clearTimeout(this.#probeTimer);
  }

  // ---- inside --------------------------------------------------------------

  /** One window from now, as the store keeps a deadline. */
  #isoFromNow(): string {
    return new Date(this.#now() + this.#opt.windowSeconds * 1000).toISOString();
  }

  /**
   * Make `record` the window (on disk first), or none; a new deadline (`timing`) counts
   * from it, a waiting window has none, and probes wait for the next apply.
   */
  #set(record: PendingWindow | undefined, timing = true): void {
    writePending(this.#opt.store, record);
    this.#pending = record;
    if (!timing) return;
    this.#generation++;
    this.#applied = false;
    clearTimeout(this.#probeTimer);
    this.#probeTimer = undefined;
    this.#deadline = record?.deadline ? Date.parse(record.deadline) : Infinity;
    this.#scheduleLapse();
  }

  /** Close the open window (confirmed, or nothing to confirm, or lapsed). */
  #close(write = true): void {
    if (write) writePending(this.#opt.store, undefined);
    this.#opened = undefined;
    this.#fresh = false;
    this.#pending = undefined;
    this.#applied = false;
    this.#generation++;
    clearTimeout(this.#lapseTimer);
    clearTimeout(this.#probeTimer);
    this.#probeTimer = undefined;
  }

  #scheduleLapse(): void {
    clearTimeout(this.#lapseTimer);
    if (this.#stopped || !this.#pending || this.#deadline === Infinity) return;
    const delay = Math.max(0, this.#deadline - this.#now());
    this.#lapseTimer = setTimeout(() => {
      if (this.#pending && !this.#stopped) this.#opt.lapsed();
    }, delay + 50);
  }

  #wantsProbe(): boolean {
    return !this.#stopped && this.#pending !== undefined && this.#applied &&
      this.#now() < this.#deadline;
  }

  /** Probe after `delayMs`, unless one is running or due already. */
  #kick(delayMs: number): void {
    if (this.#probing || this.#probeTimer !== undefined || !this.#wantsProbe()) return;
    this.#probeTimer = setTimeout(() => {
      this.#probeTimer = undefined;
      this.#probeOnce().catch((error) =>
        this.#opt.log(`confirm: probe failed unexpectedly: ${error}`, "error")
      );
    }, delayMs);
  }

  async #probeOnce(): Promise<void> {
    if (!this.#wantsProbe()) return;
    const generation = this.#generation;
    const started = this.#now();
    const timeout = Math.max(1, Math.min(PROBE_TIMEOUT_MS, this.#deadline - started));
    this.#probing = true;
    let answered = false;
    try {
      answered = await this.#opt.probe(timeout);
    } catch {
      answered = false;
    } finally {
      this.#probing = false;
    }
    // An answer counts for the declaration applied before it was asked for, and only
    // while its window is open.
    if (answered && generation === this.#generation && this.#wantsProbe()) {
      const open = this.#pending!;
      this.#close();
      this.#opt.log(
        `confirm: serial ${open.serial} confirmed: the broker acknowledged a heartbeat sent after ` +
          `its apply and took a new connection; its changes (${
            describeChanges(open.changed)
          }) stand`,
      );
      return;
    }
    this.#kick(this.#opt.probeEveryMs ?? 1000);
  }
}
