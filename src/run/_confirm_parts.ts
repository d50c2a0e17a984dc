/**
 * The confirm window's parts that hold no state (confirm.ts): what it is told, what it
 * reports, and what it reads of a declaration and of the store.
 */
import { canonicalJson, digestOf } from "../declaration/canonical.ts";
import type { Declaration, Problem } from "../declaration/envelope.ts";
import type { Log } from "../log.ts";
import { mayCutLink, resourceKey } from "../resources/mod.ts";
import type { RestorePoint, WindowChange } from "../store/confirm_records.ts";
import type { Store } from "../store/store.ts";

/** How the window is kept. */
export interface ConfirmOptions {
  store: Store;
  /** How long a window runs (host.json `confirmWindowSeconds`). */
  windowSeconds: number;
  log: Log;
  /**
   * Send a heartbeat and wait, at most `timeoutMs`, for the broker to answer behind it
   * and to take a new connection; true when both happened. False at once when the link
   * is down.
   */
  probe(timeoutMs: number): Promise<boolean>;
  /**
   * The window lapsed, or going back is owed: the loop settles it (`settle`) and applies
   * the current declaration as going back (`networkFirst`) before its next piece of work.
   */
  lapsed(): void;
  /** The clock (default Date.now). */
  now?: () => number;
  /** How long to wait between two probes that got no answer (ms, default 1000). */
  probeEveryMs?: number;
}

/** A window that lapsed: what to report. */
export interface Lapse {
  serial: number;
  digest: string;
  message: string;
  problems: Problem[];
}

/** How long one probe may wait for the broker's answer and a new connection (ms). */
export const PROBE_TIMEOUT_MS = 10_000;

/** The key and digest of each resource of `declaration` that can cut the node off. */
export async function networkOf(declaration: Declaration): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for (const resource of declaration.resources) {
    if (mayCutLink(resource.type)) out.push([resourceKey(resource), await digestOf(resource)]);
  }
  return out;
}

/**
 * How many of what can cut the node off differ between `network` (a declaration's) and
 * what is managed: declared and not managed as declared, or managed and no longer declared.
 */
export function changesAgainstManaged(store: Store, network: readonly [string, string][]): number {
  const managed = new Map(
    [...store.managedIndex()].filter(([key]) => mayCutLink(key.slice(0, key.indexOf(":")))),
  );
  const declared = new Map(network);
  let changing = 0;
  for (const [key, digest] of declared) if (managed.get(key)?.digest !== digest) changing++;
  for (const key of managed.keys()) if (!declared.has(key)) changing++;
  return changing;
}

/** The declaration the host holds now, as the place to go back to. */
export function restorePoint(store: Store): RestorePoint | null {
  const current = store.current();
  if (!current) return null;
  const { acceptedAt: _at, ...point } = current;
  return point;
}

/** Going back to "nothing managed": an empty declaration from the link. */
export async function nothing(origin: string): Promise<RestorePoint> {
  const body = { version: 1, resources: [] };
  return { source: "link", origin, digest: await digestOf(body), body: canonicalJson(body) };
}

export function restoreName(restore: RestorePoint | null): string {
  if (!restore) return "holding nothing (no declaration was held before)";
  if (restore.serial !== undefined) return `serial ${restore.serial}, the one it held before`;
  return restore.source === "bundle"
    ? `its bundle ${restore.origin}`
    : `the declaration from ${restore.origin}`;
}

export function describeChanges(changes: readonly WindowChange[]): string {
  return changes.map((c) => `${c.type} "${c.id}"${c.outcome === "changed" ? "" : ` ${c.outcome}`}`)
    .join(", ");
}
