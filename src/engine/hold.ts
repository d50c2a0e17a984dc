/**
 * A hold and a rescue: what a person at the machine can ask of the host, kept in the
 * store's meta table, so the running service and the command line agree without
 * anything listening.
 *
 * Hold (Puppet's `agent --disable "reason"`): while held, nothing is applied. The
 * engine refuses every apply under the apply lock ({@link HeldError}); the service
 * stores what the link pushes and only checks the machine against it, and applies the
 * latest when the hold is lifted (`unhold`).
 *
 * Rescue (seed 001: "a node whose local state is discarded so the mesh re-derives
 * it"): the store forgets what it manages, the half-done creates and the current
 * declaration, and removes nothing from the machine; the identity and the link's
 * accepted serial stay (an older declaration is still a replay). The next declaration
 * applied answers the rescue: what it names is adopted as found, the rest stays on the
 * machine, unmanaged.
 */
import { BusyError } from "../errors.ts";
import { META } from "../store/meta.ts";
import type { Store } from "../store/store.ts";

/** A hold: who put it, why, since when. */
export interface Hold {
  reason: string;
  by: string;
  since: string;
}

/** A rescue: who asked for it, when, and what the store forgot. */
export interface Rescue {
  by: string;
  at: string;
  /** How many managed resources (and half-done creates) were forgotten. */
  forgot: number;
  /** The serial of the declaration forgotten (from the link), if any. */
  serial?: number;
}

/** The host is held: nothing is applied until `unhold` (exit 75, as busy). */
export class HeldError extends BusyError {
  readonly hold: Hold;
  constructor(hold: Hold) {
    super("held", `the host is held by ${hold.by} since ${hold.since}: ${hold.reason}`, {
      hint: "nothing is applied while held; `nox-mesh-host unhold` lifts it " +
        "(the service then applies the latest declaration)",
    });
    this.hold = hold;
  }
}

function readJson<T>(store: Store, key: string): T | null {
  const text = store.meta(key);
  if (!text) return null;
  try {
    return JSON.parse(text) as T;
  } catch {
    return null;
  }
}

/** The hold on this host, or null. */
export function readHold(store: Store): Hold | null {
  return readJson<Hold>(store, META.hold);
}

/** Put a hold on the host (durably: a hold lost in a power cut would be a surprise). */
export function setHold(store: Store, hold: Hold): void {
  store.setMetaDurably({ [META.hold]: JSON.stringify(hold) });
}

/** Lift the hold; returns the one lifted, or null when there was none. */
export function clearHold(store: Store): Hold | null {
  const hold = readHold(store);
  store.setMeta(META.hold, undefined);
  return hold;
}

/** The rescue no apply has answered yet, or null. */
export function pendingRescue(store: Store): Rescue | null {
  return readJson<Rescue>(store, META.rescue);
}

/** The last rescue an apply answered, or null. */
export function lastRescue(store: Store): Rescue | null {
  return readJson<Rescue>(store, META.lastRescue);
}

/**
 * Rescue: forget what the store holds (removing nothing from the machine) and mark a
 * rescue pending, in one transaction. The caller holds the apply lock.
 */
export function rescue(store: Store, by: string, at = new Date().toISOString()): Rescue {
  const serial = store.currentHead()?.serial;
  const record: Rescue = { by, at, forgot: 0, ...(serial === undefined ? {} : { serial }) };
  const { managed, intents } = store.forgetManaged({ [META.rescue]: JSON.stringify(record) });
  record.forgot = managed + intents;
  store.setMeta(META.rescue, JSON.stringify(record));
  return record;
}

/** An apply answered the pending rescue: it is the last one now. */
export function answerRescue(store: Store, answered: Rescue): void {
  store.batch(() => {
    store.setMeta(META.rescue, undefined);
    store.setMeta(META.lastRescue, JSON.stringify(answered));
  });
}

/**
 * Who runs this command, for a hold's or a rescue's record: the user sudo ran it for
 * (SUDO_USER), else the login name (LOGNAME, USER), else "root".
 */
export function whoRuns(env: (name: string) => string | undefined): string {
  for (const name of ["SUDO_USER", "LOGNAME", "USER"]) {
    const value = env(name)?.trim();
    if (value && /^[\p{L}\p{N}._@-]{1,64}$/u.test(value)) return value;
  }
  return "root";
}
