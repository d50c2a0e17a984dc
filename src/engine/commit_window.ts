/**
 * The commit window: resources checked one by one, then changed together. Consecutive
 * resources of a kind whose applies may run together (files: kind.ts `concurrentApply`)
 * gather in a window; the window's changes start in waves, their data is made durable (one
 * sync of the file system per wave where the adapter offers it, else each file's fsync,
 * overlapping), they commit in declared order (an apply after a failed one abandons its
 * change), the directories they touched are synced once, then each change is read back
 * and recorded, in one transaction. A resource applied alone goes through the same steps
 * as a window of one.
 *
 * Durability: a create's intent is recorded (synced) before its apply starts; no rename
 * comes before the data it names is on disk; what a window recorded has its data and its
 * name on disk before the record (docs/how-it-works.md, "What a power cut leaves").
 */
import type { Change, Diff, KindContext } from "../resources/kind.ts";
import { describe, ResourceError } from "../resources/kind.ts";
import { kindOf, type Resource } from "../resources/mod.ts";
import { type FileIdentity, sameIdentity } from "../providers.ts";
import { describeError } from "../errors.ts";
import type { Recorder } from "./recorder.ts";
import type { EngineContext } from "./types.ts";
import { commitTurns, Interrupted, type Turn } from "./_commit_turns.ts";
import type { ManagedSummary, ResourceResult } from "../store/records.ts";

/**
 * Consecutive resources of a kind that applies together are checked into batches of up to
 * this many; their directories are synced once per batch, before any of it is recorded.
 */
const BATCH = 512;

/** At most this many writes run together (each holds a temporary file open meanwhile). */
const WAVE = 64;

/**
 * From this many changes in a window, where the file system can (`FileSystem.syncWrites`),
 * their data is made durable by one sync of the file system between the last write and the
 * first rename of each wave, instead of one fsync per file; waves are then SYNCED_WAVE large.
 * Below it, the overlapping fsyncs cost less than starting `sync` (tests/bench/RESULTS.md,
 * issue 37 item 5: a drift repair of 30 files paid about 18 ms more CPU with it).
 */
const SYNC_TOGETHER_FROM = 128;
const SYNCED_WAVE = 256;

/** What changing and recording resources needs of the apply they are part of. */
export interface ApplyParts {
  ctx: EngineContext;
  kctx: KindContext;
  applyId: number;
  recorder: Recorder;
  /** Ids this apply changed, in declared order (KindContext.changedIds). */
  changedIds: Set<string>;
  /** Why a change takes effect only when the host is next started, by resource id. */
  later: Map<string, string>;
}

/** One resource checked: what it is, what differs, and how it would be recorded. */
export interface Checked {
  resource: Resource;
  position: number;
  base: Pick<ResourceResult, "id" | "type" | "key">;
  managed: ManagedSummary | undefined;
  digest: string;
  found: Diff<Change>;
}

/** What became of one checked resource: a result and how to keep it, or why it failed. */
export type Outcome =
  | {
    result: Pick<ResourceResult, "outcome" | "changes" | "detail">;
    save: (applyId: number, seq: number, result: ResourceResult) => void;
  }
  | { error: unknown };

/** Resources checked and waiting to be changed together. */
export class CommitWindow {
  readonly #items: Checked[] = [];

  constructor(private readonly parts: ApplyParts, private readonly signal?: AbortSignal) {}

  /** Add a checked resource; true when the window is full (flush it). */
  add(item: Checked): boolean {
    this.#items.push(item);
    return this.#items.length >= BATCH;
  }

  /** Change and record the window; false when one of it failed (the rest is then skipped). */
  async flush(): Promise<boolean> {
    const items = this.#items.splice(0);
    if (items.length === 0) return true;
    const outcomes = await changeTogether(this.parts, items, this.signal);
    // One transaction for the window's records.
    let ok = true;
    this.parts.ctx.store.batch(() => ok = this.#record(items, outcomes));
    return ok;
  }

  #record(items: Checked[], outcomes: Outcome[]): boolean {
    const { recorder } = this.parts;
    for (let i = 0; i < items.length; i++) {
      const outcome = outcomes[i];
      if ("error" in outcome && outcome.error instanceof Interrupted) {
        recorder.interrupted = true;
        recorder.skip(items.slice(i).map((later) => later.resource), "not attempted: interrupted");
        return false;
      }
      if ("error" in outcome) {
        recorder.fail(items[i].base, outcome.error);
        const rest = items.slice(i + 1).map((later) => later.resource);
        recorder.skip(rest, "not attempted: an earlier step failed");
        return false;
      }
      recordChanged(this.parts, items[i], outcome);
    }
    return true;
  }
}

/** Record what became of one resource; a change joins the ids later `restartOn` sees. */
export function recordChanged(
  { applyId, changedIds, recorder }: ApplyParts,
  item: Checked,
  outcome: Exclude<Outcome, { error: unknown }>,
): ResourceResult {
  const result: ResourceResult = { ...item.base, ...outcome.result };
  // Later resources' restartOn is answered from this set (KindContext.changedIds).
  if (result.outcome === "changed") changedIds.add(item.resource.id);
  recorder.record(result, (seq) => outcome.save(applyId, seq, result));
  return result;
}

/**
 * Change what differs among `items` (checked in declared order), together: the applies
 * start in waves of WAVE at once, commit in declared order (an apply after a failed one
 * abandons its change, and no later wave starts), then the directories they touched are
 * synced, once each, so what is recorded has its data and its name on disk; then each
 * change is read back. One outcome per item, up to the first that failed.
 */
export async function changeTogether(
  parts: ApplyParts,
  items: Checked[],
  signal?: AbortSignal,
): Promise<Outcome[]> {
  const changing = items.filter((item) => item.found.changes.length > 0);
  const applied = await applyInWaves(parts, changing, signal);
  // Renames and creations of a batch become durable before any of it is recorded.
  let synced: unknown;
  if (changing.some((item) => kindOf(item.resource).concurrentApply)) {
    const failure = await syncDirectories(parts.ctx, parts.kctx);
    if (failure !== undefined) {
      synced = new ResourceError("resource.sync", failure, {
        hint: "the file system refused to make the change durable; see the kernel's log",
      });
    }
  }
  const outcomes: Outcome[] = [];
  let change = 0;
  for (const item of items) {
    if (item.found.changes.length === 0) {
      outcomes.push(unchanged(parts, item));
      continue;
    }
    const settled = applied[change++];
    const outcome = settled.status === "rejected"
      ? { error: settled.reason }
      : synced !== undefined
      ? { error: synced }
      : await readBack(parts, item);
    outcomes.push(outcome);
    if ("error" in outcome) break;
  }
  return outcomes;
}

/**
 * The changes, in waves of WAVE (a file's write holds its temporary file open until its
 * rename), each wave's commits in declared order; after a wave in which one failed nothing
 * more is attempted (and no intent is left for what was not). A create's intent is
 * recorded before its apply starts.
 */
async function applyInWaves(
  parts: ApplyParts,
  changing: Checked[],
  signal?: AbortSignal,
): Promise<PromiseSettledResult<void>[]> {
  const { store, providers: { fs } } = parts.ctx;
  const applied: PromiseSettledResult<void>[] = [];
  // One sync of the file system per wave, after its writes and before its renames.
  const together = fs.syncWrites !== undefined && changing.length >= SYNC_TOGETHER_FROM;
  const size = together ? SYNCED_WAVE : WAVE;
  for (let start = 0; start < changing.length; start += size) {
    const wave = changing.slice(start, start + size);
    const creating = wave.filter((item) => !item.found.exists);
    if (creating.length > 0) {
      store.batch(() =>
        creating.forEach((item) => store.recordIntent(item.base.key, item.resource))
      );
    }
    const turns = commitTurns(wave.length, signal, together ? () => fs.syncWrites!() : undefined);
    applied.push(
      ...await Promise.allSettled(
        wave.map((item, i) => applyOne(parts, item, turns[i], together)),
      ),
    );
    if (applied.some((settled) => settled.status === "rejected")) break;
  }
  return applied;
}

/**
 * Apply one change, at its turn to commit (in a wave of more than one; `synced`: the wave's
 * writes are synced together before the first of them commits).
 */
async function applyOne(
  parts: ApplyParts,
  item: Checked,
  turn: Turn | undefined,
  synced: boolean,
): Promise<void> {
  const { ctx: { store }, kctx, later } = parts;
  const kind = kindOf(item.resource);
  const own: KindContext = turn
    ? { ...kctx, beforeCommit: turn.wait, ...(synced ? { deferSync: true } : {}) }
    : kctx;
  let ok = false;
  try {
    await kind.apply(own, item.resource, item.found);
    ok = true;
    const why = kind.takesEffectOnRestart?.(kctx, item.resource);
    if (why !== undefined) later.set(item.resource.id, why);
  } catch (error) {
    // Nothing was created: the intent must not later make a person's file look like ours.
    if (
      !item.found.exists &&
      !(await kind.check(kctx, item.resource).then((c) => c.exists, () => true))
    ) {
      store.dropIntent(item.base.key);
    }
    throw error;
  } finally {
    turn?.done(ok);
  }
}

/** How a resource is recorded as managed, once changed or found in sync. */
function recordAs(parts: ApplyParts, item: Checked) {
  return {
    key: item.base.key,
    id: item.resource.id,
    type: item.resource.type,
    position: item.position,
    digest: item.digest,
    spec: item.resource,
    // Created by the host: recorded as such, made just now, or made by a create whose
    // record a crash cut short (its intent is still there).
    created: item.managed?.created || !item.found.exists ||
      (item.managed === undefined && parts.ctx.store.hasIntent(item.base.key)),
  };
}

/** A resource found in sync: recorded as unchanged, or recorded anew (another id, a new digest). */
function unchanged(parts: ApplyParts, item: Checked): Outcome {
  const { store } = parts.ctx;
  const { managed, position } = item;
  const same = managed !== undefined && managed.digest === item.digest &&
    managed.id === item.resource.id;
  return {
    result: { outcome: "unchanged", changes: [] },
    save: same
      ? (applyId, seq, result) =>
        store.recordUnchanged(
          applyId,
          seq,
          result,
          managed.position === position ? undefined : position,
          identityUpdate(managed.identity, item.found.identity),
        )
      : (applyId, seq, result) =>
        store.recordManaged(applyId, seq, recordAs(parts, item), result, item.found.identity),
  };
}

/** Read a change back: in sync now, or why not. */
async function readBack(parts: ApplyParts, item: Checked): Promise<Outcome> {
  let after: Diff<Change>;
  try {
    after = await kindOf(item.resource).check(parts.kctx, item.resource);
  } catch (error) {
    return { error };
  }
  if (after.changes.length > 0) {
    return {
      error: new ResourceError(
        "resource.read-back",
        `read-back after applying still differs: ${describe(after).join(", ")}`,
        { hint: "something on the machine undid or refused the change; see the service's log" },
      ),
    };
  }
  const entry = recordAs(parts, item);
  const why = parts.later.get(item.resource.id);
  const { store } = parts.ctx;
  return {
    result: {
      outcome: "changed",
      changes: describe(item.found),
      ...(why === undefined ? {} : { detail: why }),
    },
    save: (applyId, seq, result) =>
      store.recordManaged(applyId, seq, entry, result, after.identity),
  };
}

/** What to store about an identity: a new one, null to forget the kept one, or nothing. */
function identityUpdate(
  kept: FileIdentity | undefined,
  found: FileIdentity | undefined,
): FileIdentity | null | undefined {
  if (found === undefined) return kept === undefined ? undefined : null;
  return kept !== undefined && sameIdentity(kept, found) ? undefined : found;
}

/**
 * Sync every directory whose entries changed, together (the journal merges them);
 * the first failure, as a sentence. A directory removed later in the apply is skipped.
 */
export async function syncDirectories(
  ctx: EngineContext,
  kctx: KindContext,
): Promise<string | undefined> {
  const dirs = [...kctx.touchedDirectories];
  kctx.touchedDirectories.clear();
  const synced = await Promise.allSettled(dirs.map((dir) => ctx.providers.fs.syncDirectory(dir)));
  for (let i = 0; i < dirs.length; i++) {
    const outcome = synced[i];
    if (outcome.status === "fulfilled" || outcome.reason instanceof Deno.errors.NotFound) continue;
    return `syncing ${dirs[i]} to disk failed: ${describeError(outcome.reason)}`;
  }
  return undefined;
}
