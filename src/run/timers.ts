/** The run loop's clocks: the drift timer (re-armed after every apply) and the tick. */

/** A one-shot timer re-armed after every apply: the drift reconcile. */
export class DriftTimer {
  readonly #ms: number;
  readonly #fire: () => void;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #nextAt: string | null = null;

  constructor(ms: number, fire: () => void) {
    this.#ms = ms;
    this.#fire = fire;
  }

  /** Start (again) from now. */
  arm(): void {
    clearTimeout(this.#timer);
    this.#nextAt = new Date(Date.now() + this.#ms).toISOString();
    this.#timer = setTimeout(this.#fire, this.#ms);
  }

  /** Stop it; nothing is due. */
  clear(): void {
    clearTimeout(this.#timer);
    this.#nextAt = null;
  }

  /** When it fires next (ISO time), or `null` when stopped. */
  get nextAt(): string | null {
    return this.#nextAt;
  }

  /** Its interval in seconds. */
  get seconds(): number {
    return this.#ms / 1000;
  }
}

/** Call `tick` every `ms` until the returned function is called. */
export function every(ms: number, tick: () => void): () => void {
  const timer = setInterval(tick, ms);
  return () => clearInterval(timer);
}

/**
 * The delay before the next heartbeat tick: `ms` give or take `spread` (a
 * fraction), so nodes started together, or reconnected to a restarted broker
 * together, drift apart instead of beating in the same second.
 *
 * @example
 * ```ts
 * jitteredDelay(30_000, 0.2, () => 0); // 24000
 * jitteredDelay(30_000, 0.2, () => 1); // 36000
 * ```
 */
export function jitteredDelay(
  ms: number,
  spread = 0.2,
  random: () => number = Math.random,
): number {
  return Math.round(ms * (1 - spread + 2 * spread * random()));
}

/** Call `tick` about every `ms` (each delay jittered) until the returned function is called. */
export function everyJittered(
  ms: number,
  tick: () => void,
  random: () => number = Math.random,
): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const next = () => {
    timer = setTimeout(() => {
      if (stopped) return;
      tick();
      next();
    }, jitteredDelay(ms, 0.2, random));
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
