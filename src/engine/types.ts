/**
 * The engine's vocabulary: an open engine and what it works with, how to run an apply,
 * what an apply and a plan answer. What the store records of it (a declaration's source,
 * each resource's result, the resources the host manages) is src/store/records.ts.
 */
import type { HostConfig } from "../config.ts";
import type { ContentSource } from "../store/content.ts";
import type { OwnResources, Permit } from "../declaration/options.ts";
import type { Providers } from "../providers.ts";
import type { Resource } from "../resources/mod.ts";
import type { Counts, ResourceResult, Source } from "../store/records.ts";
import type { Store } from "../store/store.ts";
import type { Rescue } from "./hold.ts";

/** The sources that read a declaration from disk (a file, the bundle the host carries). */
export const FROM_DISK: ReadonlySet<Source> = new Set(["file", "bundle"]);

/**
 * The counts for people: "2 changed, 0 unchanged, 1 removed, 0 failed", with
 * ", N forgotten" after "removed" when the apply forgot anything.
 */
export function tally(c: Counts): string {
  const forgotten = c.forgotten > 0 ? `, ${c.forgotten} forgotten` : "";
  return `${c.changed} changed, ${c.unchanged} unchanged, ${c.removed} removed${forgotten}, ` +
    `${c.failed} failed`;
}

/** An open engine: close it (or `using` it) when done. */
export interface Engine extends Disposable {
  config: HostConfig;
  store: Store;
  /** The adapters known so far: the file system at first, all of them after `detect()`. */
  providers: Providers;
  /**
   * Detect every adapter of this machine (once per process; asking the package
   * manager, the init and the container runtime takes a while, so a declaration
   * of files and directories never pays for it).
   */
  detect(): Promise<Providers>;
  /** Detect every adapter again (a package installed since may have brought one). */
  redetect(): Promise<Providers>;
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
    /** What host.json permits (the checks refuse on the machine what the parse could not see). */
    permit?: Permit;
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
  /**
   * Going back after a confirm window lapsed (src/run/confirm.ts): what can cut the node
   * off its broker (kinds with `mayCutLink`) comes first, so nothing else failing keeps
   * it cut off: such resources no longer declared are released, then those declared are
   * applied in their order, then the rest as declared. Positions stay the declared ones.
   */
  networkFirst?: boolean;
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
  /** Set when this apply answered a rescue (engine/hold.ts): it is reported as one. */
  rescue?: Rescue;
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
