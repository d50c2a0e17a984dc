/**
 * Release: what the host manages and the declaration no longer names is removed
 * (what the host created, where the kind allows) or forgotten, last first. The
 * store is checked, not trusted: a managed record that breaks today's rules is
 * never acted on.
 */
import type { Declaration } from "../declaration/envelope.ts";
import { DeclarationRefused } from "../declaration/envelope.ts";
import { describeError } from "../errors.ts";
import type { KindContext, Release } from "../resources/kind.ts";
import { kindOf, PathTree, placeOf, type Resource, resourceKey } from "../resources/mod.ts";
import { failed } from "./recorder.ts";
import { parseTrustedDeclaration } from "./parse.ts";
import type { EngineContext, PlanEntry } from "./types.ts";
import type { ManagedResource, ResourceResult } from "../store/records.ts";

/**
 * Release managed (and half-created) resources that the declaration no longer names, last
 * first; with `only`, just those of the types it accepts.
 *
 * Long because: the release pass in its order (what no longer is declared, last first, then the
 * half-created), with the report of each step beside it.
 */
export async function releaseUndeclared(
  ctx: EngineContext,
  kctx: KindContext,
  declaration: Declaration,
  applyId: number,
  record: (result: ResourceResult, save: (seq: number) => void) => void,
  only: (type: string) => boolean = () => true,
  /**
   * The keys managed when the apply began (the apply read them already; what it recorded
   * since is declared, so the same undeclared ones), else the store's.
   */
  managedBefore?: Iterable<string>,
): Promise<string | undefined> {
  const { store } = ctx;
  const declared = new Set(declaration.resources.map(resourceKey));
  const managedKeys = new Set(managedBefore ?? store.managedIndex().keys());
  const leavingKeys = [...managedKeys].filter((key) => !declared.has(key));
  // Only the specs of what leaves are read (and parsed) from the store.
  const managed = leavingKeys.length ? store.managed((key) => !declared.has(key)) : [];
  // A create that crashed before its record: the host made it, so it may remove it.
  const orphans: ManagedResource[] = store.intents()
    .filter((i) => !declared.has(i.key) && !managedKeys.has(i.key))
    .map((i) => ({ ...orphan(i.key, i.spec), position: Number.MAX_SAFE_INTEGER }));
  const leaving = insideFirst(
    [...managed, ...orphans].filter((item) => only(item.type)).sort((a, b) =>
      b.position - a.position
    ),
  );

  for (const item of leaving) {
    const base = { id: item.id, type: item.type, key: item.key };
    const refusal = await managedRecordProblem(ctx, item);
    if (refusal !== undefined) {
      // Not acted on: the record is dropped (nothing on the machine is touched),
      // and the apply fails saying why, so a person looks at how it got there.
      const result: ResourceResult = { ...base, outcome: "failed", changes: [], detail: refusal };
      record(result, (seq) => store.recordReleased(applyId, seq, result));
      return `releasing ${item.type} "${item.id}" refused: ${refusal}`;
    }
    let release: Release;
    try {
      if (item.created && managedKeys.has(item.key)) store.beginRelease(item);
      release = await kindOf(item).release(kctx, item.spec, {
        created: item.created,
        dryRun: false,
      });
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
 * `items` in the same order, except that nothing is released before what lies inside it
 * (each kind says where its resources lie: `place`, src/resources/kind.ts): a directory
 * waits for every leaving file, directory and mount below it, a mount for everything below
 * its target, the directory at a mount's target for the mount, and what holds a bind's
 * source for the bind. Positions alone do not ensure that: a create or removal cut short
 * by a crash is known only by its intent, which has no position, and resources applied
 * from different declarations have positions from each. Records that name each other in
 * a circle (only a store edited by hand can) come last, in their order.
 */
export function insideFirst<T extends { key: string; spec: { type: string } }>(
  items: readonly T[],
): T[] {
  const places = items.map((item) => placeOf(item.spec));
  const tree = new PathTree<number>();
  places.forEach((place, i) => place && tree.add(place.path, i));
  // For each item, the items that wait for it (lie around it).
  const outer: number[][] = places.map((place, i) => {
    if (place === undefined) return [];
    const found = new Set<number>();
    // What encloses it; and, when it lies over its path, what is at that path (the mount
    // point under a mount).
    tree.along(place.path, (j, where) => {
      if (where === "above" ? places[j]!.encloses : place.over && !places[j]!.over) found.add(j);
    });
    // Whatever is at a path it uses, and what encloses that.
    for (const path of place.uses ?? []) {
      tree.along(path, (j, where) => (where === "at" || places[j]!.encloses) && found.add(j));
    }
    found.delete(i);
    return [...found];
  });
  const waitsFor = new Array<number>(items.length).fill(0);
  for (const list of outer) for (const j of list) waitsFor[j]++;
  const done = new Array<boolean>(items.length).fill(false);
  const deferred = new Set<number>();
  const out: T[] = [];
  // A worklist, not recursion: a deep chain of nested records cannot exhaust the stack.
  const emit = (first: number) => {
    const ready = [first];
    for (let i = ready.pop(); i !== undefined; i = ready.pop()) {
      done[i] = true;
      out.push(items[i]);
      for (const j of outer[i]) {
        if (--waitsFor[j] === 0 && deferred.delete(j)) ready.push(j);
      }
    }
  };
  items.forEach((_, i) => {
    if (waitsFor[i] > 0) deferred.add(i);
    else emit(i);
  });
  items.forEach((item, i) => done[i] || out.push(item));
  return out;
}

/** What releasing the managed resources `declaration` no longer names would do (changing nothing). */
export async function planRelease(
  ctx: EngineContext,
  kctx: KindContext,
  declaration: Declaration,
): Promise<PlanEntry[]> {
  const entries: PlanEntry[] = [];
  const declared = new Set(declaration.resources.map(resourceKey));
  const leaving = insideFirst(ctx.store.managed((key) => !declared.has(key)).reverse());
  for (const item of leaving) {
    const base = { id: item.id, type: item.type, key: item.key };
    const refusal = await managedRecordProblem(ctx, item);
    if (refusal !== undefined) {
      entries.push({ ...base, status: "unknown", changes: [], detail: refusal });
      continue;
    }
    try {
      const release = await kindOf(item).release(kctx, item.spec, {
        created: item.created,
        dryRun: true,
      });
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

/**
 * Why a record read from the store (managed, or a half-done create) must not be
 * acted on, or `undefined` when it may be. The store is checked, not trusted: a
 * record is held to the rules a declaration is parsed by today (schema, managed
 * roots, the host's own paths), and its key must be the one its spec manages.
 */
async function managedRecordProblem(
  ctx: EngineContext,
  item: Pick<ManagedResource, "key" | "type" | "spec">,
): Promise<string | undefined> {
  const what = `the store's record ${item.key}`;
  const hint = "nothing was touched and the record was dropped; if the store was edited by " +
    "hand or by someone else, find out how (state.db is the host's alone)";
  let key: string | undefined;
  try {
    key = resourceKey(item.spec);
  } catch { /* not a resource at all: the parse below says why */ }
  if (key !== undefined && (key !== item.key || item.spec.type !== item.type)) {
    return `${what} describes ${item.spec.type} ${key}, not ${item.type} ${item.key}; ${hint}`;
  }
  try {
    // The trusted parse only so that an action's record is judged by the same
    // rules as the rest; releasing an action runs nothing.
    // A record is judged alone: the ids its restartOn names are other records' business.
    const { restartOn: _names, ...alone } = item.spec as Resource & { restartOn?: unknown };
    await parseTrustedDeclaration(JSON.stringify({ version: 1, resources: [alone] }), {
      managedRoots: ctx.config.managedRoots,
      own: ctx.config.own ?? { paths: [], services: [] },
      limits: {
        maxFileBytes: Number.MAX_SAFE_INTEGER,
        maxReferencedBytes: Number.MAX_SAFE_INTEGER,
      },
      origin: what,
    });
  } catch (error) {
    if (!(error instanceof DeclarationRefused)) {
      return `${what} cannot be read: ${describeError(error)}; ${hint}`;
    }
    const why = error.problems.map((p) => p.message).join("; ");
    return `${what} is not one the host may act on: ${why}; ${hint}`;
  }
  return undefined;
}

function orphan(key: string, spec: Resource): Omit<ManagedResource, "position"> {
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
