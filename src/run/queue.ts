/**
 * The run loop's work queue: one piece of work at a time, in arrival order;
 * reconciles coalesce (one waiting is as good as many), declarations never do.
 */
import type { Pushed } from "./uplink.ts";

/**
 * What started a reconcile or an apply: "rescue" for the apply that answered a rescue
 * (`nox-mesh-host rescue`), "unhold" for the one that follows a hold lifted, "revert"
 * when a confirm window lapsed and the host goes back to the declaration it held before
 * (src/run/confirm.ts).
 */
export type Trigger =
  | "start"
  | "declaration"
  | "reconnect"
  | "drift"
  | "rescue"
  | "unhold"
  | "revert";

/** One piece of work for the loop. */
export type Work =
  | { kind: "reconcile"; trigger: Trigger }
  | ({ kind: "declaration"; trigger: Trigger } & Pushed);

/** A queue the loop waits on; closing it ends the wait. */
export class WorkQueue {
  #queue: Work[] = [];
  #wake: (() => void) | undefined;
  #closed = false;

  /**
   * Add work (ignored once closed); a reconcile joins one already waiting, which then says
   * the more telling trigger: an event (a hold lifted, a rescue, a reconnect …) rather than
   * the drift timer that happened to fire beside it.
   */
  push(work: Work): void {
    if (this.#closed) return;
    if (work.kind === "reconcile") {
      const waiting = this.#queue.find((w) => w.kind === "reconcile");
      if (waiting) {
        if (waiting.trigger === "drift") waiting.trigger = work.trigger;
        return;
      }
    }
    this.#queue.push(work);
    this.#wake?.();
  }

  /** The next piece of work, waiting for one; `undefined` once closed. */
  async next(): Promise<Work | undefined> {
    while (!this.#closed) {
      const work = this.#queue.shift();
      if (work) return work;
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = undefined;
    }
    return undefined;
  }

  /** How many pieces of work wait. */
  get size(): number {
    return this.#queue.length;
  }

  /** Take no more work; a waiting `next()` returns `undefined`. */
  close(): void {
    this.#closed = true;
    this.#wake?.();
  }
}
