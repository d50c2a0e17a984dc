/**
 * `deno task bench:fleet`: the lab's `fleet` scenario with 50 light nodes (or
 * `--nodes N`) on the lab's three-server NATS cluster: publish-to-applied over
 * the fleet (p50, p99, max), broker memory (/varz of each server) and each
 * node's host RSS, then the same figures as a table (`--write FILE` appends it).
 * `--prefix P` names the lab's namespaces and cgroups (default noxlab). Needs root (the
 * lab). The full run is never part of the tests; tests/bench/bench_smoke_test.ts runs a
 * smoke form (2 nodes).
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: { nodes: { type: "string" }, write: { type: "string" }, prefix: { type: "string" } },
});
const N = Number(values.nodes ?? 50);
// The scenario reads its size when its module loads.
Deno.env.set("NOXLAB_FLEET_NODES", String(N));
const { scenario } = await import("../../lab/scenarios/fleet.ts");
const { runScenario } = await import("../../lab/lib/runner.ts");
const { figures, histogram } = await import("../../lab/mesh/fleet_steps.ts");
const { CHECKOUT } = await import("../../lab/lib/bundle.ts");
const { benchContext } = await import("./_context.ts");
const context = await benchContext();

const result = await runScenario(scenario, {
  prefix: values.prefix,
  logsRoot: `${CHECKOUT}/.lab/logs`,
  out: (line) => console.log(line),
});
if (!result.ok) Deno.exit(1);

// Serial 1: every host long up (serial 2 follows a host killed and started again).
const rows = figures.rollouts.find((r) => r.serial === 1)?.rows ?? [];
if (rows.length !== N || rows.some((r) => r.appliedAt === undefined)) {
  console.error(`the scenario passed but left ${rows.length} of ${N} rows of serial 1 applied`);
  Deno.exit(1);
}
const ms = rows.map((r) => r.appliedAt! - r.publishedAt).sort((a, b) => a - b);
const q = (p: number) => ms[Math.min(ms.length - 1, Math.ceil(p * ms.length) - 1)];
const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
const brokers = figures.brokerMemory ?? [];
const rss = figures.hostRss ?? [];
const total = brokers.reduce((a, b) => a + b.bytes, 0);
const table = [
  `### ${N} nodes, commit ${context.commit}, ${new Date().toISOString().slice(0, 10)}`,
  "",
  `${await context.line()}; scenario ${(result.ms / 1000).toFixed(0)} s in all.`,
  "",
  "| figure | value |",
  "| --- | --- |",
  `| publish to applied, p50 | ${q(0.5)} ms |`,
  `| publish to applied, p99 | ${q(0.99)} ms |`,
  `| publish to applied, max | ${ms.at(-1)} ms |`,
  `| first publish to last applied | ${
    Math.max(...rows.map((r) => r.appliedAt!)) - Math.min(...rows.map((r) => r.publishedAt))
  } ms |`,
  ...brokers.map((b) =>
    `| ${b.server} resident (/varz mem) | ${mib(b.bytes)} (${b.connections} clients) |`
  ),
  `| broker memory per connected node (3 servers' sum / ${N}) | ${mib(total / N)} |`,
  `| host RSS per node, median | ${mib(rss[Math.floor(rss.length / 2)] ?? 0)} |`,
  `| host RSS per node, max | ${mib(rss.at(-1) ?? 0)} |`,
  "",
  "Publish-to-applied histogram (1 s buckets):",
  "",
  "```",
  ...histogram(ms),
  "```",
  "",
].join("\n");
console.log(table);
if (values.write) await Deno.writeTextFile(values.write, table, { append: true });
