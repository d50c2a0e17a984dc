/**
 * `deno task bench`: what the packaged host costs, against the runtime's floor F measured in
 * the same run. The host is built as the tarball builds it (packaging/build.ts, bundled form)
 * and run with exactly the flags the tarball's shim passes; F is Deno running an empty script
 * under those same flags. Each CLI row is a fresh process; medians of --runs (7) of the wall
 * time, the CPU time (all threads: perf's task-clock where perf runs, else /usr/bin/time's user
 * + system, to 10 ms) and the peak RSS (/usr/bin/time). On a shared machine the CPU time moves
 * far less than the wall time. The workload: 50 directories + 500 small files, then the same
 * + 20 files of 64 KiB, under a scratch managed root in /var/lib (the tarball's flags write only
 * its managed roots): a first apply; a no-op right after it (its files changed less than a
 * change-time step before: every one is read); a no-op once they are older (identities known:
 * none is read); a drift repair. Prints a table with F, the host's medians, the differences
 * from F and issue 28's targets; `--write FILE` also saves it with the machine, the commit and
 * the load average. `--compare DIR` alternates, run by run, with another bundled tarball build
 * (DIR holds its build.json, e.g. a build of another commit) and prints its table too.
 * `--files N` scales the workload (N small files, N/10 directories, N/25 big files; the targets
 * hold only for 500), `--settle S` is how long `run` is left before its RSS is read (5).
 * `--peers` runs only the small workload (first apply, no-op, drift repair: issue 37's W1) and
 * the same with cf-agent where it is installed (./_peers.ts), alternated run by run, and prints
 * the ratios to it with issue 37's targets; "cf-agent not installed" otherwise. The full run
 * is never part of the tests; tests/bench/bench_smoke_test.ts runs a smoke form (one run of 20
 * files, and one of --peers).
 */
import { parseArgs } from "node:util";
import { applyText, openEngine } from "../../src/engine/mod.ts";
import { FULL_READ_BACK_EVERY } from "../../src/engine/apply.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { build } from "../../packaging/build.ts";
import { benchContext } from "./_context.ts";
import { cfAgent, cfArgv, cfPolicy, type W1Item, writePolicy } from "./_peers.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    runs: { type: "string" },
    files: { type: "string" },
    settle: { type: "string" },
    write: { type: "string" },
    compare: { type: "string" },
    peers: { type: "boolean" },
  },
});
const RUNS = Number(values.runs ?? 7);
/** The workload: small files, directories they spread over, 64 KiB files, drift. */
const FILES = Number(values.files ?? 500);
const DIRS = Math.max(1, Math.round(FILES / 10));
const BIG = Math.max(1, Math.round(FILES / 25));
const EDITED = Math.max(1, Math.round(FILES / 20));
const DELETED = Math.max(1, Math.round(FILES / 100));
const SETTLE_S = Number(values.settle ?? 5);
/** Issue 14's targets are for the full workload only. */
const FULL = FILES === 500;
const RESOURCES = DIRS + FILES;
const DRIFT = `drift repair (${EDITED} edited, ${DELETED} deleted)`;
const WITH_BIG = `, + ${BIG} × 64 KiB`;

interface Sample {
  ms: number;
  rssKiB: number;
  /** CPU time of the process and its threads (ms). */
  cpuMs: number;
}

const smallPath = (root: string, f: number) => `${root}/d${f % DIRS}/small-${f}.conf`;
const smallContent = (f: number) => `# generated ${f}\nkey = value-${f}\n`;

function workload(root: string, big: boolean): unknown[] {
  const resources: unknown[] = [];
  const attrs = { owner: "root", group: "root" };
  for (let d = 0; d < DIRS; d++) {
    resources.push({
      type: "directory",
      id: `dir-${d}`,
      path: `${root}/d${d}`,
      mode: "0755",
      ...attrs,
    });
  }
  for (let f = 0; f < FILES; f++) {
    resources.push({
      type: "file",
      id: `small-${f}`,
      path: smallPath(root, f),
      content: smallContent(f),
      mode: "0644",
      ...attrs,
    });
  }
  if (big) {
    const content = "x".repeat(64 * 1024 - 1) + "\n";
    for (let f = 0; f < BIG; f++) {
      resources.push({
        type: "file",
        id: `big-${f}`,
        path: `${root}/d${f % DIRS}/big-${f}.bin`,
        content,
        mode: "0600",
        ...attrs,
      });
    }
  }
  return resources;
}

/**
 * Whether `perf stat` counts task-clock here (it gives CPU time to the microsecond). perf is
 * not in lab/setup.sh's list (the tests do not need it): where it is missing the CPU time
 * comes from /usr/bin/time alone. A missing program fails the spawn synchronously.
 */
const PERF = await (async () => {
  try {
    const probe = new Deno.Command("perf", {
      args: ["stat", "-x,", "-e", "task-clock", "true"],
      stdout: "null",
      stderr: "null",
    });
    return (await probe.output()).success;
  } catch {
    return false;
  }
})();

/**
 * Run a program once under /usr/bin/time (and perf stat where it runs), returning wall time,
 * peak RSS and CPU time. The wall time includes time's and perf's own start, which F pays too.
 */
async function timed(argv: string[], env: Record<string, string> = {}): Promise<Sample> {
  const perfOut = PERF ? await Deno.makeTempFile({ prefix: "nox-bench-perf-" }) : undefined;
  const time = ["/usr/bin/time", "-f", "%M %U %S", ...argv];
  const command = perfOut
    ? ["perf", "stat", "-x,", "-e", "task-clock", "-o", perfOut, "--", ...time]
    : time;
  const t0 = performance.now();
  const out = await new Deno.Command(command[0], {
    args: command.slice(1),
    env,
    stdout: "null",
    stderr: "piped",
  }).output();
  const ms = performance.now() - t0;
  const stderr = new TextDecoder().decode(out.stderr).trim().split("\n");
  if (!out.success) throw new Error(`${argv.at(-1)} failed: ${stderr.join("\n")}`);
  const [rss, user, system] = stderr.at(-1)!.split(" ").map(Number);
  let cpuMs = (user + system) * 1000;
  if (perfOut) {
    const line = (await Deno.readTextFile(perfOut)).split("\n").find((l) =>
      l.includes("task-clock")
    );
    await Deno.remove(perfOut);
    const clock = Number(line?.split(",")[0]);
    if (Number.isFinite(clock)) cpuMs = clock;
  }
  return { ms, rssKiB: rss, cpuMs };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function scratch(): Promise<{ dir: string; root: string; env: Record<string, string> }> {
  const dir = await Deno.makeTempDir({ dir: "/var/lib", prefix: "nox-bench-" });
  const root = `${dir}/root`;
  await Deno.mkdir(root);
  await Deno.writeTextFile(`${dir}/host.json`, JSON.stringify({ managedRoots: [root] }));
  const env = { NOX_MESH_HOST_STATE_DIR: `${dir}/state`, NOX_MESH_HOST_CONFIG: `${dir}/host.json` };
  return { dir, root, env };
}

type Rows = Record<string, Sample[]>;

/** The rows' names: the no-op the targets hold to is the one with identities known. */
const NOOP_FRESH = "no-op re-apply, the first (reads every file)";
const NOOP = "no-op re-apply (identities known)";

/**
 * Wait until the files under `root` changed more than a change-time step (Deno reports change
 * times to the second) and the clock margin ago: an apply then trusts what it reads.
 */
async function settle(root: string): Promise<void> {
  let latest = 0;
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(dir)) {
      const info = Deno.lstatSync(`${dir}/${e.name}`);
      latest = Math.max(latest, info.ctime?.getTime() ?? 0);
      if (e.isDirectory) walk(`${dir}/${e.name}`);
    }
  };
  walk(root);
  const at = Math.floor(latest / 1000) * 1000 + 1000 + 100;
  while (Date.now() < at) await new Promise((r) => setTimeout(r, at - Date.now() + 5));
}

async function applyRows(host: string[], big: boolean, rows: Rows): Promise<void> {
  const suffix = big ? WITH_BIG : "";
  const { dir, root, env } = await scratch();
  try {
    const decl = `${dir}/decl.json`;
    await Deno.writeTextFile(decl, JSON.stringify({ version: 1, resources: workload(root, big) }));
    const argv = [...host, "apply", "--quiet", decl];
    (rows[`first apply${suffix}`] ??= []).push(await timed(argv, env));
    await settle(root);
    (rows[`${NOOP_FRESH}${suffix}`] ??= []).push(await timed(argv, env));
    (rows[`${NOOP}${suffix}`] ??= []).push(await timed(argv, env));
    for (let f = 0; f < EDITED; f++) await Deno.writeTextFile(smallPath(root, f), "edited\n");
    const deleted = Array.from({ length: DELETED }, (_, i) => Math.floor(FILES / 5) + i);
    for (const f of deleted) await Deno.remove(smallPath(root, f));
    (rows[`${DRIFT}${suffix}`] ??= []).push(await timed(argv, env));
    // The repair is a real one: what was edited and deleted is as declared again.
    for (const f of [0, EDITED - 1, ...deleted]) {
      const now = await Deno.readTextFile(smallPath(root, f)).catch(() => "(missing)");
      if (now !== smallContent(f)) {
        throw new Error(`drift repair left ${smallPath(root, f)} as ${JSON.stringify(now)}`);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The same rows as {@link applyRows} (small workload), made by cf-agent. */
async function cfRows(agent: string, rows: Rows): Promise<void> {
  const { dir, root } = await scratch();
  try {
    const items = workload(root, false) as W1Item[];
    const argv = cfArgv(agent, await writePolicy(dir, "w1", cfPolicy(items)));
    (rows["first apply"] ??= []).push(await timed(argv));
    await settle(root);
    (rows[NOOP] ??= []).push(await timed(argv));
    for (let f = 0; f < EDITED; f++) await Deno.writeTextFile(smallPath(root, f), "edited\n");
    const deleted = Array.from({ length: DELETED }, (_, i) => Math.floor(FILES / 5) + i);
    for (const f of deleted) await Deno.remove(smallPath(root, f));
    (rows[DRIFT] ??= []).push(await timed(argv));
    for (const f of [0, EDITED - 1, ...deleted]) {
      const now = await Deno.readTextFile(smallPath(root, f)).catch(() => "(missing)");
      if (now !== smallContent(f)) {
        throw new Error(`cf-agent's repair left ${smallPath(root, f)} as ${JSON.stringify(now)}`);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * The drift timer's cost: admit + apply of a converged declaration inside a running process,
 * once the files are old enough for their identities to be trusted: the median of the passes
 * that read no file, and of those that read every file (every 6th, fullReadBackEvery).
 */
async function inProcessNoop(): Promise<{ known: number; full: number }> {
  const { dir, root, env } = await scratch();
  try {
    using engine = await openEngine({
      stateDir: env.NOX_MESH_HOST_STATE_DIR,
      configPath: env.NOX_MESH_HOST_CONFIG,
      providers: () => Promise.resolve({ fs: posixFileSystem() }),
    });
    const text = JSON.stringify({ version: 1, resources: workload(root, false) });
    const options = { source: "file", origin: "bench" } as const;
    await applyText(engine, text, options);
    await settle(root);
    const known: number[] = [];
    const full: number[] = [];
    for (let i = 0; i < RUNS * 6; i++) {
      const passes = Number(engine.store.meta("read_back_passes") ?? "0") + 1;
      const t0 = performance.now();
      const report = await applyText(engine, text, options);
      const ms = performance.now() - t0;
      if (report.counts.changed !== 0) throw new Error("the no-op reconcile changed something");
      // The first pass after the settle reads every file too (it records their identities).
      if (i > 0) (passes >= engine.config.fullReadBackEvery ? full : known).push(ms);
    }
    return { known: median(known), full: median(full) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * `run` holding a converged store of the small workload (no identity, so no link): its RSS
 * `SETTLE_S` after its start reconcile has converged (it must still be running then).
 */
async function runIdleRss(host: string[]): Promise<number> {
  const { dir, root, env } = await scratch();
  try {
    const decl = `${dir}/decl.json`;
    await Deno.writeTextFile(
      decl,
      JSON.stringify({ version: 1, resources: workload(root, false) }),
    );
    await timed([...host, "apply", "--quiet", decl], env);
    const child = new Deno.Command(host[0], {
      args: [...host.slice(1), "run"],
      env,
      stdout: "null",
      stderr: "piped",
    }).spawn();
    let log = "";
    let exited = false;
    child.status.then(() => exited = true);
    (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of child.stderr) log += decoder.decode(chunk, { stream: true });
    })();
    try {
      const deadline = Date.now() + 60_000;
      while (!/apply \(start, [^)]*\): converged/.test(log)) {
        if (exited || Date.now() > deadline) {
          throw new Error(`run did not converge on start${exited ? " (it exited)" : ""}:\n${log}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, SETTLE_S * 1000));
      const status = await Deno.readTextFile(`/proc/${child.pid}/status`).catch(() => "");
      const rss = /VmRSS:\s+(\d+)/.exec(status)?.[1];
      if (exited || rss === undefined) throw new Error(`run exited while idle:\n${log}`);
      return Number(rss);
    } finally {
      child.kill("SIGTERM");
      await child.status;
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const context = await benchContext();
// The packaged form: the tarball's bundled build, run as its shim runs it.
const work = await Deno.makeTempDir({ prefix: "nox-bench-" });
const built = await build({ os: "tarball", form: "bundled", out: `${work}/dist` });
/**
 * The shim's argv without its runtime path and bundle path (they are where an install puts
 * them): this Deno (the version the tarball carries) and the bundle of `b`.
 */
const hostOf = (b: { dir: string; command: string[] }) => [
  Deno.execPath(),
  ...b.command.slice(b.command.indexOf("run"), -1),
  `${b.dir}/nox-mesh-host.js`,
];
const runWith = [Deno.execPath(), ...built.command.slice(built.command.indexOf("run"), -1)];
const host = hostOf(built);
/** Another build to alternate with (--compare DIR: its build.json). */
const other = values.compare
  ? hostOf({
    ...JSON.parse(await Deno.readTextFile(`${values.compare}/build.json`)),
    dir: values.compare,
  })
  : undefined;
const empty = `${work}/empty.js`;
await Deno.writeTextFile(empty, "");
const floor = [...runWith, empty];
// What writing a file loads: the file system's descriptor calls (node:fs) and SQLite.
const builtins = `${work}/builtins.js`;
await Deno.writeTextFile(builtins, 'import "node:fs";\nimport "node:sqlite";\n');
const floorBuiltins = [...runWith, builtins];

const FLOOR = "F: empty script, same flags";
const CF_FLOOR = "cf-agent, empty policy";
const rows: Rows = {};
const mainRows = rows;
const compared: Rows = {};
const peers: Rows = {};
const agent = values.peers ? await cfAgent() : undefined;
let inProcess: { known: number; full: number } | undefined;
let idleKiB: number | undefined;
try {
  const empty = agent ? cfArgv(agent, await writePolicy(work, "empty", cfPolicy([]))) : [];
  for (let run = 0; run < RUNS; run++) {
    (rows[FLOOR] ??= []).push(await timed(floor));
    (rows["F + node:fs + node:sqlite loaded (what writing a file loads)"] ??= []).push(
      await timed(floorBuiltins),
    );
    const measured: [string[], Rows][] = [[host, rows], ...(other ? [[other, compared]] : [])] as [
      string[],
      Rows,
    ][];
    for (const [argv, into] of measured) {
      if (values.peers) {
        await applyRows(argv, false, into);
        continue;
      }
      (into.version ??= []).push(await timed([...argv, "version"]));
      await applyRows(argv, false, into);
      await applyRows(argv, true, into);
    }
    if (agent) {
      (peers[CF_FLOOR] ??= []).push(await timed(empty));
      await cfRows(agent, peers);
    }
  }
  if (!values.peers) {
    inProcess = await inProcessNoop();
    idleKiB = await runIdleRss(host);
  }
} finally {
  await Deno.remove(work, { recursive: true });
}

/**
 * Issue 28's targets for the cold CLI (the full workload only), and issue 14's for `version`:
 * time over F (ms) and peak RSS (MiB).
 */
const TARGETS: Record<string, { overF?: number; rssMiB?: number }> = FULL
  ? {
    "version": { overF: 10 },
    "first apply": { overF: 200, rssMiB: 45 },
    [NOOP]: { overF: 45, rssMiB: 45 },
    [DRIFT]: { overF: 70, rssMiB: 45 },
    [`first apply${WITH_BIG}`]: { rssMiB: 45 },
    [`${NOOP}${WITH_BIG}`]: { overF: 45, rssMiB: 45 },
    [`${DRIFT}${WITH_BIG}`]: { overF: 70, rssMiB: 45 },
  }
  : {};

const mib = (kib: number) => (kib / 1024).toFixed(1);
const HEAD = [
  "| measure | median | − F | peak RSS (median) | target | met | CPU | CPU − F |",
  "|---|---|---|---|---|---|---|---|",
];

/**
 * One table: each row's medians, its difference from the floor row (F, or cf-agent's own
 * floor for cf-agent's rows) and the targets (the host's only).
 */
function table(rows: Rows, floorName = FLOOR): string[] {
  // --compare's rows have no floor of their own: F is the same run's.
  const floorRows = rows[floorName] ?? mainRows[floorName];
  const F = median(floorRows.map((s) => s.ms));
  const Fcpu = median(floorRows.map((s) => s.cpuMs));
  const targets = floorName === FLOOR ? TARGETS : {};
  const lines = [...HEAD];
  for (const [name, samples] of Object.entries(rows)) {
    const ms = median(samples.map((s) => s.ms));
    const cpu = median(samples.map((s) => s.cpuMs));
    // The median of the runs' peaks: the very first start after a build also writes Deno's
    // code cache for the bundle (once per installed version, ~14 MiB more), which a max shows.
    const rss = median(samples.map((s) => s.rssKiB));
    const target = targets[name] ?? {};
    const wants = [
      target.overF !== undefined ? `F + ${target.overF} ms` : "",
      target.rssMiB !== undefined ? `≤ ${target.rssMiB} MiB` : "",
    ].filter(Boolean);
    const met = [
      target.overF === undefined || ms - F <= target.overF,
      target.rssMiB === undefined || rss / 1024 <= target.rssMiB,
    ].every(Boolean);
    const isFloor = name === floorName;
    lines.push(
      `| ${name} | ${ms.toFixed(0)} ms | ${isFloor ? "-" : `${(ms - F).toFixed(0)} ms`} | ${
        mib(rss)
      } MiB | ${wants.join(", ") || "-"} | ${wants.length ? (met ? "yes" : "no") : "-"} | ${
        cpu.toFixed(0)
      } ms | ${isFloor ? "-" : `${(cpu - Fcpu).toFixed(0)} ms`} |`,
    );
  }
  return lines;
}

const lines = table(rows);
const judge = (target: string, met: boolean) =>
  FULL ? `${target} | ${met ? "yes" : "no"}` : "- | -";
if (inProcess !== undefined && idleKiB !== undefined) {
  lines.push(
    `| in-process no-op (admit + apply ${RESOURCES} resources, what the drift timer pays) | ${
      inProcess.known.toFixed(1)
    } ms | - | - | ${judge("≤ 10 ms", inProcess.known <= 10)} | - | - |`,
    `| in-process full read-back (every ${FULL_READ_BACK_EVERY}th pass) | ${
      inProcess.full.toFixed(1)
    } ms | - | - | - | - | - | - |`,
    `| \`run\` idle RSS (store of ${RESOURCES} resources, no link) | - | - | ${
      mib(idleKiB)
    } MiB | ${judge("≤ 45 MiB", idleKiB / 1024 <= 45)} | - | - |`,
  );
}

/** Issue 37's one-shot targets against cf-agent (W1), as host ÷ cf-agent of the medians. */
const PEER_TARGETS: [string, number][] = [[NOOP, 0.5], [DRIFT, 0.6], ["first apply", 1.0]];

function peerLines(host: Rows, label: string): string[] {
  const at = (r: Rows, name: string) => median(r[name].map((x) => x.ms));
  const cpu = (r: Rows, name: string) => median(r[name].map((x) => x.cpuMs));
  const out = [
    `| ${label} ÷ cf-agent (medians) | host | cf-agent | ratio | target | met | host CPU | ` +
    "cf-agent CPU |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const [name, target] of PEER_TARGETS) {
    const ratio = at(host, name) / at(peers, name);
    out.push(
      `| ${name} | ${at(host, name).toFixed(0)} ms | ${at(peers, name).toFixed(0)} ms | ${
        ratio.toFixed(2)
      } × | ≤ ${target.toFixed(1)} × | ${ratio <= target ? "yes" : "no"} | ${
        cpu(host, name).toFixed(0)
      } ms | ${cpu(peers, name).toFixed(0)} ms |`,
    );
  }
  return out;
}

const peerText = !values.peers
  ? ""
  : agent === undefined
  ? "\n\ncf-agent not installed: no comparison (apt-get install cfengine3, for this bench only)\n"
  : `\n\nThe same run, alternated run by run: cf-agent (${agent} -K -f), the same W1 workload; ` +
    `its floor is cf-agent with an empty policy\n\n${table(peers, CF_FLOOR).join("\n")}\n\n${
      peerLines(rows, "this build").join("\n")
    }\n${other ? `\n${peerLines(compared, values.compare!).join("\n")}\n` : ""}`;

const workloadLine =
  `workload: ${DIRS} directories + ${FILES} small files, then + ${BIG} × 64 KiB; ` +
  `median of ${RUNS} run${RUNS === 1 ? "" : "s"}${
    FULL ? "" : " (not the full workload: no targets)"
  }; CPU time by ${PERF ? "perf stat (task-clock)" : "/usr/bin/time (user + system)"}`;
const comparison = other
  ? `\n\nThe same run, alternated run by run: ${values.compare} (${
    JSON.parse(await Deno.readTextFile(`${values.compare}/build.json`)).version
  }, its own build)\n\n${table(compared).join("\n")}\n`
  : "";
const out = `Packaged form (tarball, bundled); ${workloadLine}\n${await context.line()}\n\n${
  lines.join("\n")
}\n${comparison}${peerText}`;
console.log(out);
if (values.write) await Deno.writeTextFile(values.write, out);
