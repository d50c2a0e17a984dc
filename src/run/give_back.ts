/**
 * Giving freed memory back (issue 37): glibc keeps the heap an apply freed, and `run` would
 * hold it while it waits. The command line hands the loop a function that asks the runtime
 * to trim it (V8's garbage collected, then a SIGUSR2 to itself: main.ts). Trimming after
 * every apply of a stream costs more than it gives: the next apply takes the same pages back,
 * page by page (measured with 550 resources: about 40 ms more CPU per push). So the loop
 * trims once it has had no work for `quietMs`: never inside a stream of pushes (whose peak it
 * would not lower: the next push takes the pages again), always once the stream or a drift
 * pass is over, and a second after each heartbeat tick of an idle loop (what the timers' own
 * work allocated: the inventory's detection after a burst, about 3 MiB).
 */
export class GiveBack {
  readonly #trim: () => void;
  readonly #quietMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(trim: () => void, quietMs = 1000) {
    this.#trim = trim;
    this.#quietMs = quietMs;
  }

  /** The loop has no work waiting: trim once it has stayed so for `quietMs`. */
  idle(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#trim();
    }, this.#quietMs);
  }

  /** Work started (or the loop stops): no trim until it waits again. */
  busy(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
