/**
 * Giving freed memory back (issue 37): glibc keeps the heap an apply freed, and `run` would
 * hold it while it waits. The command line hands the loop a function that asks the runtime
 * to trim it (a SIGUSR2 to itself: main.ts). Trimming after every apply of a stream costs
 * more than it gives: the next apply takes the same pages back, page by page (measured with
 * 550 resources: about 40 ms more CPU per push). So the loop trims when it waits for work,
 * at most once per `gapMs`: a stream of pushes trims every `gapMs` (its peak stays bounded),
 * and an idle host has trimmed within `gapMs` of its last apply.
 */
export class GiveBack {
  readonly #trim: () => void;
  readonly #gapMs: number;
  readonly #now: () => number;
  #last = -Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(trim: () => void, gapMs = 5000, now: () => number = () => performance.now()) {
    this.#trim = trim;
    this.#gapMs = gapMs;
    this.#now = now;
  }

  /** The loop has no work waiting: trim now, or once the gap since the last trim has passed. */
  idle(): void {
    clearTimeout(this.#timer);
    const wait = this.#last + this.#gapMs - this.#now();
    if (wait <= 0) return this.#run();
    this.#timer = setTimeout(() => this.#run(), wait);
  }

  /** Work started: no trim in the middle of it. */
  busy(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #run(): void {
    this.#timer = undefined;
    this.#last = this.#now();
    this.#trim();
  }
}
