/**
 * The memory ceiling (host.json `memoryCeilingMiB`, default 256): a service
 * whose resident memory grew above it finishes its current apply, says why
 * (log, a `restart` message on its report subject) and exits with EXIT.restart,
 * which the launcher restarts without counting a failure. It only asks once
 * the process has completed a reconcile and has been up `minUptimeMs`, so a
 * ceiling set below what the host needs at all restarts it at that pace, not in
 * a tight loop.
 */

/** The message the node sends before it exits for the ceiling (on its report subject). */
export interface RestartMessage {
  v: 1;
  kind: "restart";
  node: string;
  at: string;
  reason: "memory";
  rssBytes: number;
  ceilingBytes: number;
  message: string;
}

/** Watches the process's resident memory against the ceiling. */
export class MemoryCeiling {
  readonly ceilingBytes: number;
  readonly #minUptimeMs: number;
  readonly #rss: () => number;

  constructor(ceilingMiB: number, minUptimeMs: number, rss: () => number = residentBytes) {
    this.ceilingBytes = ceilingMiB * 1024 * 1024;
    this.#minUptimeMs = minUptimeMs;
    this.#rss = rss;
  }

  /**
   * Why the process should restart now (a sentence with the numbers), or
   * undefined: below the ceiling, or too young to restart.
   */
  exceeded(uptimeMs: number): { rssBytes: number; message: string } | undefined {
    if (uptimeMs < this.#minUptimeMs) return undefined;
    const rssBytes = this.#rss();
    if (rssBytes <= this.ceilingBytes) return undefined;
    return {
      rssBytes,
      message: `resident memory ${mib(rssBytes)} MiB is above the ceiling of ${
        mib(this.ceilingBytes)
      } MiB (host.json memoryCeilingMiB)`,
    };
  }

  /** The message for the control plane. */
  message(node: string, rssBytes: number, message: string): RestartMessage {
    return {
      v: 1,
      kind: "restart",
      node,
      at: new Date().toISOString(),
      reason: "memory",
      rssBytes,
      ceilingBytes: this.ceilingBytes,
      message,
    };
  }
}

function residentBytes(): number {
  return Deno.memoryUsage().rss;
}

function mib(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(0);
}
