/** Plan: what applying a declaration would do, from the checks alone; changes nothing. */
import type { Declaration } from "../declaration/envelope.ts";
import { describeError } from "../errors.ts";
import { describe } from "../resources/kind.ts";
import { kindContext } from "./apply.ts";
import { kindOf, resourceKey } from "../resources/mod.ts";
import { planRelease } from "./release.ts";
import type { EngineContext, PlanEntry } from "./types.ts";

/**
 * Say what applying `declaration` would do, changing nothing (the checks alone).
 */
export async function planDeclaration(
  ctx: EngineContext,
  declaration: Declaration,
): Promise<PlanEntry[]> {
  const changedIds = new Set<string>();
  const kctx = kindContext(ctx, changedIds, declaration);
  const entries: PlanEntry[] = [];
  for (const resource of declaration.resources) {
    const base = { id: resource.id, type: resource.type, key: resourceKey(resource) };
    try {
      const found = await kindOf(resource).check(kctx, resource);
      const status = found.changes.length === 0 ? "in-sync" : found.exists ? "change" : "create";
      // What would change is what later resources' restartOn sees (as in the apply).
      if (status !== "in-sync") changedIds.add(resource.id);
      entries.push({ ...base, status, changes: found.exists ? describe(found) : [] });
    } catch (cause) {
      entries.push({ ...base, status: "unknown", changes: [], detail: describeError(cause) });
    }
  }
  entries.push(...await planRelease(ctx, kctx, declaration));
  return entries;
}
