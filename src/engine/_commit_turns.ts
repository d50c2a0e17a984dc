/**
 * The order in which the concurrent applies of a wave commit (./commit_window.ts): each
 * waits for every one to reach its commit, for the wave's sync, then for the one before it.
 */
import { describeError } from "../errors.ts";
import { ResourceError } from "../resources/kind.ts";

/** An apply of a window abandoned at its commit because the apply was aborted. */
export class Interrupted extends Error {}

/** One apply's turn to commit, in a wave of concurrent applies. */
export interface Turn {
  wait: () => Promise<void>;
  done: (ok: boolean) => void;
}

/**
 * The commit order of `count` concurrent applies: turn i waits until every apply
 * has reached its commit (or ended), then for `beforeRenames` (run once, when all have
 * arrived: the sync of what they wrote), then for apply i - 1 to end; it throws when
 * an earlier apply failed, or the sync did, so nothing after a failure is committed.
 */
export function commitTurns(
  count: number,
  signal?: AbortSignal,
  beforeRenames?: () => Promise<void>,
): Turn[] {
  if (count <= 1) return [];
  let arrived = 0;
  let failedAt = Infinity;
  let synced: Promise<void> | undefined;
  const sync = async () => {
    try {
      await beforeRenames?.();
    } catch (cause) {
      throw new ResourceError(
        "resource.sync",
        `syncing the written files to disk failed: ${describeError(cause)}; nothing was renamed`,
        { hint: "the file system refused to make the change durable; see the kernel's log" },
      );
    }
  };
  const all = Promise.withResolvers<void>();
  const arrive = () => {
    if (++arrived === count) all.resolve();
  };
  const ended = Array.from({ length: count }, () => Promise.withResolvers<void>());
  return ended.map((own, i) => {
    let reached = false;
    return {
      wait: async () => {
        if (!reached) {
          reached = true;
          arrive();
        }
        await all.promise;
        // Created by the first turn to get here (never before: nobody would await it).
        await (synced ??= sync());
        if (i > 0) await ended[i - 1].promise;
        if (failedAt < i) {
          throw new ResourceError(
            "resource.not-attempted",
            "not committed: an earlier resource of the same step failed",
          );
        }
        if (signal?.aborted) throw new Interrupted();
      },
      done: (ok) => {
        if (!ok) failedAt = Math.min(failedAt, i);
        if (!reached) {
          reached = true; // ended before its commit: it no longer holds the others up
          arrive();
        }
        own.resolve();
      },
    };
  });
}
