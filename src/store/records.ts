/**
 * What the store records of the engine's work: where a declaration came from, what happened
 * to each resource in an apply, and the resources the host manages. They are the store's
 * rows as values; the engine makes them, and the CLI, the run loop and the link report
 * them (their other words, an apply's report and options, are src/engine/types.ts). Here,
 * below the engine, so that the store never imports it.
 */
import type { FileIdentity } from "../providers.ts";
import type { Resource } from "../resources/mod.ts";

/** Where a declaration came from. */
export type Source = "link" | "file" | "bundle";

/** What happened to one resource in one apply. */
export type ResultOutcome =
  | "changed"
  | "unchanged"
  | "removed"
  | "forgotten"
  | "failed"
  | "skipped";

/** How an apply ended ("running" while it runs, or when its process died). */
export type ApplyOutcome = "running" | "converged" | "failed" | "interrupted";

/** One thing the host manages, recorded after its read-back passed. */
export interface ManagedResource {
  key: string;
  id: string;
  type: Resource["type"];
  position: number;
  digest: string;
  spec: Resource;
  /** True when the host created the thing, so it may remove it later. */
  created: boolean;
  appliedAt: string;
  applyId: number;
}

/** The part of a managed resource an apply compares against. */
export interface ManagedSummary {
  id: string;
  digest: string;
  created: boolean;
  position: number;
  /** What the file was last read back in sync as (FileIdentity), when known. */
  identity?: FileIdentity;
}

/** The outcome of one resource in one apply. */
export interface ResourceResult {
  id: string;
  type: Resource["type"];
  key: string;
  outcome: ResultOutcome;
  /** What changed (or would change), e.g. "content", "mode 0644 → 0600". */
  changes: string[];
  /** Why it failed, or a note such as "not empty, kept". */
  detail?: string;
}

/**
 * Counts of an apply's results. `removed` counts what the host took off the machine;
 * `forgotten` what it stopped holding and left as it is (a package, a service, an
 * action, a file it did not create): nothing of those was removed.
 */
export interface Counts {
  changed: number;
  unchanged: number;
  removed: number;
  forgotten: number;
  failed: number;
}
