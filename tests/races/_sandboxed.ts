/**
 * The races of tests/races/driver.ts, each in a sandbox of its own (tests/_sandbox.ts) where
 * the host is installed as the tarball installs it, built in the bundled form from this
 * checkout (tests/_packaged.ts): the host runs as a process under its real permission set.
 * Used by tests/fs_race_test.ts (a short form) and `deno task races` (the long form).
 */
import { join } from "node:path";
import { buildBundled, type Built, installBuilt } from "../_packaged.ts";
import { makeSandbox, removeSandbox, runInSandbox } from "../_sandbox.ts";

const DRIVER = new URL("./driver.ts", import.meta.url).pathname;
const PROGRAM = new URL("../../main.ts", import.meta.url).pathname;

/** The build the races install: the tarball's set (every program of every OS it serves). */
export const RACE_OS = "tarball";

/** What a race run found. */
export interface RaceResult {
  race: string;
  runs: number;
  /** How the host's runs ended ("converged", "failed", "run exit 0" …), counted. */
  outcomes: Record<string, number>;
  /** How many times a victim changed. */
  wins: number;
  /** How many swaps nobody's process made meanwhile. */
  flips: number;
  /** The first few kinds of refusal the host reported, and every win. */
  seen: string[];
  /** How one more run ended once nobody stopped and the names were put back. */
  after: string;
}

/** Build the host once (into `dir`) for several races. */
export function buildForRaces(dir: string): Promise<Built> {
  return buildBundled(RACE_OS, PROGRAM, join(dir, "build"));
}

/**
 * Run one race for `runs` runs of the host, in a fresh sandbox (the host built for it, or
 * `built`).
 */
export async function runRace(
  race: string,
  runs: number,
  options: { stopOnWin?: boolean; built?: Built } = {},
): Promise<RaceResult> {
  const s = await makeSandbox();
  try {
    const set = await installBuilt(s, RACE_OS, PROGRAM, options.built);
    const config = { race, runs, binary: set.binary, stopOnWin: options.stopOnWin === true };
    const r = await runInSandbox(s, [
      Deno.execPath(),
      "run",
      "--quiet",
      "--allow-all",
      DRIVER,
      JSON.stringify(config),
    ]);
    const last = r.stdout.trim().split("\n").at(-1) ?? "";
    if (r.code !== 0 || !last.startsWith("{")) {
      throw new Error(`the race ${race} did not run (exit ${r.code}): ${r.stderr}${r.stdout}`);
    }
    return JSON.parse(last) as RaceResult;
  } finally {
    await removeSandbox(s);
  }
}
