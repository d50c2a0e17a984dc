// deno task lab [NAME…] [--list] [--keep] [--clean]: runs lab scenarios on this host.
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CHECKOUT } from "./lib/bundle.ts";
import { cleanStale, leftovers } from "./lib/clean.ts";
import { formatSummary, runScenario, type ScenarioResult } from "./lib/runner.ts";
import { SCENARIOS } from "./scenarios/index.ts";

const USAGE = `usage: deno task lab [NAME…] [--all] [--list] [--keep] [--clean]
  NAME     run only these scenarios (default: all but the opt-in ones)
  --all    every scenario, the opt-in ones too
  --list   list the scenarios and exit
  --keep   leave machines and broker up after the run, for inspection
  --clean  remove what earlier --keep or killed runs left behind, and exit
  --prefix P  name prefix of namespaces/cgroups/veths (default noxlab; tests use their own)`;

/** Why an opt-in scenario did not run, and how to run it. */
function optedOut(s: { name: string; optIn?: string }): string {
  return `opt-in (${s.optIn}): deno task lab ${s.name}, or --all`;
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: Deno.args,
      allowPositionals: true,
      options: {
        all: { type: "boolean" },
        list: { type: "boolean" },
        keep: { type: "boolean" },
        clean: { type: "boolean" },
        prefix: { type: "string", default: "noxlab" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    console.error(`lab: ${error instanceof Error ? error.message : error}\n${USAGE}`);
    return 64;
  }
  const { values, positionals } = parsed;
  const PREFIX = values.prefix;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.list) {
    const width = Math.max(...SCENARIOS.map((s) => s.name.length));
    for (const s of SCENARIOS) console.log(`${s.name.padEnd(width)}  ${s.summary}`);
    return 0;
  }
  if (values.clean) {
    const cleaned = await cleanStale(PREFIX);
    console.log(cleaned.length ? `cleaned ${cleaned.join(", ")}` : "nothing to clean");
    return 0;
  }
  const unknown = positionals.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length) {
    console.error(`lab: no scenario named ${unknown.join(", ")} (deno task lab --list)`);
    return 64;
  }
  // Without names, an opt-in scenario is listed as skipped with its reason (never silently).
  const chosen = positionals.length
    ? SCENARIOS.filter((s) => positionals.includes(s.name))
    : values.all
    ? SCENARIOS
    : SCENARIOS.map((s) => s.optIn ? { ...s, skip: () => Promise.resolve(optedOut(s)) } : s);
  const stale = (await leftovers(PREFIX)).dirs;
  if (stale.length) {
    console.log(`note: earlier labs still present (${stale.join(", ")}); deno task lab --clean\n`);
  }
  const started = Date.now();
  const results: ScenarioResult[] = [];
  for (const scenario of chosen) {
    results.push(
      await runScenario(scenario, {
        prefix: PREFIX,
        keep: values.keep,
        logsRoot: join(CHECKOUT, ".lab", "logs"),
        out: (line) => console.log(line),
      }),
    );
  }
  console.log(formatSummary(results, Date.now() - started));
  const failed = results.filter((r) => !r.ok);
  for (const r of failed) console.log(`\n✘ ${r.name}: ${r.failure}`);
  return failed.length ? 1 : 0;
}

Deno.exit(await main());
