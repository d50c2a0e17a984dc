/**
 * The contract of a resource kind: ONE module per kind under src/resources/
 * holds everything about it (DESIGN.md §1, STYLE.md after mgmt and Puppet):
 * its schema, its key, its rules against this host, which provider it needs,
 * `check` (a typed diff whose changes describe themselves), `apply` (make the
 * changes the check found) and `release` (what happens when it is no longer
 * declared). The engine calls `check` again as the read-back, so plan, apply
 * and read-back can never disagree about what "in sync" means. Adding a kind
 * touches its module, its adapter and the list in mod.ts; nothing else.
 *
 * A kind keeps what it learns in one pass (an apply or a plan) in its own
 * {@link passState}, never in the context the engine hands to every kind; the
 * engine asks a kind what it needs to know through hooks (`place`, `references`,
 * `bringsProviders`, `tidy`, `takesEffectOnRestart`), never by its name.
 */
import type * as v from "valibot";
import type { Limits } from "../declaration/limits.ts";
import type { ProblemSink } from "../declaration/refused.ts";
import type { Permit } from "../declaration/options.ts";
import type { OwnPattern } from "../declaration/paths.ts";
import { HostError, type HostErrorOptions } from "../errors.ts";
import type { FileIdentity, Providers } from "../providers.ts";

/** One difference between the machine and the declaration: what to do, and how to say it. */
export interface Change<W extends string = string> {
  /** What the apply does about it (the kind's own vocabulary: "enable", "content", …). */
  readonly what: W;
  /** The same for people: "mode 0600 → 0644", "version 1.0-1 → 1.1-1". */
  readonly text: string;
}

/** A change `what`, said as `text` (default: `what` itself). */
export function change<W extends string>(what: W, text: string = what): Change<W> {
  return { what, text };
}

/**
 * What a check found. A kind's changes are `Change`s of its own vocabulary, and
 * may carry what its apply needs (a peer's key, a value's old and new form).
 */
export interface Diff<C extends Change = Change> {
  /** Whether the managed thing exists at all (false: applying creates it). */
  exists: boolean;
  /** What differs from the declaration; empty means in sync. */
  changes: C[];
  /**
   * In sync, and recognisable next time without being read again (a file's identity,
   * trusted: src/resources/file.ts): the engine keeps it with the managed record and gives
   * it back through {@link KindContext.knownIdentity} while the declared resource is the
   * same.
   */
  identity?: FileIdentity;
}

/** Whether a diff holds a change of this kind. */
export function wants<C extends Change>(diff: Diff<C>, what: C["what"]): boolean {
  return diff.changes.some((c) => c.what === what);
}

/** The words of a diff's changes, for people, reports and the store. */
export function describe(diff: Diff): string[] {
  return diff.changes.map((c) => c.text);
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

/** How a release is asked for. */
export interface ReleaseOptions {
  /** Whether the host created it (only then may it be removed). */
  created: boolean;
  /** Only say what would happen. */
  dryRun: boolean;
}

/** Which provider a kind's resources need (src/providers.ts `Providers`). */
export type ProviderNeed = keyof Providers;

/** What a kind's rules are checked against: this host's configuration, compiled once per parse. */
export interface RuleScope {
  /** Where each problem goes; the parse refuses the declaration when any is found. */
  problems: ProblemSink;
  limits: Limits;
  /** The managed roots. */
  roots: readonly string[];
  /** The host's own paths (DESIGN.md §18), compiled. */
  own: OwnPattern[];
  /** The host's own service names, as configured (every unit of these names is refused). */
  ownServices: readonly string[];
  /**
   * The trusted parse (the bundle the host carries): what may only be done from there
   * (run a program, stop the node, turn a kernel protection off) is accepted.
   */
  trusted: boolean;
  /** What this machine's configuration permits the safe parse (host.json `permit`). */
  permit: PermitSets;
  /**
   * Claim something a resource holds besides its key (a UDP port, …) for the resource at
   * `at`: returns the path of the resource that claimed it first, or `undefined` when this
   * is the first claim. Two resources holding one thing can never both converge.
   */
  claim(what: string, at: string): string | undefined;
}

/** What a kind may need to know about this host (the same for every pass). */
export interface HostFacts {
  /**
   * The managed roots. A container's mount sources are held to who can write the
   * directories from their root down: what lies above a root is the machine's own
   * layout, configured by whoever chose the root (and not readable under the
   * host's permission set).
   */
  readonly managedRoots: readonly string[];
  /** Versions of the host itself that the launcher rolled back from on this machine. */
  readonly rolledBackFrom: ReadonlySet<string>;
  /** The host's state directory (the overlay's private key lives there), when known. */
  readonly stateDir?: string;
}

/** host.json's `permit`, as sets (src/declaration/envelope.ts Permit). */
export interface PermitSets {
  sysctls: ReadonlySet<string>;
  services: ReadonlySet<string>;
  groups: ReadonlySet<string>;
  users: ReadonlySet<string>;
}

/** The sets of a `permit` (nothing permitted when absent). */
export function permitSets(permit?: Partial<Permit>): PermitSets {
  return {
    sysctls: new Set(permit?.sysctls ?? []),
    services: new Set(permit?.services ?? []),
    groups: new Set(permit?.groups ?? []),
    users: new Set(permit?.users ?? []),
  };
}

/**
 * What a declaration was admitted with, for what its kinds can only check on the machine
 * (a group's gid, an account's uid, a setting's value now): whether it came through the
 * trusted parse (the bundle), and what this machine's host.json permits.
 */
export interface Policy {
  readonly trusted: boolean;
  readonly permit: PermitSets;
}

/**
 * What kinds get from the engine: what every kind shares (the adapters, this host's facts,
 * notes, what this pass changed, each kind's own pass state) and the engine's side of a few
 * mechanisms (directories to sync, the commit turn, content by reference, trusted identities).
 */
export interface KindContext {
  providers: Providers;
  readonly host: HostFacts;
  /** Directories whose entries this apply changed; the engine syncs them at the end. */
  touchedDirectories: Set<string>;
  /** What kinds remember between applies (kept in the store by the engine). */
  notes: KindNotes;
  /**
   * Set by the engine for a kind with `concurrentApply`: its apply awaits this right
   * before the one step that makes the change visible (a rename); it resolves in
   * declared order, once every apply of the window has done its slow part, and
   * throws when an earlier one failed (then the apply abandons its change).
   */
  beforeCommit?: () => Promise<void>;
  /**
   * Set with `beforeCommit` when the engine syncs the writes of the window together before
   * any is committed (`FileSystem.syncWrites`): a write leaves its own sync to that pass.
   */
  deferSync?: boolean;
  /**
   * The bytes of content declared by reference (DESIGN.md §19): from the cache or a
   * content source, verified against `sha256` and `size`; throws naming `forPath` when
   * no source holds them or what one holds is not them.
   */
  content?: (sha256: string, size: number, forPath: string) => Promise<Uint8Array>;
  /**
   * What the last check that found `resource` in sync recognised it by (its
   * {@link Diff.identity}), when the engine lets this check trust it: the resource is
   * declared exactly as then, and this pass is not one of the full read-backs. Unset in a
   * plan and in a read-back after a change: those always look at everything.
   */
  knownIdentity?: (resource: object) => FileIdentity | undefined;
  /**
   * Ids of the resources this pass changed (or, in a plan, would change), filled by
   * the engine in declared order as each one is applied or checked: a resource's
   * `restartOn` is answered from it (only ids declared before it can be here).
   */
  changedIds: ReadonlySet<string>;
  /** Each kind's own state for this pass (see {@link passState}); made fresh for each pass. */
  readonly pass: PassStates;
  /** What the declaration was admitted with (the safe parse, nothing permitted, by default). */
  readonly policy: Policy;
}

/** The states kinds keep for one pass, each under its owner's key (see {@link passState}). */
export class PassStates {
  readonly #states = new Map<symbol, unknown>();

  /** The state kept under `owner`, made by `make` the first time it is asked for. */
  of<S>(owner: symbol, make: () => S): S {
    if (!this.#states.has(owner)) this.#states.set(owner, make());
    return this.#states.get(owner) as S;
  }
}

/**
 * A kind's own state for one pass: what its apply leaves for its read-back (a restart and
 * the process before it), what it resolved once (owners' ids). `make` makes it fresh for
 * each pass, the first time the returned function is asked for it with that pass's context;
 * no other kind and not the engine can see it.
 */
export function passState<S>(make: () => S): (ctx: KindContext) => S {
  const owner = Symbol("pass state");
  return (ctx) => ctx.pass.of(owner, make);
}

/**
 * A start, restart or reload a kind made in this pass (a started process is new
 * already: the read-back must not restart it again), and the identity before.
 */
export interface Restarted {
  how: "start" | "restart" | "reload";
  /** The identity before (systemd InvocationID, OpenRC pid, container StartedAt); null if none. */
  before: string | null;
}

/** The ids of `restartOn` that this pass changed, in declared order of the list. */
export function changedDependencies(
  ctx: KindContext,
  restartOn: readonly string[] | undefined,
): string[] {
  return [...new Set(restartOn ?? [])].filter((id) => ctx.changedIds.has(id));
}

/** A fresh context for one apply or plan pass. */
export function newKindContext(
  providers: Providers,
  managedRoots: readonly string[],
  rolledBackFrom: ReadonlySet<string> = new Set(),
  { notes = memoryNotes(), stateDir, changedIds = new Set(), policy }: {
    notes?: KindNotes;
    stateDir?: string;
    /** The engine's set, which it fills as the pass goes (see {@link KindContext.changedIds}). */
    changedIds?: Set<string>;
    policy?: Policy;
  } = {},
): KindContext {
  return {
    providers,
    changedIds,
    policy: policy ?? { trusted: false, permit: permitSets() },
    pass: new PassStates(),
    touchedDirectories: new Set(),
    host: { managedRoots, rolledBackFrom, ...(stateDir === undefined ? {} : { stateDir }) },
    notes,
  };
}

/**
 * Where a resource lies among paths, for the order of what is declared and what is
 * released (nothing is released before what lies inside it, nothing is declared before
 * what it lies inside): a file lies at its path; a directory lies at its path and
 * encloses what is below; a mount lies over its target (the directory there is released
 * after it) and encloses what is below.
 */
export interface Place {
  /** The path it manages. */
  path: string;
  /** What lies below `path` lies inside it. */
  encloses?: boolean;
  /** It lies over what is at `path` itself (a mount over its mount point), which it needs. */
  over?: boolean;
  /** Other paths it relies on (a bind's source): it lies inside what encloses them, too. */
  uses?: readonly string[];
}

/** One resource kind: `R` is its resource, `C` its changes. */
export interface ResourceKind<
  R extends { type: string; id: string } = { type: string; id: string },
  C extends Change = Change,
> {
  readonly type: R["type"];
  /** The resource's shape (valibot); unknown fields are refused. */
  readonly schema: v.GenericSchema<unknown, R>;
  /** Only the bundle the host carries may declare it (the trusted parse). */
  readonly trustedOnly?: boolean;
  /** The provider its resources need; "fs" alone never waits for detecting the others. */
  readonly needs: ProviderNeed;
  /**
   * A change to it can cut the node off its broker (a firewall, an overlay, a kernel
   * setting): one pushed over the link stands only once the link confirms it, within
   * the confirm window (src/run/confirm.ts); otherwise the host goes back.
   */
  readonly mayCutLink?: boolean;
  /**
   * Applies of consecutive resources of this kind may run together (the engine calls
   * them at once and orders their commits through `ctx.beforeCommit`): their slow
   * part, e.g. an fsync, overlaps. Only for kinds whose resources never depend on
   * each other.
   */
  readonly concurrentApply?: boolean;
  /** What two resources may not both manage ("path:/etc/x", "package:vim" …). */
  key(resource: R): string;
  /** Where it lies among paths (kinds that manage a path); see {@link Place}. */
  place?(resource: R): Place;
  /**
   * A change to one of its resources may bring adapters this machine did not have (a
   * package installs podman, nft …): the engine detects them again before a later
   * resource that needs one not yet found.
   */
  readonly bringsProviders?: boolean;
  /**
   * The content digests (SHA-256, hex) this resource declares by reference: the content
   * cache keeps them while it is held. Asked of managed records too (the engine guards it).
   */
  references?(resource: R): readonly string[];
  /**
   * Before its check, in an apply after one that did not converge (a crash among them):
   * remove what a change cut short may have left (a file's temporary beside it). Never
   * called in a plan, which changes nothing; `check` itself changes nothing.
   */
  tidy?(ctx: KindContext, resource: R): Promise<void>;
  /**
   * After its apply read back: why the change takes effect only when the host is next
   * started (the host's own package staged for its launcher), or `undefined`. The engine
   * puts it in the result and the report; the run loop then exits 0 for the launcher.
   */
  takesEffectOnRestart?(ctx: KindContext, resource: R): string | undefined;
  /**
   * The ids whose change in this apply restarts (or reloads) this resource's process
   * (its `restartOn`). The parse refuses an id that names no resource declared
   * before this one: the order is stated, never derived.
   */
  restartOn?(resource: R): readonly string[];
  /**
   * What this resource makes exist that other resources may name (a user "user:app", a
   * group "group:app"): the parse refuses a resource that names one declared after it.
   */
  provides?(resource: R): readonly string[];
  /**
   * What this resource names that another resource may provide (a file's owner
   * "user:app"), each with the field that names it. The order is stated, never derived:
   * a provider declared after this resource is refused, naming both.
   */
  requires?(resource: R): readonly { what: string; field: string }[];
  /**
   * Keys of what this resource changes in part, beside its own key (users and groups:
   * the account files). No other resource may manage one of them as its key (one owner per
   * fact); resources that touch the same ones do not conflict with each other.
   */
  touches?(resource: R): readonly string[];
  /** Rules against this host (managed roots, own paths, limits); problems go to `scope`. */
  rules?(resource: R, at: string, scope: RuleScope): void;
  /**
   * Is the machine already like this? Changes nothing (it may read what this kind's own
   * {@link passState} holds: the read-back of a restart compares with the process before).
   */
  check(ctx: KindContext, resource: R): Promise<Diff<C>>;
  /** Make the changes `diff` lists. Throws with the reason when it cannot. */
  apply(ctx: KindContext, resource: R, diff: Diff<C>): Promise<void>;
  /**
   * Release a resource that is no longer declared (`spec` as it was recorded):
   * remove what the host created where the kind's rules allow it, otherwise
   * forget it. With `dryRun`, only say which it would be.
   */
  release(ctx: KindContext, spec: R, options: ReleaseOptions): Promise<Release>;
}

/**
 * Why a resource failed: each code a caller (a report, a test, the control plane) may
 * branch on. A new failure adds its code here.
 */
export type ResourceErrorCode =
  | "resource.action-failed"
  | "resource.container-not-ours"
  | "resource.content-unavailable"
  | "resource.firewall-not-ours"
  | "resource.firewall-read-back"
  | "resource.firewall-syntax"
  | "resource.foreign-boot-record"
  | "resource.group-id"
  | "resource.group-remove"
  | "resource.group-reserved"
  | "resource.mount-elsewhere"
  | "resource.mount-lifts-flags"
  | "resource.mount-loose-flags"
  | "resource.mount-missing"
  | "resource.mount-occupied"
  | "resource.mount-user-source"
  | "resource.no-bind-source"
  | "resource.no-device"
  | "resource.no-mount-target"
  | "resource.no-parent"
  | "resource.no-provider"
  | "resource.no-such-service"
  | "resource.not-a-directory"
  | "resource.not-attempted"
  | "resource.overlay-create"
  | "resource.overlay-no-key"
  | "resource.overlay-not-ours"
  | "resource.read-back"
  | "resource.restart-failed"
  | "resource.rolled-back"
  | "resource.symlink"
  | "resource.sync"
  | "resource.sysctl-lowers"
  | "resource.sysctl-restore"
  | "resource.sysctl-unknown"
  | "resource.unknown-group"
  | "resource.unknown-user"
  | "resource.unmount"
  | "resource.unsafe-mount-source"
  | "resource.user-id"
  | "resource.user-remove"
  | "resource.user-reserved"
  | "resource.user-root-group"
  | "resource.user-system-account"
  | "resource.wrong-kind";

/** A resource failed to apply, check or release; the message is the reason. */
export class ResourceError extends HostError {
  declare readonly code: ResourceErrorCode;
  constructor(code: ResourceErrorCode, what: string, options: HostErrorOptions = {}) {
    super(code, what, options);
  }
}

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
