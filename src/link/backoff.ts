/**
 * Reconnect backoff: exponential from `baseMs`, capped at `maxMs`, with "equal
 * jitter" (each delay is uniformly between half and all of its step), so a
 * fleet that lost the same broker does not come back in lock step.
 */

/** The shape of the backoff. */
export interface Backoff {
  baseMs: number;
  maxMs: number;
}

/** Defaults: 0.5 s, 1 s, 2 s … up to 30 s between attempts, forever. */
export const BACKOFF: Backoff = { baseMs: 500, maxMs: 30_000 };

/**
 * The delay before reconnect attempt `attempt` (0 = the first after a failure or drop).
 *
 * @example
 * ```ts
 * backoffDelay(3, BACKOFF, () => 1); // 4000
 * ```
 */
export function backoffDelay(
  attempt: number,
  shape: Backoff = BACKOFF,
  random: () => number = Math.random,
): number {
  const step = Math.min(shape.maxMs, shape.baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(step / 2 + (step / 2) * random());
}
