/**
 * The apply engine (R3): plan first, apply in declared order, stop at the first
 * failure, read every change back, record only what read back, then release
 * what is held and no longer declared, in reverse order.
 */
import { canonicalJson, digestOf } from "./declaration/canonical.ts";
import { type Declaration, resourceKey } from "./declaration/parse.ts";
import type { Resource } from "./declaration/schema.ts";
import { describeError } from "./errors.ts";
import type { Providers } from "./ports.ts";
import {
  type KindContext,
  type KindNotes,
  newKindContext,
  type Release,
  ResourceError,
} from "./resources/kind.ts";
import { kindOf } from "./resources/mod.ts";
import type {
  Counts,
  HeldResource,
  HeldSummary,
  ResourceResult,
  Source,
  Store,
} from "./store/store.ts";

/** What the engine works with. */
export interface EngineContext {
  store: Store;
  providers: Providers;
  config: { managedRoots: readonly string[] };
  /** Host versions the launcher rolled back from here (see src/launcher_files.ts). */
  rolledBackFrom?: ReadonlySet<string>;
  /** The state directory (the overlay's key), when known. */
  stateDir?: string;
}

/** Kinds' notes, kept in the store's meta table under "note:". */
function storeNotes(store: Store): KindNotes {
  return {
    get: (key) => store.meta(`note:${key}`),
    set: (key, value) => store.setMeta(`note:${key}`, value),
  };
}

function kindContext(ctx: EngineContext): KindContext {
  return newKindContext(ctx.providers, ctx.config.managedRoots, ctx.rolledBackFrom, {
    notes: storeNotes(ctx.store),
    stateDir: ctx.stateDir,
  });
}

/** How to run one apply. */
export interface ApplyOptions {
  source: Source;
  /** A file name, "link", or the bundle's path: shown in history and reports. */
  origin: string;
  /** Called as each resource finishes, for progress lines. */
  onResult?: (result: ResourceResult) => void;
  /** When aborted, the apply stops before its next step and reports "interrupted". */
  signal?: AbortSignal;
}

/** The outcome of one apply. */
export interface ApplyReport {
  applyId: number;
  outcome: "converged" | "failed" | "interrupted";
  source: Source;
  origin: string;
  serial?: number;
  digest: string;
  startedAt: string;
  durationMs: number;
  counts: Counts;
  results: ResourceResult[];
  /** The failing resource and its reason, when the apply failed. */
  error?: string;
}

/** What a plan says about one resource. */
export interface PlanEntry {
  id: string;
  type: Resource["type"];
  key: string;
  status: "in-sync" | "create" | "change" | "remove" | "forget" | "unknown";
  changes: string[];
  detail?: string;
}

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
  // The same declaration as the last apply, which converged: every held resource
  // was recorded from it, so its digest is known without hashing it again.
  const last = store.lastApply();
  const unchangedSince = last?.outcome === "converged" && last.digest === digest;
  const applyId = store.beginApply(options.source, options.origin, declaration.serial, digest);
  const kctx = kindContext(ctx);
  const held = store.heldIndex();
  const results: ResourceResult[] = [];
  const counts: Counts = { changed: 0, unchanged: 0, removed: 0, failed: 0 };
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
    else if (result.outcome === "removed" || result.outcome === "forgotten") counts.removed++;
    else if (result.outcome === "failed") counts.failed++;
    options.onResult?.(result);
  };
  const skipRest = (from: number) => {
    for (const resource of declaration.resources.slice(from)) {
      const result = skipped(
        resource,
        interrupted ? "not attempted: interrupted" : "not attempted: an earlier step failed",
      );
      record(result, (seq) => store.recordResult(applyId, seq, result));
    }
  };

  const resources = declaration.resources;
  for (let position = 0; position < resources.length; position++) {
    const resource = resources[position];
    if (options.signal?.aborted) {
      interrupted = true;
      skipRest(position);
      break;
    }
    const key = resourceKey(resource);
    const base = { id: resource.id, type: resource.type, key };
    try {
      const outcome = await applyOne(ctx, kctx, resource, position, held.get(key), unchangedSince);
      const result: ResourceResult = { ...base, ...outcome.result };
      record(result, (seq) => outcome.save(applyId, seq, result));
    } catch (cause) {
      error = `${resource.type} "${resource.id}" failed: ${describeError(cause)}`;
      const result = failed(base, cause);
      record(result, (seq) => store.recordResult(applyId, seq, result));
      skipRest(position + 1);
      break;
    }
  }

  if (error === undefined && !interrupted) {
    error = await releaseUndeclared(ctx, kctx, declaration, applyId, record);
  }
  // Renames and creations become durable here, once per directory rather than once per file.
  for (const dir of kctx.touchedDirectories) {
    try {
      await ctx.providers.fs.syncDirectory(dir);
    } catch (cause) {
      if (cause instanceof Deno.errors.NotFound) continue; // removed later in this apply
      error ??= `syncing ${dir} to disk failed: ${describeError(cause)}`;
    }
  }

  flush();
  const outcome = interrupted ? "interrupted" : error === undefined ? "converged" : "failed";
  if (interrupted) error = "interrupted before the apply finished";
  store.finishApply(applyId, outcome, counts, error);
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
  };
}

/** Check one resource, change it when needed, read it back, and say how to record it. */
async function applyOne(
  ctx: EngineContext,
  kctx: KindContext,
  resource: Resource,
  position: number,
  held: HeldSummary | undefined,
  unchangedSince: boolean,
): Promise<{
  result: Pick<ResourceResult, "outcome" | "changes">;
  save: (applyId: number, seq: number, result: ResourceResult) => void;
}> {
  const { store } = ctx;
  const kind = kindOf(resource);
  const key = resourceKey(resource);
  const digest = held?.digest !== undefined && unchangedSince
    ? held.digest
    : await digestOf(resource);
  const found = await kind.check(kctx, resource);
  const holdAs = () => ({
    key,
    id: resource.id,
    type: resource.type,
    position,
    digest,
    spec: resource,
    // Created by the host: held as such, made just now, or made by a create whose
    // record a crash cut short (its intent is still there).
    created: held?.created || !found.exists || (held === undefined && store.hasIntent(key)),
  });

  if (found.changes.length === 0) {
    const unchanged = held !== undefined && held.digest === digest && held.id === resource.id;
    return {
      result: { outcome: "unchanged", changes: [] },
      save: unchanged
        ? (applyId, seq, result) =>
          store.recordUnchanged(
            applyId,
            seq,
            result,
            held.position === position ? undefined : position,
          )
        : (applyId, seq, result) => store.recordHeld(applyId, seq, holdAs(), result),
    };
  }

  if (!found.exists) store.recordIntent(key, resource);
  try {
    await kind.apply(kctx, resource, found);
  } catch (error) {
    // Nothing was created: the intent must not later make a person's file look like ours.
    if (!found.exists && !(await kind.check(kctx, resource).then((c) => c.exists, () => true))) {
      store.dropIntent(key);
    }
    throw error;
  }
  const after = await kind.check(kctx, resource);
  if (after.changes.length > 0) {
    throw new ResourceError(
      "resource.read-back",
      `read-back after applying still differs: ${after.changes.join(", ")}`,
      { hint: "something on the machine undid or refused the change; see the service's log" },
    );
  }
  const entry = holdAs();
  return {
    result: { outcome: "changed", changes: found.changes },
    save: (applyId, seq, result) => store.recordHeld(applyId, seq, entry, result),
  };
}

/** Release held (and half-created) resources that the declaration no longer names, last first. */
async function releaseUndeclared(
  ctx: EngineContext,
  kctx: KindContext,
  declaration: Declaration,
  applyId: number,
  record: (result: ResourceResult, save: (seq: number) => void) => void,
): Promise<string | undefined> {
  const { store } = ctx;
  const declared = new Set(declaration.resources.map(resourceKey));
  const heldKeys = new Set(store.heldIndex().keys());
  const leavingKeys = [...heldKeys].filter((key) => !declared.has(key));
  // Only the specs of what leaves are read (and parsed) from the store.
  const held = leavingKeys.length ? store.held((key) => !declared.has(key)) : [];
  // A create that crashed before its record: the host made it, so it may remove it.
  const orphans: HeldResource[] = store.intents()
    .filter((i) => !declared.has(i.key) && !heldKeys.has(i.key))
    .map((i) => ({ ...orphan(i.key, i.spec), position: Number.MAX_SAFE_INTEGER }));
  const leaving = [...held, ...orphans]
    .sort((a, b) => b.position - a.position);

  for (const item of leaving) {
    const base = { id: item.id, type: item.type, key: item.key };
    let release: Release;
    try {
      if (item.created && heldKeys.has(item.key)) store.beginRelease(item);
      release = await kindOf(item).release(kctx, item, false);
    } catch (cause) {
      const result = failed(base, cause);
      record(result, (seq) => store.recordResult(applyId, seq, result));
      return `releasing ${item.type} "${item.id}" failed: ${describeError(cause)}`;
    }
    const result: ResourceResult = {
      ...base,
      outcome: release.outcome,
      changes: [],
      ...(release.detail ? { detail: release.detail } : {}),
    };
    record(result, (seq) => store.recordReleased(applyId, seq, result));
  }
  return undefined;
}

/**
 * Say what applying `declaration` would do, changing nothing (the checks alone).
 */
export async function planDeclaration(
  ctx: EngineContext,
  declaration: Declaration,
): Promise<PlanEntry[]> {
  const kctx = kindContext(ctx);
  const entries: PlanEntry[] = [];
  for (const resource of declaration.resources) {
    const base = { id: resource.id, type: resource.type, key: resourceKey(resource) };
    try {
      const found = await kindOf(resource).check(kctx, resource);
      const status = found.changes.length === 0 ? "in-sync" : found.exists ? "change" : "create";
      entries.push({ ...base, status, changes: found.exists ? found.changes : [] });
    } catch (cause) {
      entries.push({ ...base, status: "unknown", changes: [], detail: describeError(cause) });
    }
  }
  const declared = new Set(declaration.resources.map(resourceKey));
  const leaving = ctx.store.held((key) => !declared.has(key)).reverse();
  for (const item of leaving) {
    const base = { id: item.id, type: item.type, key: item.key };
    try {
      const release = await kindOf(item).release(kctx, item, true);
      entries.push({
        ...base,
        status: release.outcome === "removed" ? "remove" : "forget",
        changes: [],
        ...(release.detail ? { detail: release.detail } : {}),
      });
    } catch (cause) {
      entries.push({ ...base, status: "unknown", changes: [], detail: describeError(cause) });
    }
  }
  return entries;
}

function failed(base: Pick<ResourceResult, "id" | "type" | "key">, cause: unknown): ResourceResult {
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

function orphan(key: string, spec: Resource): Omit<HeldResource, "position"> {
  return {
    key,
    id: spec.id,
    type: spec.type,
    digest: "", // not needed to release it
    spec,
    created: true,
    appliedAt: "",
    applyId: 0,
  };
}
