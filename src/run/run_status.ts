/**
 * The run process's status record: a small JSON document in the store's meta
 * table (key run_status), rewritten on every link change, apply and heartbeat
 * tick, so `status` (another process) can say what the service is doing.
 */
import { META } from "../store/meta.ts";
import type { UplinkState } from "./uplink.ts";
import type { Store } from "../store/store.ts";

/** What the service is doing. */
export type ServicePhase =
  | "starting"
  | "running"
  | "stopping"
  | "stopped"
  | "upgrading"
  | "restarting";

/** The record. */
export interface RunStatus<S extends UplinkState = UplinkState> {
  pid: number;
  version: string;
  startedAt: string;
  updatedAt: string;
  phase: ServicePhase;
  /** Why it is restarting (phase "restarting"): "memory ceiling", "enrolled again". */
  restartFor?: string;
  /**
   * The uplink's state as its transport keeps it (the NATS link's `LinkState`), or null
   * when the node has no identity (not enrolled).
   */
  link: S | null;
  /** A problem that keeps the link from starting at all (e.g. the key file). */
  linkProblem?: string;
  nextDriftAt: string | null;
  lastHeartbeatAt: string | null;
  heartbeatIntervalSeconds: number;
  driftIntervalSeconds: number;
  program: { path: string; form: string } | null;
}

/** Write the record. */
export function writeRunStatus(store: Store, status: RunStatus): void {
  store.setMeta(META.runStatus, JSON.stringify(status));
}

/** Read the record, or null when no run process ever wrote one. */
export function readRunStatus<S extends UplinkState = UplinkState>(
  store: Store,
): RunStatus<S> | null {
  const text = store.meta(META.runStatus);
  if (!text) return null;
  try {
    return JSON.parse(text) as RunStatus<S>;
  } catch {
    return null;
  }
}

/**
 * Whether the record is current: written by a live process that ticks every
 * heartbeat interval. Older than three intervals (or marked stopped) means the
 * service is not running, whatever the record says.
 */
export function isCurrent(status: RunStatus<UplinkState>, now: Date = new Date()): boolean {
  if (status.phase === "stopped" || status.phase === "upgrading" || status.phase === "restarting") {
    return false;
  }
  const age = now.getTime() - Date.parse(status.updatedAt);
  return age <= 3 * status.heartbeatIntervalSeconds * 1000 + 5000;
}
