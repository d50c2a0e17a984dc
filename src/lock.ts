/**
 * Advisory locks on files in the state directory: one apply at a time
 * (apply.lock), and one service per state directory (run.lock).
 */
import { posix } from "./posix_path.ts";
import { BusyError } from "./errors.ts";

/** The apply lock's file name inside the state directory. */
export const LOCK_FILE = "apply.lock";

/** The service lock's file name: held by `run` for its whole life. */
export const RUN_LOCK_FILE = "run.lock";

/** How to wait for a lock. */
export interface LockOptions {
  /** How long to wait before giving up with BusyError (default 30 s; Infinity waits). */
  waitMs?: number;
  /** Give up waiting (BusyError) when this is aborted. */
  signal?: AbortSignal;
  /** Called once, when the lock is found taken and waiting starts. */
  onWait?: () => void;
}

/**
 * Take the apply lock, waiting up to `waitMs`; release it by disposing.
 *
 * @example
 * ```ts
 * using _lock = await acquireApplyLock("/var/lib/mesh-host", { waitMs: 30_000 });
 * ```
 */
export function acquireApplyLock(stateDir: string, options: LockOptions = {}): Promise<Disposable> {
  return acquireLock(stateDir, LOCK_FILE, "another apply", options);
}

/** Take the service lock (one `run` per state directory); release it by disposing. */
export function acquireRunLock(stateDir: string, options: LockOptions = {}): Promise<Disposable> {
  return acquireLock(stateDir, RUN_LOCK_FILE, "another `run` of this host", options);
}

async function acquireLock(
  stateDir: string,
  name: string,
  holder: string,
  { waitMs = 30_000, signal, onWait }: LockOptions,
): Promise<Disposable> {
  await Deno.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const path = posix.join(stateDir, name);
  const file = await Deno.open(path, { create: true, write: true, mode: 0o600 });
  const deadline = Date.now() + waitMs;
  let delay = 20;
  while (!(await file.tryLock(true))) {
    if (delay === 20) onWait?.();
    if (Date.now() >= deadline || signal?.aborted) {
      file.close();
      throw new BusyError("busy", `${holder} holds ${path}`, {
        hint: "the service or another command is working right now; retry when it is done",
      });
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 500);
  }
  return {
    [Symbol.dispose]() {
      try {
        file.unlockSync();
      } finally {
        file.close();
      }
    },
  };
}
