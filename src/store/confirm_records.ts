/**
 * The confirm window's records in the store (the window itself is src/run/confirm.ts):
 * a network change pushed over the link and not confirmed yet (`confirm_pending`),
 * and the last serial refused because its window lapsed (`confirm_refused`). Both are
 * meta values (JSON), read back through a schema: the store is checked, not trusted,
 * and a record that does not read is dropped, never acted on.
 */
import * as v from "valibot";
import type { Store, StoredDeclaration } from "./store.ts";
import { META } from "./meta.ts";

/** The declaration to go back to: the one the host held before the window opened. */
export type RestorePoint = Omit<StoredDeclaration, "acceptedAt">;

/** One resource whose change keeps the window open: what it is and what happened to it. */
export interface WindowChange {
  type: string;
  id: string;
  key: string;
  /** The apply's outcome for it: changed, removed, failed. */
  outcome: string;
}

/** A window that is open: the last pushed declaration under it, and where to go back to. */
export interface PendingWindow {
  /** The last serial (and its declaration's digest) pushed while the window was open. */
  serial: number;
  digest: string;
  /** The link subject it came from. */
  origin: string;
  /** When the first unconfirmed push of this window was applied (ISO). */
  openedAt: string;
  /**
   * When the window lapses (ISO): without a confirmation by then, the host goes back.
   * `null` while it waits: nothing that can cut the node off was reached by an apply of
   * it yet (an earlier resource failed, or the apply did not happen); it runs from the
   * apply that reaches it.
   */
  deadline: string | null;
  /** The declaration held before the window opened; `null` when there was none. */
  restore: RestorePoint | null;
  /** The network resources the pushes under this window changed (empty before the apply ends). */
  changed: WindowChange[];
  /** The declaration's resources that can cut the node off: key and digest of each. */
  network: [string, string][];
}

/** A serial refused because its window lapsed: never applied again. */
export interface RefusedSerial {
  serial: number;
  digest: string;
  /** When it was refused (ISO). */
  at: string;
}

const iso = v.pipe(v.string(), v.isoTimestamp());
const text = v.pipe(v.string(), v.maxLength(4096));

const RestoreSchema = v.strictObject({
  source: v.picklist(["link", "file", "bundle"]),
  origin: text,
  node: v.optional(text),
  serial: v.optional(v.pipe(v.number(), v.safeInteger())),
  digest: text,
  body: v.string(),
});

const PendingSchema = v.strictObject({
  serial: v.pipe(v.number(), v.safeInteger()),
  digest: text,
  origin: text,
  openedAt: iso,
  deadline: v.nullable(iso),
  restore: v.nullable(RestoreSchema),
  changed: v.array(v.strictObject({ type: text, id: text, key: text, outcome: text })),
  network: v.array(v.tuple([text, text])),
});

const RefusedSchema = v.strictObject({
  serial: v.pipe(v.number(), v.safeInteger()),
  digest: text,
  at: iso,
});

/** What reading a record found: the record, nothing, or why it was dropped. */
export type Read<T> = { record: T; problem?: undefined } | { record: undefined; problem?: string };

function read<T>(store: Store, key: string, schema: v.GenericSchema<unknown, T>): Read<T> {
  const value = store.meta(key);
  if (value === undefined) return { record: undefined };
  let data: unknown;
  try {
    data = JSON.parse(value);
  } catch {
    return { record: undefined, problem: `the store's ${key} is not JSON` };
  }
  const parsed = v.safeParse(schema, data);
  if (!parsed.success) {
    const why = parsed.issues.map((i) =>
      `${(i.path ?? []).map((p) => String(p.key)).join(".") || "(record)"}: ${i.message}`
    ).join("; ");
    return { record: undefined, problem: `the store's ${key} does not read (${why})` };
  }
  return { record: parsed.output };
}

/** The open window, if any (a record that does not read is reported as `problem`). */
export function readPending(store: Store): Read<PendingWindow> {
  return read(store, META.confirmPending, PendingSchema);
}

/** The last serial refused for a lapsed window, if any. */
export function readRefused(store: Store): Read<RefusedSerial> {
  return read(store, META.confirmRefused, RefusedSchema);
}

/** Record the open window (or none), on disk when this returns. */
export function writePending(store: Store, pending: PendingWindow | undefined): void {
  store.batchDurably(() =>
    store.setMeta(META.confirmPending, pending ? JSON.stringify(pending) : undefined)
  );
}

/**
 * The lapse of a window, in one commit on disk when this returns: `restore` becomes
 * the current declaration again (when given), the serial is refused, the window is closed.
 */
export function recordLapse(
  store: Store,
  refused: RefusedSerial,
  restore: RestorePoint | undefined,
): void {
  store.batchDurably(() => {
    if (restore) store.makeCurrent(restore);
    store.setMeta(META.confirmRefused, JSON.stringify(refused));
    store.setMeta(META.confirmPending, undefined);
  });
}

/**
 * The resources of the declaration an open window would go back to (as stored: records,
 * not parsed): the content cache keeps what they declare by reference while the window is
 * open, so going back never needs the link the change may have cut.
 */
export function restoreResources(store: Store): { type: string }[] {
  const body = readPending(store).record?.restore?.body;
  if (body === undefined) return [];
  try {
    const resources = (JSON.parse(body) as { resources?: unknown }).resources;
    if (!Array.isArray(resources)) return [];
    return resources.filter((r): r is { type: string } =>
      typeof r === "object" && r !== null && typeof r.type === "string"
    );
  } catch {
    return [];
  }
}
