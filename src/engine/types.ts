/**
 * The engine's vocabulary: where a declaration came from, what happened to each
 * resource, what the host holds. The store records these; the CLI, the run loop
 * and the link report them.
 */
import type { ContentSource } from "../store/content.ts";
import type { OwnResources } from "../declaration/envelope.ts";
import type { FileIdentity, Providers } from "../providers.ts";
import type { Resource } from "../resources/mod.ts";
import type { Store } from "../store/store.ts";

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

/** One thing the host holds, recorded after its read-back passed. */
export interface HeldResource {
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

/** The part of a held resource an apply compares against. */
export interface HeldSummary {
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

/** Counts of an apply's results. */
export interface Counts {
  changed: number;
  unchanged: number;
  removed: number;
  failed: number;
}

/** What the engine works with. */
export interface EngineContext {
  store: Store;
  providers: Providers;
  /** The managed roots and the host's own files: a held record outside them is never acted on. */
  config: {
    managedRoots: readonly string[];
    own?: OwnResources;
    /**
     * Every how many applies every file is read back in full (host.json
     * `fullReadBackEvery`, default 6); the others trust a file's identity.
     */
    fullReadBackEvery?: number;
  };
  /** Host versions the launcher rolled back from here (see src/launcher_files.ts). */
  rolledBackFrom?: ReadonlySet<string>;
  /** The state directory (the overlay's key lives there), when known. */
  stateDir?: string;
  /**
   * Detect the machine's adapters again. The apply calls it when a resource needs an
   * adapter that was not there and a package was installed earlier in the same apply
   * (a bundle installs podman, then runs a container from it).
   */
  redetect?: () => Promise<Providers>;
}

/** How to run one apply. */
export interface ApplyOptions {
  /**
   * Where content declared by reference comes from (DESIGN.md §19), after the blobs/
   * directory beside a declaration read from a file.
   */
  contentSources?: readonly ContentSource[];
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
  /**
   * What this apply changed that takes effect only when the host is next started (an
   * upgrade of the host staged for its launcher): the run loop then exits 0.
   */
  restart?: string;
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
