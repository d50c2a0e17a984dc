/**
 * The service's side of a hold and a rescue (src/engine/hold.ts). The command line
 * talks to the running service only through the store: this watch reads the two meta
 * values every few seconds (one small read) and tells the loop when a hold was lifted
 * (apply the latest declaration) or a rescue was made (start again, so the new link
 * asks the mesh for this node's declaration).
 */
import { type Hold, pendingRescue, readHold, type Rescue } from "../engine/hold.ts";
import type { Store } from "../store/store.ts";
import { every } from "./timers.ts";

/** What the loop does when the watch sees a change. */
export interface HoldWatchHandlers {
  /** The hold was lifted (`unhold`): apply what the store holds now. */
  lifted(hold: Hold): void;
  /** A rescue was made since this process started (or since it last answered one). */
  rescued(rescue: Rescue): void;
}

/** Watches the store for a hold lifted and a rescue made. */
export class HoldWatch {
  readonly #store: Store;
  readonly #handlers: HoldWatchHandlers;
  #hold: Hold | null;
  #rescueAt: string | undefined;
  #stop: (() => void) | undefined;

  constructor(store: Store, handlers: HoldWatchHandlers) {
    this.#store = store;
    this.#handlers = handlers;
    this.#hold = readHold(store);
    // A rescue pending when the process starts is this process's to answer.
    this.#rescueAt = pendingRescue(store)?.at;
  }

  /** The hold as last seen. */
  get hold(): Hold | null {
    return this.#hold;
  }

  /**
   * The loop did not apply because of `hold`: its end must be noticed even when it came
   * and went between two looks.
   */
  withheld(hold: Hold): void {
    this.#hold = hold;
  }

  /**
   * The hold last seen, when the store no longer has it: lifted, and taken here (the
   * watch will not report it again). A reconcile asks first, so the one that applies what
   * a hold withheld is known as such even when the timer, not the watch, started it.
   */
  takeLifted(): Hold | null {
    const before = this.#hold;
    if (!before || readHold(this.#store)) return null;
    this.#hold = null;
    return before;
  }

  /** Look every `ms` milliseconds until stopped. */
  start(ms: number): void {
    this.#stop ??= every(ms, () => this.check());
  }

  stop(): void {
    this.#stop?.();
    this.#stop = undefined;
  }

  /** Look now. */
  check(): void {
    const hold = readHold(this.#store);
    const before = this.#hold;
    this.#hold = hold;
    if (before && !hold) this.#handlers.lifted(before);
    const rescue = pendingRescue(this.#store);
    if (rescue && rescue.at !== this.#rescueAt) {
      this.#rescueAt = rescue.at;
      this.#handlers.rescued(rescue);
    }
  }
}
