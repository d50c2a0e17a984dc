/**
 * `deno task bench:fleet`: the lab's `fleet` scenario with 50 light nodes (or
 * `--nodes N`, up to 200) on the lab's three-server NATS cluster: publish-to-applied over
 * the fleet (p50, p99, max), broker memory (/varz of each server) and each
 * node's host RSS, then the same figures as a table (`--write FILE` appends it).
 * `--prefix P` names the lab's namespaces and cgroups (default noxlab). Needs root (the
 * lab). The full run is never part of the tests; tests/bench/bench_smoke_test.ts runs a
 * smoke form (2 nodes).
 *
 * Each node's launcher finds the rollback copy of its installed version already kept (the
 * released tarball it was unpacked from, with its checksum), as after its first start:
 * packing the installation (tar and gzip of about 100 MB) at once on every node of a large
 * fleet takes this 2-core machine minutes and says nothing about the figures measured
 * (`--pack-rollback` leaves it to the launchers, as the lab's scenario does). Before the
 * hosts start it checks that the machine has the memory for them (about 40 MiB each, and 2
 * GiB to spare for whatever else runs here), and stops with a sentence when it does not.
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    nodes: { type: "string" },
    write: { type: "string" },
    prefix: { type: "string" },
    "pack-rollback": { type: "boolean" },
  },
});
const N = Number(values.nodes ?? 50);
if (!Number.isSafeInteger(N) || N < 1 || N > 200) {
  console.error("bench:fleet: --nodes takes 1 to 200 (the lab's switch has room for 245 machines)");
  Deno.exit(64);
}
// The scenario reads its size when its module loads.
Deno.env.set("NOXLAB_FLEET_NODES", String(N));
const { scenario } = await import("../../lab/scenarios/fleet.ts");
const { runScenario } = await import("../../lab/lib/runner.ts");
const { ENROL_AT_ONCE, eachLimited, figures, histogram, serveEnrolments } = await import(
  "../../lab/mesh_steps/fleet_steps.ts"
);
const { CHECKOUT } = await import("../../lab/lib/bundle.ts");
const { fail } = await import("../../lab/lib/scenario.ts");
const { mesh } = await import("../../lab/mesh_steps/link_steps.ts");
const { hostCommand } = await import("../../lab/lib/host.ts");
const { benchContext } = await import("./_context.ts");
type Step = import("../../lab/lib/scenario.ts").Step;
const context = await benchContext();

/** MemAvailable of this machine, in MiB. */
async function availableMiB(): Promise<number> {
  const info = await Deno.readTextFile("/proc/meminfo");
  return Number(/^MemAvailable:\s+(\d+) kB/m.exec(info)?.[1] ?? 0) / 1024;
}

/** About what each light node's host needs (its RSS, less what the nodes share). */
const PER_NODE_MIB = 40;
const SPARE_MIB = 2048;

const nodes = Object.keys(scenario.machines);
const prepare: Step = {
  title: `each launcher's rollback copy already kept (the released tarball); memory for ${N} hosts`,
  timeoutS: 60 + N,
  async run(ctx) {
    const want = N * PER_NODE_MIB + SPARE_MIB;
    const have = await availableMiB();
    if (have < want) {
      fail(`${want} MiB available for ${N} hosts`, `${have.toFixed(0)} MiB (fewer --nodes)`);
    }
    if (values["pack-rollback"]) return;
    const share = `${ctx.lab.shareDir}/tarball`;
    const [tarball] = [...Deno.readDirSync(share)].map((e) => e.name)
      .filter((n) => /^nox-mesh-host-.*\.tar\.gz$/.test(n));
    const bytes = await Deno.readFile(`${share}/${tarball}`);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    const sum = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    for (const node of nodes) {
      const m = ctx.machine(node);
      const r = await m.exec([
        "/bin/sh",
        "-c",
        `set -eu
v=$(cat /usr/local/lib/nox-mesh-host/VERSION)
d=/var/lib/mesh-host/rollback/$v
mkdir -p "$d"
ln -sf "/lab/tarball/$1" "$d/nox-mesh-host-$v.tar.gz"
printf '%s\n' "$2" > "$d/checksum"`,
        "seed",
        tarball,
        sum,
      ]);
      if (r.code !== 0) fail(`${node}'s rollback copy in place`, r.stderr.trim());
    }
  },
};
/**
 * The scenario's enrolment, with each node that fails enrolled again (a fresh token, up to
 * two more times) instead of failing the run: on this machine about one enrolment in 16
 * fails while the brokers reload for the others, main's host as this one (an uncaught
 * "cannot decrypt peer's message" from Deno's node:tls, or no answer from the control
 * plane within the host's 20 s; 3 of 48 each, on a loopback cluster, 2026-12-01), and a
 * fleet of 50 or 200 then almost never enrols whole. The retries are counted and printed.
 */
const enrolWithRetries: Step = {
  title: `${N} nodes enrol (tokens list every server); a failed enrolment is tried again`,
  timeoutS: 300 + N * 15,
  async run(ctx) {
    const attempts = [...nodes];
    const tries = new Map<string, number>();
    const failures: string[] = [];
    await using _service = await serveEnrolments(ctx, 3 * N, 120 + 15 * N);
    while (attempts.length) {
      const round = attempts.splice(0);
      const tokens = JSON.parse(await mesh(ctx, ["tokens", ...round], 300_000)) as Record<
        string,
        string
      >;
      await eachLimited(round, ENROL_AT_ONCE, async (node) => {
        const m = ctx.machine(node);
        const again = tries.has(node) ? ["--replace"] : [];
        const r = await m.exec([hostCommand(m), "enrol", "--token", "-", ...again], {
          input: tokens[node],
        });
        if (r.code === 0) return;
        const n = (tries.get(node) ?? 0) + 1;
        tries.set(node, n);
        failures.push(`${node} (try ${n}): ${r.stderr.trim().split("\n").at(-1)}`);
        if (n > 2) fail(`${node} enrolled within three tries`, failures.join("; "));
        attempts.push(node);
      });
    }
    enrolRetries.push(...failures);
    if (failures.length) ctx.lab.log(`enrolments tried again: ${failures.length}`);
  },
};
/** The failed enrolments that were tried again, for the table. */
const enrolRetries: string[] = [];

// The scenario's enrolment replaced by the one above; before the step that starts the
// hosts, the rollback copies and the memory check.
const enrol = scenario.steps.findIndex((s) => / nodes enrol /.test(s.title));
const start = scenario.steps.findIndex((s) => s.title.startsWith("start the packaged host"));
if (enrol < 0 || start !== enrol + 1) {
  throw new Error("the fleet scenario no longer enrols, then starts the hosts: update the bench");
}
const steps = [
  ...scenario.steps.slice(0, enrol),
  enrolWithRetries,
  prepare,
  ...scenario.steps.slice(start),
];

const result = await runScenario({ ...scenario, steps }, {
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
  `| enrolments tried again (each failed once, then enrolled) | ${enrolRetries.length} |`,
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
