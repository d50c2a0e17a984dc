/**
 * The host's half of the launcher contract (DESIGN.md §11, launcher/). After
 * the first completed reconcile of a process (its apply ran to an end, whatever
 * its outcome; the program works here), the host clears the launcher's
 * consecutive-failure counter by removing <state-dir>/failures (the launcher
 * reads an absent file as 0). After the first CONVERGED reconcile (never a
 * failed, refused or interrupted one) it also writes its RUNNING version to
 * <state-dir>/known-good (atomically: temp file, fsync, rename), before the
 * counter is cleared. Only the host clears the counter; only the launcher
 * increments it.
 */
import { posix } from "./posix_path.ts";
import type { Log } from "./log.ts";

/** The version that last completed a reconcile (one line). */
export const KNOWN_GOOD_FILE = "known-good";
/** The launcher's count of consecutive failed starts. */
export const FAILURES_FILE = "failures";

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
 * The contract as one run process keeps it: once per process, after its first
 * converged reconcile known-good is written and the counter cleared; after its
 * first completed (failed or refused) one, only the counter is cleared.
 */
export class LauncherContract {
  readonly #stateDir: string;
  readonly #version: string;
  readonly #log: Log;
  #confirmed = false;
  #failuresCleared = false;

  constructor(stateDir: string, version: string, log: Log) {
    this.#stateDir = stateDir;
    this.#version = version;
    this.#log = log;
  }

  /** A reconcile converged: this version works here. */
  async converged(): Promise<void> {
    if (this.#confirmed) return;
    this.#confirmed = true;
    try {
      await confirmGood(this.#stateDir, this.#version);
      this.#log(`run: ${this.#version} completed a reconcile: recorded as known-good`);
    } catch (error) {
      this.#log(`run: cannot record ${this.#version} as known-good: ${describe(error)}`, "error");
    }
  }

  /** A reconcile ran to its end without converging: the program runs, no crash to count. */
  async completed(): Promise<void> {
    if (this.#failuresCleared || this.#confirmed) return;
    this.#failuresCleared = true;
    try {
      await clearFailures(this.#stateDir);
    } catch (error) {
      this.#log(`run: cannot clear the launcher's failure counter: ${describe(error)}`, "error");
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
