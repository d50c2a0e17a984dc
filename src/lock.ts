/** One apply at a time per state directory: an advisory lock on a file beside the store. */
import { posix } from "node:path";
import { BusyError } from "./errors.ts";

/** The lock file's name inside the state directory. */
export const LOCK_FILE = "apply.lock";

/**
 * Take the apply lock, waiting up to `waitMs`; release it by disposing.
 *
 * @example
 * ```ts
 * using _lock = await acquireApplyLock("/var/lib/mesh-host", { waitMs: 30_000 });
 * ```
 */
export async function acquireApplyLock(
  stateDir: string,
  { waitMs = 30_000 }: { waitMs?: number } = {},
): Promise<Disposable> {
  await Deno.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const path = posix.join(stateDir, LOCK_FILE);
  const file = await Deno.open(path, { create: true, write: true, mode: 0o600 });
  const deadline = Date.now() + waitMs;
  let delay = 20;
  while (!(await file.tryLock(true))) {
    if (Date.now() >= deadline) {
      file.close();
      throw new BusyError("busy", `another apply holds ${path}`, {
        hint: "the service or another command is applying right now; retry when it is done",
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
