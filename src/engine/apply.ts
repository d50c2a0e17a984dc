/**
 * Apply (R3): check each resource in declared order, change what differs, read
 * every change back, record only what read back, stop at the first failure,
 * then release what is held and no longer declared (release.ts).
 */
import { canonicalJson, digestOf } from "../declaration/canonical.ts";
import type { Declaration } from "../declaration/envelope.ts";
import {
  describe,
  type KindContext,
  type KindNotes,
  newKindContext,
  ResourceError,
} from "../resources/kind.ts";
import { kindOf, KINDS, type Resource, resourceKey } from "../resources/mod.ts";
import type { Providers } from "../providers.ts";
import { describeError } from "../errors.ts";
import { releaseUndeclared } from "./release.ts";
import type {
  ApplyOptions,
  ApplyReport,
  Counts,
  EngineContext,
  HeldSummary,
  ResourceResult,
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
  const changedIds = new Set<string>();
  const kctx = kindContext(ctx, changedIds);
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
  let packageInstalled = false;
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
      if (packageInstalled && ctx.redetect && !providerFor(kctx.providers, resource.type)) {
        // A package installed in this apply may have brought the adapter (podman, nft …).
        packageInstalled = false;
        ctx.providers = kctx.providers = await ctx.redetect();
      }
      const outcome = await applyOne(ctx, kctx, resource, position, held.get(key), unchangedSince);
      const result: ResourceResult = { ...base, ...outcome.result };
      // Later resources' restartOn is answered from this set (KindContext.changedIds).
      if (result.outcome === "changed") changedIds.add(resource.id);
      if (result.outcome === "changed" && resource.type === "package") packageInstalled = true;
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
      `read-back after applying still differs: ${describe(after).join(", ")}`,
      { hint: "something on the machine undid or refused the change; see the service's log" },
    );
  }
  const entry = holdAs();
  return {
    result: { outcome: "changed", changes: describe(found) },
    save: (applyId, seq, result) => store.recordHeld(applyId, seq, entry, result),
  };
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
 * store, and `changedIds`, which the pass fills as it goes.
 */
export function kindContext(ctx: EngineContext, changedIds: Set<string>): KindContext {
  return newKindContext(ctx.providers, ctx.config.managedRoots, ctx.rolledBackFrom, {
    notes: storeNotes(ctx),
    stateDir: ctx.stateDir,
    changedIds,
  });
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
