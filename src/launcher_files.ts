/**
 * The host's half of the launcher contract (DESIGN.md §11, §18, launcher/). A
 * version is confirmed when it "started and got through a reconcile" (ADR 0059),
 * deliberately not when everything applied cleanly: a resource that fails is the
 * machine's problem, not the program's. On the first reconcile of a process that
 * ran to its end and recorded its outcome (converged, or failed on a resource),
 * and on nothing else (a crash, an internal error, an interrupted apply, a
 * declaration refused before applying), the host writes its RUNNING version to
 * <state-dir>/known-good (a new file, fsynced, renamed over the old one: the
 * launcher sees the confirmation as a different file there, its start deadline)
 * and clears the launcher's consecutive-failure counter (removes
 * <state-dir>/failures; the launcher reads an absent file as 0): one event, both
 * records. Only the host clears the counter; only the launcher increments it.
 */
import { posix } from "./posix_path.ts";
import type { Log } from "./log.ts";

/** The version that last completed a reconcile (one line). */
export const KNOWN_GOOD_FILE = "known-good";
/** The launcher's count of consecutive failed starts. */
export const FAILURES_FILE = "failures";

/**
 * The launcher's state for node_exporter's textfile collector, which it writes beside the
 * host's metricsFile (host.json): running, restarting, halted and why, the failures of this
 * incident, a rollback (launcher/README.md). The host never writes it.
 */
export const LAUNCHER_METRICS_FILE = "nox_mesh_host_launcher.prom";

/**
 * Record that `version` works on this machine: known-good first, then the
 * failure counter cleared, so a crash in between leaves the older, safer state.
 *
 * @example
 * ```ts
 * await confirmGood("/var/lib/mesh-host", "0.1.0");
 * ```
 */
export async function confirmGood(stateDir: string, version: string): Promise<void> {
  const path = posix.join(stateDir, KNOWN_GOOD_FILE);
  const temp = `${path}.tmp-${Deno.pid}`;
  const file = await Deno.open(temp, { create: true, truncate: true, write: true, mode: 0o644 });
  try {
    await file.write(new TextEncoder().encode(`${version}\n`));
    await file.syncData();
  } finally {
    file.close();
  }
  await Deno.rename(temp, path);
  await clearFailures(stateDir);
}

/**
 * Clear the launcher's failure counter: this process completed a reconcile, so
 * the program starts and works here (its apply may still have failed: that is
 * the declaration's or the machine's business, not a crash to roll back from).
 */
export async function clearFailures(stateDir: string): Promise<void> {
  try {
    await Deno.remove(posix.join(stateDir, FAILURES_FILE));
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

/** Versions the launcher rolled back from (one a line; the launcher appends, a person removes). */
export const ROLLED_BACK_FROM_FILE = "rolled-back-from";

/**
 * The host versions the launcher rolled back from on this machine. The host
 * refuses to install its own package at one of them again: a declaration that
 * still names a version that crashed here cannot undo the rollback in a loop.
 */
export async function readRolledBackFrom(stateDir: string): Promise<Set<string>> {
  let text: string;
  try {
    text = await Deno.readTextFile(posix.join(stateDir, ROLLED_BACK_FROM_FILE));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return new Set();
    throw error;
  }
  return new Set(text.split("\n").map((line) => line.trim()).filter((line) => line !== ""));
}

/**
 * The contract as one run process keeps it: once per process, on its first
 * reconcile that ran to its end and recorded its outcome, known-good is written
 * and the counter cleared.
 */
export class LauncherContract {
  readonly #stateDir: string;
  readonly #version: string;
  readonly #log: Log;
  #confirmed = false;

  constructor(stateDir: string, version: string, log: Log) {
    this.#stateDir = stateDir;
    this.#version = version;
    this.#log = log;
  }

  /**
   * A reconcile ran to its end and recorded its outcome (converged, or failed on a
   * resource): this version starts and works here.
   */
  async reconciled(): Promise<void> {
    if (this.#confirmed) return;
    this.#confirmed = true;
    try {
      await confirmGood(this.#stateDir, this.#version);
      this.#log(`run: ${this.#version} completed a reconcile: recorded as known-good`);
    } catch (error) {
      this.#log(`run: cannot record ${this.#version} as known-good: ${describe(error)}`, "error");
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
