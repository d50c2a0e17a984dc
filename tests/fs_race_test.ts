/**
 * The file system boundary as an attacker meets it (DESIGN.md §18), the short form of `deno
 * task races` (tests/races/): a local user (`nobody`) who owns a directory above managed paths
 * swaps names there with renameat2(RENAME_EXCHANGE), as fast as a process can, while the host
 * works below it; the host is the program as the tarball installs it, built from this
 * checkout, run again and again as a process under its real permission set in a sandbox
 * (tests/races/_sandboxed.ts), never in-process: Deno walks every path again from / under a
 * permission set, not under `--allow-all` (LAB-NOTES.md). After every run, root's directories
 * that a swapped name leads to are looked at: a change is a win. Main (chdir and getcwd
 * before each act) lost each of these races within these many runs (docs/trust.md, "The
 * races": the rates measured there); the host must lose none.
 */
import assert from "node:assert/strict";
import { type RaceResult, runRace } from "./races/_sandboxed.ts";
import { RACES } from "./races/driver.ts";

/** Runs of the host per race here (the long form: `deno task races`, 2,000 each). */
const RUNS: Record<string, number> = {
  "repair": 60,
  "usr-local": 30,
  "authorized-keys": 80,
  "release": 80,
  "wave": 10,
  "fifo": 40,
  "metrics": 24,
};

/** What one more run, once nobody stopped, must show: the host does act there. */
const AFTER: Record<string, RegExp> = {
  "repair": /^converged$/,
  "usr-local": /^converged$/,
  "authorized-keys": /^converged$/,
  "release": /^converged$/,
  "wave": /^converged$/,
  "fifo": /^change$/,
  "metrics": /^run exit 0$/,
};

function said(r: RaceResult): string {
  return JSON.stringify(r, null, 1);
}

for (const [race, runs] of Object.entries(RUNS)) {
  Deno.test(`race (packaged set, real processes): ${RACES[race].what}: no win in ${runs} runs`, async () => {
    const r = await runRace(race, runs, { stopOnWin: true });
    console.log(`    ${r.runs} runs, ${r.flips} swaps, ${JSON.stringify(r.outcomes)}`);
    assert.equal(r.wins, 0, `the attacker won: ${said(r)}`);
    assert.equal(r.runs, runs, said(r));
    assert.ok(r.flips > 1000, `the attacker swapped the names meanwhile: ${said(r)}`);
    assert.match(r.after, AFTER[race], `once nobody stopped, the host acts there: ${said(r)}`);
  });
}
