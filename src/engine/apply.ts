/**
 * Apply (R3): check each resource in declared order, change what differs, read
 * every change back, record only what read back, stop at the first failure,
 * then release what is managed and no longer declared (release.ts).
 *
 * The parts, each read on its own: `beginPass` (what an apply knows before its first
 * step), `applyInOrder` (the steps), the commit window (commit_window.ts: changing,
 * syncing, reading back, recording), the recorder (recorder.ts: results, counts, how
 * the apply stands), `finishPass` (release, sync, the apply's record and report).
 */
import { digestOf } from "../declaration/canonical.ts";
import type { Declaration } from "../declaration/envelope.ts";
import { type KindContext, type KindNotes, newKindContext, permitSets } from "../resources/kind.ts";
import {
  kindOf,
  KINDS,
  mayCutLink,
  referencesOf,
  type Resource,
  resourceKey,
} from "../resources/mod.ts";
import type { FileIdentity, Providers } from "../providers.ts";
import { META } from "../store/meta.ts";
import { canonicalBody } from "./parse.ts";
import { releaseUndeclared } from "./release.ts";
import { answerRescue, pendingRescue, type Rescue } from "./hold.ts";
import { restoreResources } from "../store/confirm_records.ts";
import { posix } from "../posix_path.ts";
import {
  blobDirectory,
  ContentCache,
  contentResolver,
  type ContentSource,
} from "../store/content.ts";
import {
  type ApplyParts,
  changeTogether,
  type Checked,
  CommitWindow,
  recordChanged,
  syncDirectories,
} from "./commit_window.ts";
import { Recorder } from "./recorder.ts";
import { type ApplyOptions, type ApplyReport, type EngineContext, FROM_DISK } from "./types.ts";
import type { ManagedSummary } from "../store/records.ts";

/** One apply as it goes: what it knew when it began, and what it has done so far. */
interface Pass extends ApplyParts {
  declaration: Declaration;
  options: ApplyOptions;
  started: number;
  startedAt: string;
  /** The same declaration as the last apply, which converged (digests are reused). */
  unchangedSince: boolean;
  /** A rescue this apply answers, whatever it finds. */
  rescue: Rescue | null;
  /** What was managed when the apply began, by key. */
  managed: Map<string, ManagedSummary>;
  /** Identities the checks may trust (KindContext.knownIdentity), while one is checked. */
  known: Map<object, FileIdentity>;
  /** The last apply did not converge: each kind tidies before its check (kind.ts `tidy`). */
  tidy: boolean;
  /** This apply's number among read-back passes, and whether it reads every file back. */
  passes: number;
  fullReadBack: boolean;
  /** A change made in this apply may have brought adapters (kind.ts `bringsProviders`). */
  providersMayHaveChanged: boolean;
}

/**
 * Make the machine match `declaration`, recording every step in the store.
 * The caller holds the apply lock (engine/mod.ts `apply`, the one public apply).
 */
export async function applyDeclaration(
  ctx: EngineContext,
  declaration: Declaration,
  options: ApplyOptions,
): Promise<ApplyReport> {
  const pass = beginPass(ctx, declaration, options);
  const resources = declaration.resources;
  // The order of the steps: as declared, or (going back after a confirm window) what can
  // cut the node off first. A resource keeps its declared position either way.
  const order = resources.map((_, position) => position);
  if (options.networkFirst) {
    const late = (position: number) => mayCutLink(resources[position].type) ? 0 : 1;
    order.sort((a, b) => late(a) - late(b) || a - b);
    const { kctx, applyId, recorder } = pass;
    recorder.error = await releaseUndeclared(
      ctx,
      kctx,
      declaration,
      applyId,
      recorder.record,
      mayCutLink,
    );
    if (recorder.error !== undefined) recorder.skip(order.map((position) => resources[position]));
  }
  await applyInOrder(pass, order);
  return await finishPass(pass);
}

/** What an apply knows before its first step; the apply is begun in the store. */
function beginPass(ctx: EngineContext, declaration: Declaration, options: ApplyOptions): Pass {
  const { store } = ctx;
  const started = performance.now();
  const startedAt = new Date().toISOString();
  const { digest } = declaration;
  makeCurrent(store, declaration, options);
  // The same declaration as the last apply, which converged: every managed resource
  // was recorded from it, so its digest is known without hashing it again.
  const last = store.lastApply();
  // A rescue forgot what was managed; this apply answers it, whatever it finds.
  const rescue = pendingRescue(store);
  const unchangedSince = last?.outcome === "converged" && last.digest === digest;
  const applyId = store.beginApply(options.source, options.origin, declaration.serial, digest);
  const changedIds = new Set<string>();
  const kctx = kindContext(ctx, changedIds, declaration, options);
  const tidy = last !== null && last.outcome !== "converged";
  const managed = store.managedIndex();
  // A file still as the last read back found it is not read again (its identity, kept
  // with it), except in every Nth apply (host.json fullReadBackEvery), which reads every
  // file back in full; a file changed by an apply is read back then and there.
  const passes = Number(store.meta(META.readBackPasses) ?? "0") + 1;
  const fullReadBack = !(passes < (ctx.config.fullReadBackEvery ?? FULL_READ_BACK_EVERY));
  const known = new Map<object, FileIdentity>();
  if (!fullReadBack) kctx.knownIdentity = (resource) => known.get(resource);
  const recorder = new Recorder(store, applyId, options.onResult);
  return {
    ctx,
    kctx,
    applyId,
    recorder,
    changedIds,
    later: new Map(),
    declaration,
    options,
    started,
    startedAt,
    unchangedSince,
    rescue,
    managed,
    known,
    tidy,
    passes,
    fullReadBack,
    providersMayHaveChanged: false,
  };
}

/**
 * The steps, in `order`, up to the first failure or the abort: a resource of a kind that
 * applies together joins the commit window; any other first flushes the window, then is
 * checked, changed, read back and recorded alone. What is not attempted is recorded so.
 */
async function applyInOrder(pass: Pass, order: readonly number[]): Promise<void> {
  const { recorder } = pass;
  const resources = pass.declaration.resources;
  const window = new CommitWindow(pass, pass.options.signal);
  const skipFrom = (step: number) => recorder.skip(order.slice(step).map((p) => resources[p]));
  for (let step = 0; recorder.error === undefined && step < order.length; step++) {
    const position = order[step];
    const resource = resources[position];
    if (pass.options.signal?.aborted) {
      if (await window.flush()) recorder.interrupted = true;
      return skipFrom(step);
    }
    const base = { id: resource.id, type: resource.type, key: resourceKey(resource) };
    try {
      if (kindOf(resource).concurrentApply) {
        const full = window.add(await checkOne(pass, resource, position, base));
        if (full && !await window.flush()) return skipFrom(step + 1);
        continue;
      }
      if (!await window.flush()) return skipFrom(step);
      await applyAlone(pass, resource, position, base);
    } catch (cause) {
      if (!await window.flush()) return skipFrom(step);
      recorder.fail(base, cause);
      return skipFrom(step + 1);
    }
  }
  if (recorder.error === undefined && !recorder.interrupted) await window.flush();
}

/** Check, change, read back and record one resource (first detecting adapters again if due). */
async function applyAlone(
  pass: Pass,
  resource: Resource,
  position: number,
  base: Checked["base"],
): Promise<void> {
  const { ctx, kctx } = pass;
  if (pass.providersMayHaveChanged && ctx.redetect && !providerFor(kctx.providers, resource.type)) {
    pass.providersMayHaveChanged = false;
    ctx.providers = kctx.providers = await ctx.redetect();
  }
  const checked = await checkOne(pass, resource, position, base);
  const [outcome] = await changeTogether(pass, [checked]);
  if ("error" in outcome) throw outcome.error;
  const result = recordChanged(pass, checked, outcome);
  if (result.outcome === "changed" && kindOf(resource).bringsProviders) {
    pass.providersMayHaveChanged = true;
  }
}

/**
 * After the steps: release what is no longer declared, make renames and creations durable
 * (once per directory rather than once per file), then finish the apply's record.
 */
async function finishPass(pass: Pass): Promise<ApplyReport> {
  const { ctx, kctx, recorder, options } = pass;
  if (recorder.error === undefined && !recorder.interrupted) {
    // What was managed when the apply began: what it recorded since is declared, and the
    // release looks only at what is not.
    // (After a release of the network first, the store's: that release removed some.)
    recorder.error = await releaseUndeclared(
      ctx,
      kctx,
      pass.declaration,
      pass.applyId,
      recorder.record,
      undefined,
      options.networkFirst ? undefined : pass.managed.keys(),
    );
  }
  const unsynced = await syncDirectories(ctx, kctx);
  recorder.error ??= unsynced;
  recorder.flush();
  const { counts } = recorder;
  const outcome = recorder.interrupted
    ? "interrupted"
    : recorder.error === undefined
    ? "converged"
    : "failed";
  // What is managed changes only with another declaration or a change on the machine.
  if (outcome === "converged" && (!pass.unchangedSince || counts.changed + counts.removed > 0)) {
    await pruneContent(ctx);
  }
  if (recorder.interrupted) recorder.error = "interrupted before the apply finished";
  // A full read-back counts once it ran to its end; until then the next apply is one too.
  const passes = pass.fullReadBack && outcome === "converged" ? 0 : pass.passes;
  ctx.store.setMeta(META.readBackPasses, String(passes));
  ctx.store.finishApply(pass.applyId, outcome, counts, recorder.error);
  const rescue = outcome === "interrupted" ? null : pass.rescue;
  if (rescue) answerRescue(ctx.store, rescue);
  return reportOf(pass, outcome, rescue);
}

/** The report of a finished apply. */
function reportOf(
  pass: Pass,
  outcome: ApplyReport["outcome"],
  rescue: Rescue | null,
): ApplyReport {
  const { declaration, options, recorder } = pass;
  return {
    applyId: pass.applyId,
    outcome,
    source: options.source,
    origin: options.origin,
    ...(declaration.serial === undefined ? {} : { serial: declaration.serial }),
    digest: declaration.digest,
    startedAt: pass.startedAt,
    durationMs: Math.round(performance.now() - pass.started),
    counts: recorder.counts,
    results: recorder.results,
    ...(recorder.error === undefined ? {} : { error: recorder.error }),
    ...(rescue ? { rescue } : {}),
    ...restartOf(pass.later),
  };
}

/**
 * Make `declaration` the store's current one (the one the host holds the machine to),
 * unless it already is: before an apply, or, while the host is held, instead of one.
 */
export function makeCurrent(
  store: EngineContext["store"],
  declaration: Declaration,
  options: Pick<ApplyOptions, "source" | "origin">,
): void {
  const { digest } = declaration;
  const current = store.currentHead();
  if (
    current?.digest !== digest || current.source !== options.source ||
    current.origin !== options.origin || current.serial !== declaration.serial
  ) {
    store.makeCurrent({
      source: options.source,
      origin: options.origin,
      node: declaration.node,
      serial: declaration.serial,
      digest,
      body: canonicalBody(declaration),
    });
  }
}

/** What of this apply takes effect only when the host is next started, as one sentence. */
function restartOf(later: ReadonlyMap<string, string>): { restart?: string } {
  const why = [...later.entries()].map(([id, text]) => `"${id}": ${text}`);
  return why.length === 0 ? {} : { restart: why.join("; ") };
}

/** By default every 6th apply reads every file back in full (host.json fullReadBackEvery). */
export const FULL_READ_BACK_EVERY = 6;

/**
 * Check one resource against the machine (its digest reused when nothing changed since).
 * The identity kept with it is offered to the check (through `known`, which
 * KindContext.knownIdentity reads) only when it was recorded for this very resource.
 */
async function checkOne(
  pass: Pass,
  resource: Resource,
  position: number,
  base: Checked["base"],
): Promise<Checked> {
  const { kctx, known } = pass;
  const managed = pass.managed.get(base.key);
  const kind = kindOf(resource);
  if (pass.tidy) await kind.tidy?.(kctx, resource);
  const digest = managed?.digest !== undefined && pass.unchangedSince
    ? managed.digest
    : await digestOf(resource);
  if (managed?.identity !== undefined && managed.digest === digest) {
    known.set(resource, managed.identity);
  }
  try {
    const found = await kind.check(kctx, resource);
    return { resource, position, base, managed, digest, found };
  } finally {
    known.delete(resource);
  }
}

/**
 * What the kinds get for one apply or plan pass: providers, roots, notes kept in the
 * store, `changedIds`, which the pass fills as it goes, and (for an apply) where
 * content declared by reference comes from.
 */
export function kindContext(
  ctx: EngineContext,
  changedIds: Set<string>,
  declaration: Pick<Declaration, "trusted">,
  options?: ApplyOptions,
): KindContext {
  const kctx = newKindContext(ctx.providers, ctx.config.managedRoots, ctx.rolledBackFrom, {
    notes: storeNotes(ctx),
    stateDir: ctx.stateDir,
    changedIds,
    policy: { trusted: declaration.trusted === true, permit: permitSets(ctx.config.permit) },
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

/** Drop cached content that nothing managed names any more (after an apply that converged). */
async function pruneContent(ctx: EngineContext): Promise<void> {
  if (ctx.stateDir === undefined) return;
  const cache = new ContentCache(ctx.stateDir);
  if ((await cache.digests()).length === 0) return;
  // What a confirm window may go back to stays too: going back never needs the link.
  const keep = new Set<string>(restoreResources(ctx.store).flatMap(referencesOf));
  for (const managed of ctx.store.managed()) {
    for (const sha256 of referencesOf(managed.spec)) keep.add(sha256);
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
