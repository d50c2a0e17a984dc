/**
 * Apply (R3): check each resource in declared order, change what differs, read
 * every change back, record only what read back, stop at the first failure,
 * then release what is held and no longer declared (release.ts).
 */
import { canonicalJson, digestOf } from "../declaration/canonical.ts";
import type { Declaration } from "../declaration/envelope.ts";
import {
  type Change,
  describe,
  type Diff,
  type KindContext,
  type KindNotes,
  newKindContext,
  ResourceError,
} from "../resources/kind.ts";
import {
  kindOf,
  KINDS,
  mayCutLink,
  referencesOf,
  type Resource,
  resourceKey,
} from "../resources/mod.ts";
import { type FileIdentity, type Providers, sameIdentity } from "../providers.ts";
import { META } from "../store/meta.ts";
import { describeError } from "../errors.ts";
import { releaseUndeclared } from "./release.ts";
import { answerRescue, pendingRescue } from "./hold.ts";
import { restoreContent } from "../store/confirm.ts";
import { posix } from "../posix_path.ts";
import {
  blobDirectory,
  ContentCache,
  contentResolver,
  type ContentSource,
} from "../store/content.ts";
import {
  type ApplyOptions,
  type ApplyReport,
  type Counts,
  type EngineContext,
  FROM_DISK,
  type HeldSummary,
  type ResourceResult,
} from "./types.ts";

/**
 * Make the machine match `declaration`, recording every step in the store.
 * The caller holds the apply lock.
 */
export async function applyDeclaration(
  ctx: EngineContext,
  declaration: Declaration,
  options: ApplyOptions,
): Promise<ApplyReport> {
  const { store } = ctx;
  const started = performance.now();
  const startedAt = new Date().toISOString();
  const { digest } = declaration;
  acceptCurrent(store, declaration, options);
  // The same declaration as the last apply, which converged: every held resource
  // was recorded from it, so its digest is known without hashing it again.
  const last = store.lastApply();
  // A rescue forgot what was held; this apply answers it, whatever it finds.
  const rescue = pendingRescue(store);
  const unchangedSince = last?.outcome === "converged" && last.digest === digest;
  const applyId = store.beginApply(options.source, options.origin, declaration.serial, digest);
  const changedIds = new Set<string>();
  const kctx = kindContext(ctx, changedIds, options);
  // After an apply that did not converge, each kind tidies what a change cut short may
  // have left (kind.ts `tidy`) before its check.
  const tidy = last !== null && last.outcome !== "converged";
  // Why a change takes effect only when the host is next started, by resource id.
  const later = new Map<string, string>();
  const held = store.heldIndex();
  // A file still as the last read back found it is not read again (its identity, held
  // with it), except in every Nth apply (host.json fullReadBackEvery), which reads every
  // file back in full; a file changed by an apply is read back then and there.
  const passes = Number(store.meta(META.readBackPasses) ?? "0") + 1;
  const fullReadBack = !(passes < (ctx.config.fullReadBackEvery ?? FULL_READ_BACK_EVERY));
  const known = new Map<object, FileIdentity>();
  if (!fullReadBack) kctx.knownIdentity = (resource) => known.get(resource);
  const results: ResourceResult[] = [];
  const counts: Counts = { changed: 0, unchanged: 0, removed: 0, forgotten: 0, failed: 0 };
  let error: string | undefined;
  let interrupted = false;

  // Results that change nothing on the machine are written together, in one
  // transaction, before the next change or at the end; a change is recorded at once.
  const deferred: (() => void)[] = [];
  const flush = () => {
    if (deferred.length) store.batch(() => deferred.splice(0).forEach((save) => save()));
  };
  const record = (result: ResourceResult, save: (seq: number) => void) => {
    const seq = results.length;
    if (result.outcome === "unchanged") deferred.push(() => save(seq));
    else {
      flush();
      save(seq);
    }
    results.push(result);
    if (result.outcome === "changed") counts.changed++;
    else if (result.outcome === "unchanged") counts.unchanged++;
    else if (result.outcome === "removed") counts.removed++;
    else if (result.outcome === "forgotten") counts.forgotten++;
    else if (result.outcome === "failed") counts.failed++;
    options.onResult?.(result);
  };
  const resources = declaration.resources;
  // The order of the steps: as declared, or (going back after a confirm window) what can
  // cut the node off first. A resource keeps its declared position either way.
  const order = resources.map((_, position) => position);
  if (options.networkFirst) {
    const late = (position: number) => mayCutLink(resources[position].type) ? 0 : 1;
    order.sort((a, b) => late(a) - late(b) || a - b);
  }
  const skipRest = (from: number) => {
    for (const resource of order.slice(from).map((position) => resources[position])) {
      const result = skipped(
        resource,
        interrupted ? "not attempted: interrupted" : "not attempted: an earlier step failed",
      );
      record(result, (seq) => store.recordResult(applyId, seq, result));
    }
  };

  // Consecutive resources of a kind whose applies may run together (files) are
  // checked one by one into a batch, then changed together in waves (their fsyncs
  // overlap), committed in declared order, their directories synced once, read back and
  // recorded.
  const window: Checked[] = [];
  /** Apply and record the window; false when one of it failed (the rest then skipped). */
  const flushWindow = async (): Promise<boolean> => {
    const items = window.splice(0);
    if (items.length === 0) return true;
    const outcomes = await changeTogether(ctx, kctx, items, later, options.signal);
    // One transaction for the window's records.
    let ok = true;
    store.batch(() => ok = recordWindow(items, outcomes));
    return ok;
  };
  const recordWindow = (items: Checked[], outcomes: Outcome[]): boolean => {
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      const outcome = outcomes[i];
      if ("error" in outcome && outcome.error instanceof Interrupted) {
        interrupted = true;
        for (const later of items.slice(i)) {
          const result = skipped(later.resource, "not attempted: interrupted");
          record(result, (seq) => store.recordResult(applyId, seq, result));
        }
        return false;
      }
      if ("error" in outcome) {
        error = `${item.resource.type} "${item.resource.id}" failed: ${
          describeError(outcome.error)
        }`;
        const result = failed(item.base, outcome.error);
        record(result, (seq) => store.recordResult(applyId, seq, result));
        for (const later of items.slice(i + 1)) {
          const result = skipped(later.resource, "not attempted: an earlier step failed");
          record(result, (seq) => store.recordResult(applyId, seq, result));
        }
        return false;
      }
      const result: ResourceResult = { ...item.base, ...outcome.result };
      // Later resources' restartOn is answered from this set (KindContext.changedIds).
      if (result.outcome === "changed") changedIds.add(item.resource.id);
      record(result, (seq) => outcome.save(applyId, seq, result));
    }
    return true;
  };

  // A change made in this apply may have brought adapters (kind.ts `bringsProviders`).
  let providersMayHaveChanged = false;
  if (options.networkFirst) {
    error = await releaseUndeclared(ctx, kctx, declaration, applyId, record, mayCutLink);
    if (error !== undefined) skipRest(0);
  }
  for (let step = 0; error === undefined && step < order.length; step++) {
    const position = order[step];
    const resource = resources[position];
    if (options.signal?.aborted) {
      if (!await flushWindow()) {
        skipRest(step);
        break;
      }
      interrupted = true;
      skipRest(step);
      break;
    }
    const key = resourceKey(resource);
    const base = { id: resource.id, type: resource.type, key };
    const kind = kindOf(resource);
    try {
      if (kind.concurrentApply) {
        window.push(
          await checkOne(
            kctx,
            resource,
            position,
            base,
            held.get(key),
            unchangedSince,
            known,
            tidy,
          ),
        );
        if (window.length >= BATCH && !await flushWindow()) {
          skipRest(step + 1);
          break;
        }
        continue;
      }
      if (!await flushWindow()) {
        skipRest(step);
        break;
      }
      if (providersMayHaveChanged && ctx.redetect && !providerFor(kctx.providers, resource.type)) {
        providersMayHaveChanged = false;
        ctx.providers = kctx.providers = await ctx.redetect();
      }
      const checked = await checkOne(
        kctx,
        resource,
        position,
        base,
        held.get(key),
        unchangedSince,
        known,
        tidy,
      );
      const [outcome] = await changeTogether(ctx, kctx, [checked], later);
      if ("error" in outcome) throw outcome.error;
      const result: ResourceResult = { ...base, ...outcome.result };
      // Later resources' restartOn is answered from this set (KindContext.changedIds).
      if (result.outcome === "changed") changedIds.add(resource.id);
      if (result.outcome === "changed" && kind.bringsProviders) providersMayHaveChanged = true;
      record(result, (seq) => outcome.save(applyId, seq, result));
    } catch (cause) {
      if (!await flushWindow()) {
        skipRest(step);
        break;
      }
      error = `${resource.type} "${resource.id}" failed: ${describeError(cause)}`;
      const result = failed(base, cause);
      record(result, (seq) => store.recordResult(applyId, seq, result));
      skipRest(step + 1);
      break;
    }
  }
  if (error === undefined && !interrupted) await flushWindow();

  if (error === undefined && !interrupted) {
    // What was held when the apply began: what it recorded since is declared, and the
    // release looks only at what is not.
    // (After a release of the network first, the store's: that release removed some.)
    error = await releaseUndeclared(
      ctx,
      kctx,
      declaration,
      applyId,
      record,
      undefined,
      options.networkFirst ? undefined : held.keys(),
    );
  }
  // Renames and creations become durable here, once per directory rather than once per file.
  const unsynced = await syncDirectories(ctx, kctx);
  error ??= unsynced;

  flush();
  const outcome = interrupted ? "interrupted" : error === undefined ? "converged" : "failed";
  // What is held changes only with another declaration or a change on the machine.
  if (outcome === "converged" && (!unchangedSince || counts.changed + counts.removed > 0)) {
    await pruneContent(ctx);
  }
  if (interrupted) error = "interrupted before the apply finished";
  // A full read-back counts once it ran to its end; until then the next apply is one too.
  store.setMeta(META.readBackPasses, String(fullReadBack && outcome === "converged" ? 0 : passes));
  store.finishApply(applyId, outcome, counts, error);
  if (rescue && outcome !== "interrupted") answerRescue(store, rescue);
  return {
    applyId,
    outcome,
    source: options.source,
    origin: options.origin,
    ...(declaration.serial === undefined ? {} : { serial: declaration.serial }),
    digest,
    startedAt,
    durationMs: Math.round(performance.now() - started),
    counts,
    results,
    ...(error === undefined ? {} : { error }),
    ...(rescue && outcome !== "interrupted" ? { rescue } : {}),
    ...restartOf(later),
  };
}

/**
 * Make `declaration` the store's current one (the one the host holds the machine to),
 * unless it already is: before an apply, or, while the host is held, instead of one.
 */
export function acceptCurrent(
  store: EngineContext["store"],
  declaration: Declaration,
  options: Pick<ApplyOptions, "source" | "origin">,
): void {
  const { digest, ...body } = declaration;
  const current = store.currentHead();
  if (
    current?.digest !== digest || current.source !== options.source ||
    current.origin !== options.origin || current.serial !== declaration.serial
  ) {
    store.accept({
      source: options.source,
      origin: options.origin,
      node: declaration.node,
      serial: declaration.serial,
      digest,
      body: canonicalJson(body),
    });
  }
}

/** What of this apply takes effect only when the host is next started, as one sentence. */
function restartOf(later: ReadonlyMap<string, string>): { restart?: string } {
  const why = [...later.entries()].map(([id, text]) => `"${id}": ${text}`);
  return why.length === 0 ? {} : { restart: why.join("; ") };
}

/**
 * Sync every directory whose entries changed, together (the journal merges them);
 * the first failure, as a sentence. A directory removed later in the apply is skipped.
 */
async function syncDirectories(ctx: EngineContext, kctx: KindContext): Promise<string | undefined> {
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

/** An apply of a window abandoned at its commit because the apply was aborted. */
class Interrupted extends Error {}

/** By default every 6th apply reads every file back in full (host.json fullReadBackEvery). */
export const FULL_READ_BACK_EVERY = 6;

/**
 * Consecutive resources of a kind that applies together are checked into batches of up to
 * this many; their directories are synced once per batch, before any of it is recorded.
 */
const BATCH = 512;

/** At most this many writes run together (each holds a temporary file open meanwhile). */
const WAVE = 64;

/** One resource checked: what it is, what differs, and how it would be held. */
interface Checked {
  resource: Resource;
  position: number;
  base: Pick<ResourceResult, "id" | "type" | "key">;
  held: HeldSummary | undefined;
  digest: string;
  found: Diff<Change>;
}

type Outcome =
  | {
    result: Pick<ResourceResult, "outcome" | "changes" | "detail">;
    save: (applyId: number, seq: number, result: ResourceResult) => void;
  }
  | { error: unknown };

/**
 * Check one resource against the machine (its digest reused when nothing changed since).
 * The identity held with it is offered to the check (through `known`, which
 * KindContext.knownIdentity reads) only when it was recorded for this very resource.
 */
async function checkOne(
  kctx: KindContext,
  resource: Resource,
  position: number,
  base: Checked["base"],
  held: HeldSummary | undefined,
  unchangedSince: boolean,
  known: Map<object, FileIdentity>,
  tidy: boolean,
): Promise<Checked> {
  const kind = kindOf(resource);
  if (tidy) await kind.tidy?.(kctx, resource);
  const digest = held?.digest !== undefined && unchangedSince
    ? held.digest
    : await digestOf(resource);
  if (held?.identity !== undefined && held.digest === digest) known.set(resource, held.identity);
  try {
    const found = await kind.check(kctx, resource);
    return { resource, position, base, held, digest, found };
  } finally {
    known.delete(resource);
  }
}

/** What to store about an identity: a new one, null to forget the held one, or nothing. */
function identityUpdate(
  held: FileIdentity | undefined,
  found: FileIdentity | undefined,
): FileIdentity | null | undefined {
  if (found === undefined) return held === undefined ? undefined : null;
  return held !== undefined && sameIdentity(held, found) ? undefined : found;
}

/**
 * Change what differs among `items` (checked in declared order), together: the applies
 * start in waves of WAVE at once, commit in declared order (an apply after a failed one
 * abandons its change, and no later wave starts), then the directories they touched are
 * synced, once each, so what is recorded has its data and its name on disk; then each
 * change is read back. One outcome per item, up to the first that failed.
 */
async function changeTogether(
  ctx: EngineContext,
  kctx: KindContext,
  items: Checked[],
  later: Map<string, string>,
  signal?: AbortSignal,
): Promise<Outcome[]> {
  const { store } = ctx;
  const holdAs = (item: Checked) => ({
    key: item.base.key,
    id: item.resource.id,
    type: item.resource.type,
    position: item.position,
    digest: item.digest,
    spec: item.resource,
    // Created by the host: held as such, made just now, or made by a create whose
    // record a crash cut short (its intent is still there).
    created: item.held?.created || !item.found.exists ||
      (item.held === undefined && store.hasIntent(item.base.key)),
  });
  const changing = items.filter((item) => item.found.changes.length > 0);
  // The changes run in waves of WAVE (a file's write holds its temporary file open until
  // its rename), each wave's commits in declared order; after a wave in which one failed
  // nothing more is attempted (and no intent is left for what was not). The directories
  // are synced once, after every wave.
  const applied: PromiseSettledResult<void>[] = [];
  for (let start = 0; start < changing.length; start += WAVE) {
    const wave = changing.slice(start, start + WAVE);
    const creating = wave.filter((item) => !item.found.exists);
    if (creating.length > 0) {
      store.batch(() =>
        creating.forEach((item) => store.recordIntent(item.base.key, item.resource))
      );
    }
    const turns = commitTurns(wave.length, signal);
    applied.push(
      ...await Promise.allSettled(wave.map(async (item, i) => {
        const kind = kindOf(item.resource);
        const own: KindContext = turns.length > 1 ? { ...kctx, beforeCommit: turns[i].wait } : kctx;
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
          turns[i]?.done(ok);
        }
      })),
    );
    if (applied.some((settled) => settled.status === "rejected")) break;
  }
  // Renames and creations of a batch become durable before any of it is recorded.
  let synced: unknown;
  if (changing.some((item) => kindOf(item.resource).concurrentApply)) {
    const failure = await syncDirectories(ctx, kctx);
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
      const { held, position } = item;
      const unchanged = held !== undefined && held.digest === item.digest &&
        held.id === item.resource.id;
      outcomes.push({
        result: { outcome: "unchanged", changes: [] },
        save: unchanged
          ? (applyId, seq, result) =>
            store.recordUnchanged(
              applyId,
              seq,
              result,
              held.position === position ? undefined : position,
              identityUpdate(held.identity, item.found.identity),
            )
          : (applyId, seq, result) =>
            store.recordHeld(applyId, seq, holdAs(item), result, item.found.identity),
      });
      continue;
    }
    const settled = applied[change++];
    if (settled.status === "rejected") {
      outcomes.push({ error: settled.reason });
      break;
    }
    if (synced !== undefined) {
      outcomes.push({ error: synced });
      break;
    }
    let after: Diff<Change>;
    try {
      after = await kindOf(item.resource).check(kctx, item.resource);
    } catch (error) {
      outcomes.push({ error });
      break;
    }
    if (after.changes.length > 0) {
      outcomes.push({
        error: new ResourceError(
          "resource.read-back",
          `read-back after applying still differs: ${describe(after).join(", ")}`,
          { hint: "something on the machine undid or refused the change; see the service's log" },
        ),
      });
      break;
    }
    const entry = holdAs(item);
    const why = later.get(item.resource.id);
    outcomes.push({
      result: {
        outcome: "changed",
        changes: describe(item.found),
        ...(why === undefined ? {} : { detail: why }),
      },
      save: (applyId, seq, result) => store.recordHeld(applyId, seq, entry, result, after.identity),
    });
  }
  return outcomes;
}

/**
 * The commit order of `count` concurrent applies: turn i waits until every apply
 * has reached its commit (or ended), then for apply i - 1 to end; it throws when
 * an earlier apply failed, so nothing after a failure is committed.
 */
function commitTurns(
  count: number,
  signal?: AbortSignal,
): { wait: () => Promise<void>; done: (ok: boolean) => void }[] {
  if (count <= 1) return [];
  let arrived = 0;
  let failedAt = Infinity;
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

export function failed(
  base: Pick<ResourceResult, "id" | "type" | "key">,
  cause: unknown,
): ResourceResult {
  return { ...base, outcome: "failed", changes: [], detail: describeError(cause) };
}

function skipped(resource: Resource, detail: string): ResourceResult {
  return {
    id: resource.id,
    type: resource.type,
    key: resourceKey(resource),
    outcome: "skipped",
    changes: [],
    detail,
  };
}

/**
 * What the kinds get for one apply or plan pass: providers, roots, notes kept in the
 * store, `changedIds`, which the pass fills as it goes, and (for an apply) where
 * content declared by reference comes from.
 */
export function kindContext(
  ctx: EngineContext,
  changedIds: Set<string>,
  options?: ApplyOptions,
): KindContext {
  const kctx = newKindContext(ctx.providers, ctx.config.managedRoots, ctx.rolledBackFrom, {
    notes: storeNotes(ctx),
    stateDir: ctx.stateDir,
    changedIds,
  });
  if (ctx.stateDir !== undefined && options !== undefined) {
    kctx.content = contentResolver(new ContentCache(ctx.stateDir), contentSources(options));
  }
  return kctx;
}

/**
 * Where content declared by reference comes from: for a declaration read from a file
 * (the bundle included), the blobs/ directory beside it; then the caller's sources
 * (the run loop's link: the mesh's object store).
 */
function contentSources(options: ApplyOptions): ContentSource[] {
  const sources = [...options.contentSources ?? []];
  if (FROM_DISK.has(options.source) && options.origin !== "stdin") {
    const dir = posix.join(posix.dirname(options.origin), "blobs");
    sources.unshift(blobDirectory(dir, `blobs/ beside ${options.origin}`));
  }
  return sources;
}

/** Drop cached content that nothing held names any more (after an apply that converged). */
async function pruneContent(ctx: EngineContext): Promise<void> {
  if (ctx.stateDir === undefined) return;
  const cache = new ContentCache(ctx.stateDir);
  if ((await cache.digests()).length === 0) return;
  // What a confirm window may go back to stays too: going back never needs the link.
  const keep = new Set<string>(restoreContent(ctx.store));
  for (const held of ctx.store.held()) {
    for (const sha256 of referencesOf(held.spec)) keep.add(sha256);
  }
  await cache.prune(keep);
}

/** Kinds' notes, kept in the store's meta table under "note:". */
function storeNotes({ store }: EngineContext): KindNotes {
  return {
    get: (key) => store.meta(`note:${key}`),
    set: (key, value) => store.setMeta(`note:${key}`, value),
  };
}

/** Whether the adapter a resource's kind needs is among `providers`. */
function providerFor(providers: Providers, type: string): boolean {
  const needs = KINDS.get(type)?.needs;
  return needs === undefined || providers[needs] !== undefined;
}
