/**
 * The contract of a resource kind: one module per kind (STYLE.md, after mgmt
 * and Puppet). `check` answers "is the machine already like this?" without
 * changing anything; `apply` makes the change the check found; the engine then
 * calls `check` again as the read-back, so plan, apply and read-back can never
 * disagree about what "in sync" means.
 */
import { HostError } from "../errors.ts";
import type { Resource } from "../declaration/schema.ts";
import type { HeldResource } from "../store/store.ts";
import type { Providers } from "../ports.ts";

/** What a check found. */
export interface Check<D = unknown> {
  /** Whether the managed thing exists at all (false: applying creates it). */
  exists: boolean;
  /** What differs from the declaration, for people; empty means in sync. */
  changes: string[];
  /** The same differences as typed values (kinds that have them), for `apply`. */
  diff?: D[];
}

/**
 * Small values a kind keeps about one resource between applies, in the store
 * (e.g. a setting's value before the host first changed it). Keys are the
 * kind's own; the engine scopes them to the store.
 */
export interface KindNotes {
  get(key: string): string | undefined;
  /** `undefined` deletes the note. */
  set(key: string, value: string | undefined): void;
}

/** Notes kept in memory only (tests, and contexts that never apply). */
export function memoryNotes(): KindNotes {
  const notes = new Map<string, string>();
  return {
    get: (key) => notes.get(key),
    set: (key, value) => void (value === undefined ? notes.delete(key) : notes.set(key, value)),
  };
}

/** What happened (or would happen) to a resource that is no longer declared. */
export interface Release {
  outcome: "removed" | "forgotten";
  /** Why it was forgotten rather than removed, e.g. "not empty, kept". */
  detail?: string;
}

/** What kinds get from the engine. */
export interface KindContext {
  providers: Providers;
  /** Directories whose entries this apply changed; the engine syncs them at the end. */
  touchedDirectories: Set<string>;
  /**
   * Ancestors already seen to be real directories in this pass, so checks of many
   * files in one tree do not lstat the same parents again. Only checks use it;
   * every write re-checks its ancestors fresh just before it renames.
   */
  realDirectories: Set<string>;
  /**
   * The managed roots. Symlink checks walk from the root down: what lies above
   * a root is the machine's own layout, configured by whoever chose the root
   * (and not readable under the host's permission set).
   */
  managedRoots: readonly string[];
  /** mode/owner/group strings already resolved to numbers in this pass. */
  attributes: Map<string, { mode: number; uid: number; gid: number }>;
  /** Versions of the host itself that the launcher rolled back from on this machine. */
  rolledBackFrom: ReadonlySet<string>;
  /** What kinds remember between applies (kept in the store by the engine). */
  notes: KindNotes;
  /** The host's state directory (the overlay's private key lives there), when known. */
  stateDir?: string;
}

/** A fresh context for one apply or plan pass. */
export function newKindContext(
  providers: Providers,
  managedRoots: readonly string[],
  rolledBackFrom: ReadonlySet<string> = new Set(),
  { notes = memoryNotes(), stateDir }: { notes?: KindNotes; stateDir?: string } = {},
): KindContext {
  return {
    providers,
    touchedDirectories: new Set(),
    realDirectories: new Set(),
    managedRoots,
    attributes: new Map(),
    rolledBackFrom,
    notes,
    ...(stateDir === undefined ? {} : { stateDir }),
  };
}

/** One resource kind. */
export interface ResourceKind<R extends Resource = Resource> {
  readonly type: R["type"];
  check(ctx: KindContext, resource: R): Promise<Check>;
  /** Make the changes `found` lists. Throws with the reason when it cannot. */
  apply(ctx: KindContext, resource: R, found: Check): Promise<void>;
  /**
   * Release a held resource that is no longer declared: remove what the host
   * created where the kind's rules allow it, otherwise forget it. With
   * `dryRun`, only say which it would be.
   */
  release(ctx: KindContext, held: HeldResource, dryRun: boolean): Promise<Release>;
}

/** A resource failed to apply, check or release; the message is the reason. */
export class ResourceError extends HostError {}

/** There is no adapter on this machine for what a resource needs. */
export class NoProviderError extends ResourceError {
  constructor(type: string, needs: string) {
    super(
      "resource.no-provider",
      `no provider on this machine for ${type} resources (needs ${needs}, and none was detected)`,
      { hint: "run `nox-mesh-host profile` to see what this machine has" },
    );
  }
}

/** Format permission bits as a 4-digit octal string, e.g. 0o644 → "0644". */
export function formatMode(mode: number): string {
  return mode.toString(8).padStart(4, "0");
}

/** Resolve a user name (or numeric id) to a uid on this machine. */
export async function resolveUser(ctx: KindContext, name: string): Promise<number> {
  const id = await ctx.providers.fs.userId(name);
  if (id === undefined) {
    throw new ResourceError(
      "resource.unknown-user",
      `user "${name}" does not exist on this machine`,
      {
        hint: "create it first (e.g. with a package that adds it) or use a numeric id",
      },
    );
  }
  return id;
}

/** Resolve a group name (or numeric id) to a gid on this machine. */
export async function resolveGroup(ctx: KindContext, name: string): Promise<number> {
  const id = await ctx.providers.fs.groupId(name);
  if (id === undefined) {
    throw new ResourceError(
      "resource.unknown-group",
      `group "${name}" does not exist on this machine`,
      {
        hint: "create it first (e.g. with a package that adds it) or use a numeric id",
      },
    );
  }
  return id;
}
