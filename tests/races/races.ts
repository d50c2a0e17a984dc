/**
 * `deno task races [--runs N] [--only NAME,…]`: the long form of tests/fs_race_test.ts. Each
 * race of tests/races/driver.ts, N runs of the host (default 2,000), as a process under the
 * tarball's permission set in a sandbox, while `nobody` (root, for the FIFO) swaps names as
 * fast as a process can. Prints a table (the numbers of docs/trust.md, "The races") and exits
 * 1 when the attacker won anywhere.
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { buildForRaces, type RaceResult, runRace } from "./_sandboxed.ts";
import { RACES } from "./driver.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { runs: { type: "string", default: "2000" }, only: { type: "string" } },
});
const runs = Number(values.runs);
const names = values.only ? values.only.split(",") : Object.keys(RACES);
for (const name of names) {
  if (!RACES[name]) throw new Error(`no race "${name}" (races: ${Object.keys(RACES).join(", ")})`);
}
const dir = await Deno.makeTempDir({ prefix: "noxrace-" });
const rows: (RaceResult & { seconds: number })[] = [];
try {
  const built = await buildForRaces(join(dir, "build"));
  for (const name of names) {
    const started = performance.now();
    console.error(`race ${name}: ${runs} runs …`);
    const r = await runRace(name, runs, { built });
    rows.push({ ...r, seconds: Math.round((performance.now() - started) / 1000) });
    console.error(`race ${name}: ${r.wins} wins in ${r.runs} runs, ${r.flips} swaps`);
  }
} finally {
  await Deno.remove(dir, { recursive: true });
}
console.log("| race | runs | wins | swaps meanwhile | how the runs ended | after | time |");
console.log("| --- | ---: | ---: | ---: | --- | --- | ---: |");
for (const r of rows) {
  const ended = Object.entries(r.outcomes).map(([k, v]) => `${k} ${v}`).join(", ");
  console.log(
    `| ${r.race} | ${r.runs} | ${r.wins} | ${r.flips.toLocaleString("en")} | ${ended} | ` +
      `${r.after.split(":")[0]} | ${r.seconds} s |`,
  );
}
for (const r of rows.filter((r) => r.wins > 0)) console.log(`\n${r.race}:\n${r.seen.join("\n")}`);
Deno.exit(rows.some((r) => r.wins > 0) ? 1 : 0);
