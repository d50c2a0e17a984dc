/**
 * `deno task bench`: what the packaged host costs, against the runtime's floor F measured in
 * the same run. The host is built as the tarball builds it (packaging/build.ts, bundled form)
 * and run with exactly the flags the tarball's shim passes; F is Deno running an empty script
 * under those same flags. Each CLI row is a fresh process; medians of --runs (7), peak RSS
 * from /usr/bin/time (the median of the runs' peaks). The workload: 50 directories + 500
 * small files, then the same + 20 files of 64 KiB, under a scratch managed root in /var/lib
 * (the tarball's flags write only its managed roots). Prints a table with F, the host's
 * medians, the differences from F and the issue 14 targets; `--write FILE` also saves it with
 * the machine, the commit and the load average. Never run by the tests. */
import { parseArgs } from "node:util";
import { applyText, openEngine } from "../../src/engine/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { build } from "../../packaging/build.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { runs: { type: "string" }, write: { type: "string" } },
});
const RUNS = Number(values.runs ?? 7);

interface Sample {
  ms: number;
  rssKiB: number;
}

function workload(root: string, big: boolean): unknown[] {
  const resources: unknown[] = [];
  const attrs = { owner: "root", group: "root" };
  for (let d = 0; d < 50; d++) {
    resources.push({
      type: "directory",
      id: `dir-${d}`,
      path: `${root}/d${d}`,
      mode: "0755",
      ...attrs,
    });
  }
  for (let f = 0; f < 500; f++) {
    resources.push({
      type: "file",
      id: `small-${f}`,
      path: `${root}/d${f % 50}/small-${f}.conf`,
      content: `# generated ${f}\nkey = value-${f}\n`,
      mode: "0644",
      ...attrs,
    });
  }
  if (big) {
    const content = "x".repeat(64 * 1024 - 1) + "\n";
    for (let f = 0; f < 20; f++) {
      resources.push({
        type: "file",
        id: `big-${f}`,
        path: `${root}/d${f}/big-${f}.bin`,
        content,
        mode: "0600",
        ...attrs,
      });
    }
  }
  return resources;
}

/** Run a program once under /usr/bin/time, returning wall time and peak RSS. */
async function timed(argv: string[], env: Record<string, string> = {}): Promise<Sample> {
  const t0 = performance.now();
  const out = await new Deno.Command("/usr/bin/time", {
    args: ["-f", "%M", ...argv],
    env,
    stdout: "null",
    stderr: "piped",
  }).output();
  const ms = performance.now() - t0;
  const stderr = new TextDecoder().decode(out.stderr).trim().split("\n");
  if (!out.success) throw new Error(`${argv.at(-1)} failed: ${stderr.join("\n")}`);
  return { ms, rssKiB: Number(stderr.at(-1)) };
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

async function applyRows(host: string[], big: boolean, rows: Rows): Promise<void> {
  const suffix = big ? ", + 20 × 64 KiB" : "";
  const { dir, root, env } = await scratch();
  try {
    const decl = `${dir}/decl.json`;
    await Deno.writeTextFile(decl, JSON.stringify({ version: 1, resources: workload(root, big) }));
    const argv = [...host, "apply", "--quiet", decl];
    (rows[`first apply${suffix}`] ??= []).push(await timed(argv, env));
    (rows[`no-op re-apply${suffix}`] ??= []).push(await timed(argv, env));
    for (let f = 0; f < 25; f++) {
      await Deno.writeTextFile(`${root}/d${f % 50}/small-${f}.conf`, "edited\n");
    }
    for (let f = 100; f < 105; f++) await Deno.remove(`${root}/d${f % 50}/small-${f}.conf`);
    (rows[`drift repair (25 edited, 5 deleted)${suffix}`] ??= []).push(await timed(argv, env));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The drift timer's cost: admit + apply of a converged declaration inside a running process. */
async function inProcessNoop(): Promise<number> {
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
    const times: number[] = [];
    for (let i = 0; i < RUNS * 3; i++) {
      const t0 = performance.now();
      const report = await applyText(engine, text, options);
      times.push(performance.now() - t0);
      if (report.counts.changed !== 0) throw new Error("the no-op reconcile changed something");
    }
    return median(times);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** `run` holding a converged store of the 500-file workload (no identity, so no link): RSS. */
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
      stderr: "null",
    }).spawn();
    try {
      await new Promise((r) => setTimeout(r, 5000));
      const status = await Deno.readTextFile(`/proc/${child.pid}/status`);
      return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
    } finally {
      child.kill("SIGTERM");
      await child.status;
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function text(argv: string[]): Promise<string> {
  const out = await new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped" }).output();
  return new TextDecoder().decode(out.stdout).trim();
}

// The packaged form: the tarball's bundled build, run as its shim runs it.
const work = await Deno.makeTempDir({ prefix: "nox-bench-" });
const built = await build({ os: "tarball", form: "bundled", out: `${work}/dist` });
// The shim's argv without its runtime path and bundle path (they are where an install puts them):
// this Deno (the version the tarball carries) and the bundle just built.
const runWith = [Deno.execPath(), ...built.command.slice(1, -1)];
const host = [...runWith, `${built.dir}/nox-mesh-host.js`];
const empty = `${work}/empty.js`;
await Deno.writeTextFile(empty, "");
const floor = [...runWith, empty];
// What any apply loads before its first step: the file system's descriptor calls and SQLite.
const builtins = `${work}/builtins.js`;
await Deno.writeTextFile(builtins, 'import "node:fs";\nimport "node:sqlite";\n');
const floorBuiltins = [...runWith, builtins];

const rows: Rows = {};
for (let run = 0; run < RUNS; run++) {
  (rows["F: empty script, same flags"] ??= []).push(await timed(floor));
  (rows["F + node:fs + node:sqlite loaded (what any apply needs)"] ??= []).push(
    await timed(floorBuiltins),
  );
  (rows["version"] ??= []).push(await timed([...host, "version"]));
  await applyRows(host, false, rows);
  await applyRows(host, true, rows);
}
const inProcess = await inProcessNoop();
const idleKiB = await runIdleRss(host);
await Deno.remove(work, { recursive: true });

/** Issue 14's targets: time over F (ms) and peak RSS (MiB). */
const TARGETS: Record<string, { overF?: number; rssMiB?: number }> = {
  "version": { overF: 10 },
  "first apply": { overF: 200, rssMiB: 40 },
  "no-op re-apply": { overF: 45, rssMiB: 40 },
  "drift repair (25 edited, 5 deleted)": { overF: 70, rssMiB: 40 },
  "first apply, + 20 × 64 KiB": { overF: 300, rssMiB: 48 },
  "no-op re-apply, + 20 × 64 KiB": { overF: 60, rssMiB: 48 },
  "drift repair (25 edited, 5 deleted), + 20 × 64 KiB": { rssMiB: 48 },
};

const F = median(rows["F: empty script, same flags"].map((s) => s.ms));
const mib = (kib: number) => (kib / 1024).toFixed(1);
const lines = [
  "| measure | median | − F | peak RSS (median) | target | met |",
  "|---|---|---|---|---|---|",
];
for (const [name, samples] of Object.entries(rows)) {
  const ms = median(samples.map((s) => s.ms));
  // The median of the runs' peaks: the very first start after a build also writes Deno's
  // code cache for the bundle (once per installed version, ~14 MiB more), which a max shows.
  const rss = median(samples.map((s) => s.rssKiB));
  const target = TARGETS[name] ?? {};
  const wants = [
    target.overF !== undefined ? `F + ${target.overF} ms` : "",
    target.rssMiB !== undefined ? `≤ ${target.rssMiB} MiB` : "",
  ].filter(Boolean);
  const met = [
    target.overF === undefined || ms - F <= target.overF,
    target.rssMiB === undefined || rss / 1024 <= target.rssMiB,
  ].every(Boolean);
  const isFloor = name.startsWith("F:");
  lines.push(
    `| ${name} | ${ms.toFixed(0)} ms | ${isFloor ? "-" : `${(ms - F).toFixed(0)} ms`} | ${
      mib(rss)
    } MiB | ${wants.join(", ") || "-"} | ${wants.length ? (met ? "yes" : "no") : "-"} |`,
  );
}
lines.push(
  `| in-process no-op (admit + apply 550 resources, what the drift timer pays) | ${
    inProcess.toFixed(1)
  } ms | - | - | ≤ 10 ms | ${inProcess <= 10 ? "yes" : "no"} |`,
  `| \`run\` idle RSS (store of 550 resources, no link) | - | - | ${
    mib(idleKiB)
  } MiB | ≤ 45 MiB | ${idleKiB / 1024 <= 45 ? "yes" : "no"} |`,
);

// Deno refuses to read /proc without --allow-all, so ask grep.
const cpu = (await text(["grep", "-m1", "model name", "/proc/cpuinfo"])).split(":")[1]?.trim();
const commit = await text([
  "git",
  "-C",
  new URL("../..", import.meta.url).pathname,
  "rev-parse",
  "--short",
  "HEAD",
]);
const load = (await text(["cat", "/proc/loadavg"])).split(" ").slice(0, 3).join(" ");
const machine =
  `${navigator.hardwareConcurrency} cores (${cpu ?? "unknown CPU"}), ${Deno.build.target}, ` +
  `Deno ${Deno.version.deno}, commit ${commit}, load average ${load} at the end, ` +
  `median of ${RUNS} runs, ${new Date().toISOString().slice(0, 10)}`;
const table = `Packaged form (tarball, bundled), ${machine}.\n\n${lines.join("\n")}\n`;
console.log(table);
if (values.write) await Deno.writeTextFile(values.write, table);
