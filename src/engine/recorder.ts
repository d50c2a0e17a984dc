/**
 * The results of one apply, as it goes: each in the report, the counts and the store. A
 * result that changes nothing on the machine is written later, together with the others
 * (one transaction, before the next change or at the end); a change is recorded at once.
 */
import { describeError } from "../errors.ts";
import { type Resource, resourceKey } from "../resources/mod.ts";
import type { Store } from "../store/store.ts";
import type { Counts, ResourceResult } from "../store/records.ts";

/** How a result is kept in the store, given its place in the apply. */
export type Save = (seq: number) => void;

/** One apply's results, counts, and how it stands (its first failure, an interruption). */
export class Recorder {
  readonly results: ResourceResult[] = [];
  readonly counts: Counts = { changed: 0, unchanged: 0, removed: 0, forgotten: 0, failed: 0 };
  /** The first failure, as a sentence (then nothing more is attempted). */
  error: string | undefined;
  /** The apply was aborted: nothing more is attempted, and it ends "interrupted". */
  interrupted = false;
  readonly #deferred: (() => void)[] = [];

  constructor(
    private readonly store: Store,
    private readonly applyId: number,
    private readonly onResult?: (result: ResourceResult) => void,
  ) {}

  /** Record `result` (kept by `save`): deferred when unchanged, else at once. */
  record = (result: ResourceResult, save: Save): void => {
    const seq = this.results.length;
    if (result.outcome === "unchanged") this.#deferred.push(() => save(seq));
    else {
      this.flush();
      save(seq);
    }
    this.results.push(result);
    if (result.outcome !== "skipped") this.counts[result.outcome]++;
    this.onResult?.(result);
  };

  /** Record a result the store keeps as it is (a failure, a step not attempted). */
  plain(result: ResourceResult): void {
    this.record(result, (seq) => this.store.recordResult(this.applyId, seq, result));
  }

  /** Record `resource` failed for `cause`: the apply's error. */
  fail(base: Pick<ResourceResult, "id" | "type" | "key">, cause: unknown): void {
    this.error = `${base.type} "${base.id}" failed: ${describeError(cause)}`;
    this.plain(failed(base, cause));
  }

  /** Record `resources` as not attempted, saying why (by default, how the apply stands). */
  skip(resources: readonly Resource[], detail?: string): void {
    for (const resource of resources) {
      const why = detail ??
        (this.interrupted ? "not attempted: interrupted" : "not attempted: an earlier step failed");
      this.plain(skipped(resource, why));
    }
  }

  /** Write the deferred results, in one transaction. */
  flush(): void {
    if (this.#deferred.length) this.store.batch(() => this.#deferred.splice(0).forEach((s) => s()));
  }
}

/** A resource that failed, and why. */
export function failed(
  base: Pick<ResourceResult, "id" | "type" | "key">,
  cause: unknown,
): ResourceResult {
  return { ...base, outcome: "failed", changes: [], detail: describeError(cause) };
}

/** A resource not attempted, and why. */
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
