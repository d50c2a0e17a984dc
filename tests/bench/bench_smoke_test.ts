/**
 * No benchmark rots unseen: every bench task of deno.json runs here in a smoke form (a few
 * iterations, a tiny workload), exactly as `deno task NAME ARGS` runs it, and must exit 0
 * and print its table. The figures of a smoke run mean nothing and none is asserted; the
 * full runs stay out of the tests (tests/bench/RESULTS.md). A bench task added to deno.json
 * without a smoke form here fails the first test.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { isClean, leftovers } from "../../lab/lib/clean.ts";

const REPO = join(import.meta.dirname!, "..", "..");
const root = Deno.uid() === 0;

/** A bench's smoke form: its arguments, and lines its table must hold (any figure). */
interface Smoke {
  args: () => string[];
  /** What each smoke form needs root for. */
  root: string;
  table: RegExp[];
  /** A generous bound on the whole run (a hung bench fails instead of hanging the tests). */
  boundS: number;
}

const labPrefix = "noxbs" + crypto.randomUUID().slice(0, 3);

const SMOKE: Record<string, Smoke> = {
  "bench": {
    args: () => ["--runs", "1", "--files", "20", "--settle", "1"],
    root: "its scratch roots are under /var/lib, owned by root",
    table: [
      /^\| F: empty script, same flags \| \d+ ms \|/m,
      /^\| version \| \d+ ms \| -?\d+ ms \| [\d.]+ MiB \|/m,
      /^\| first apply \| \d+ ms \|/m,
      /^\| no-op re-apply \(identities known\) \| \d+ ms \|/m,
      /^\| drift repair \(1 edited, 1 deleted\), \+ 1 × 64 KiB \| \d+ ms \|/m,
      /^\| in-process no-op \(admit \+ apply 22 resources, [^|]*\| [\d.]+ ms \|/m,
      /^\| `run` idle RSS \(store of 22 resources, no link\) \| - \| - \| [\d.]+ MiB \|/m,
    ],
    boundS: 300,
  },
  "bench:link": {
    args: () => ["--pushes", "2", "--starts", "1", "--idle", "1"],
    root: "the pushed file is owned by root",
    table: [
      /^start to first reconcile \(median of 1\) +[\d.]+ ms/m,
      /^on the broker to applied, p50 \(2 pushes\) +[\d.]+ ms/m,
      /^declare\(\) to applied, p99 +[\d.]+ ms/m,
      /^idle RSS +[\d.]+ MiB/m,
      /^exit on SIGTERM +0 /m,
    ],
    boundS: 300,
  },
  "bench:soak": {
    // A few events, no bound that counts: tests/run_soak_guard_test.ts runs the small form.
    args: () => ["--pushes", "4", "--drifts", "1", "--sample", "1", "--max-slope", "1e12"],
    root: "the pushed file is owned by root",
    table: [
      /^pushes applied \/ drift passes +4 \/ 1 /m,
      /^RSS slope over the last half \(\d+ samples\) +-?[\d.]+ KiB\/1000 /m,
      /^exit on SIGTERM +0 /m,
    ],
    boundS: 300,
  },
  "bench:parse": {
    // One shape: tests/declaration_limits_test.ts parses every shape at the limit already.
    args: () => ["--runs", "1", "--only", "sysctls"],
    root: "nothing; run with the others",
    table: [
      /^parse at the size limit, median of 1 /m,
      /^ +\d+ +\d+ +\S.* +sysctls: 10,000 settings, both spellings$/m,
    ],
    boundS: 300,
  },
  "bench:scale": {
    args: () => ["--nodes", "3", "--heartbeat", "5"],
    root: "nothing (servers and nodes on loopback); run with the others",
    table: [
      /^\| time to enrol all \| [\d.]+ s \|/m,
      /^\| broker memory per node \| -?\d+ KiB /m,
      /^\| declaration to all: publish to report \| p50 \d+ ms, p99 \d+ ms; /m,
      /^\| one node's push, fleet idle \| p50 \d+ ms/m,
      /^\| every server restarted: all linked and caught up \| [\d.]+ s \(3 of 3\) \|/m,
    ],
    boundS: 600,
  },
  "bench:broker": {
    args: () => ["--clients", "20", "--layers", "bare,routed", "--settle", "1"],
    root: "nothing (servers and clients on loopback); run with the others",
    table: [
      /^\| bare \| 20 \(0\) \| -?[\d.]+ \| -?[\d.]+ \|/m,
      /^\| routed \| 20 \(0\) \| -?[\d.]+ \| -?[\d.]+ \|/m,
      /^- routed: .*; the rest -?[\d.]+$/m,
    ],
    boundS: 300,
  },
  "bench:fleet": {
    args: () => ["--nodes", "2", "--prefix", labPrefix],
    root: "the lab's machines and namespaces",
    table: [
      /^### 2 nodes, commit /m,
      /^\| publish to applied, p99 \| \d+ ms \|/m,
      /^\| nats[123] resident \(\/varz mem\) \| [\d.]+ MiB/m,
      /^\| host RSS per node, max \| [\d.]+ MiB \|/m,
    ],
    boundS: 900,
  },
};

/**
 * Modes of a task, each a smoke form of its own: `bench --peers` (cf-agent's rows where it is
 * installed, "cf-agent not installed" where not: the table is the host's either way).
 */
const MODES: [string, Smoke][] = [
  ["bench", {
    args: () => ["--peers", "--runs", "1", "--files", "20", "--settle", "1"],
    root: "its scratch roots are under /var/lib, owned by root",
    table: [
      /^\| first apply \| \d+ ms \|/m,
      /^\| drift repair \(1 edited, 1 deleted\) \| \d+ ms \|/m,
      /^(cf-agent not installed: |\| this build ÷ cf-agent \(medians\) \|)/m,
    ],
    boundS: 300,
  }],
];

const config = JSON.parse(await Deno.readTextFile(join(REPO, "deno.json")));
const tasks = config.tasks as Record<string, string>;
const benchTasks = Object.keys(tasks).filter((name) =>
  name.startsWith("bench") || tasks[name].includes("tests/bench/")
);

Deno.test("bench smoke: every bench task in deno.json has a smoke form", () => {
  assert.deepEqual(benchTasks.sort(), Object.keys(SMOKE).sort());
});

for (const [task, smoke] of [...Object.entries(SMOKE), ...MODES]) {
  const args = smoke.args();
  Deno.test({
    name: root
      ? `bench smoke: deno task ${task} ${args.join(" ")} runs and prints its table`
      : `bench smoke: deno task ${task} (skipped: needs root: ${smoke.root})`,
    ignore: !root,
    async fn() {
      // GNU timeout signals the whole process group: the task, the bench and what it started.
      const out = await new Deno.Command("timeout", {
        args: ["--kill-after=30", String(smoke.boundS), Deno.execPath(), "task", task, ...args],
        cwd: REPO,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        env: { NO_COLOR: "1" },
      }).output();
      const stdout = new TextDecoder().decode(out.stdout);
      const stderr = new TextDecoder().decode(out.stderr);
      const said = `stdout:\n${stdout.slice(-4000)}\nstderr:\n${stderr.slice(-4000)}`;
      assert.equal(out.code, 0, `deno task ${task} exited ${out.code}\n${said}`);
      for (const line of smoke.table) {
        assert.match(stdout, line, `no ${line} in its table\n${said}`);
      }
      if (task === "bench:fleet") {
        const left = await leftovers(labPrefix);
        assert.ok(isClean(left), `the fleet bench left: ${JSON.stringify(left, null, 2)}`);
      }
    },
  });
}
