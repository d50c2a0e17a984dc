/**
 * `deno task bench`: the cost of applying, re-applying and repairing a
 * workload of 50 directories, 500 small files and 20 files of 64 KiB, as a
 * fresh CLI process each time (Deno start-up included), plus the in-process
 * no-op reconcile that the drift timer pays. Prints a table; `--write FILE`
 * also saves it with a description of the machine. Never run by the tests.
 */
import { posix } from "node:path";
import { parseArgs } from "node:util";
import { openEngine } from "../../src/engine/mod.ts";
import { applyDeclaration } from "../../src/engine/apply.ts";
import { parseDeclaration } from "../../src/engine/parse.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";

const REPO = new URL("../..", import.meta.url).pathname;
const { values } = parseArgs({
  args: Deno.args,
  options: { runs: { type: "string" }, write: { type: "string" } },
});
const RUNS = Number(values.runs ?? 7);

interface Sample {
  ms: number;
  rssKiB: number;
}

function workload(root: string): unknown[] {
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
  const big = "x".repeat(64 * 1024 - 1) + "\n";
  for (let f = 0; f < 20; f++) {
    resources.push({
      type: "file",
      id: `big-${f}`,
      path: `${root}/d${f}/big-${f}.bin`,
      content: big,
      mode: "0600",
      ...attrs,
    });
  }
  return resources;
}

async function hostFlags(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(posix.join(REPO, "deno.json")));
  return (config.tasks.host as string).split(/\s+/).filter((w) =>
    w.startsWith("--allow-") || w.startsWith("--deny-")
  );
}

/** Run the CLI once under /usr/bin/time, returning wall time and peak RSS. */
async function runCli(
  program: string[],
  args: string[],
  env: Record<string, string>,
): Promise<Sample> {
  const t0 = performance.now();
  const out = await new Deno.Command("/usr/bin/time", {
    args: ["-f", "%M", ...program, ...args],
    env,
    stdout: "null",
    stderr: "piped",
  }).output();
  const ms = performance.now() - t0;
  const stderr = new TextDecoder().decode(out.stderr).trim().split("\n");
  if (!out.success) throw new Error(`the host failed: ${stderr.join("\n")}`);
  return { ms, rssKiB: Number(stderr.at(-1)) };
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function benchForm(label: string, program: string[]): Promise<string[]> {
  const rows: Record<string, Sample[]> = {
    "first apply": [],
    "no-op re-apply": [],
    "drift repair (25 edited, 5 deleted)": [],
  };
  for (let run = 0; run < RUNS; run++) {
    const dir = await Deno.makeTempDir({ prefix: "nox-bench-" });
    const root = `${dir}/root`;
    await Deno.mkdir(root);
    await Deno.writeTextFile(`${dir}/host.json`, JSON.stringify({ managedRoots: [root] }));
    const decl = `${dir}/decl.json`;
    await Deno.writeTextFile(decl, JSON.stringify({ version: 1, resources: workload(root) }));
    const env = {
      NOX_MESH_HOST_STATE_DIR: `${dir}/state`,
      NOX_MESH_HOST_CONFIG: `${dir}/host.json`,
    };
    const args = ["apply", "--quiet", decl];
    rows["first apply"].push(await runCli(program, args, env));
    rows["no-op re-apply"].push(await runCli(program, args, env));
    for (let f = 0; f < 25; f++) {
      await Deno.writeTextFile(`${root}/d${f % 50}/small-${f}.conf`, "edited\n");
    }
    for (let f = 100; f < 105; f++) await Deno.remove(`${root}/d${f % 50}/small-${f}.conf`);
    rows["drift repair (25 edited, 5 deleted)"].push(await runCli(program, args, env));
    await Deno.remove(dir, { recursive: true });
  }
  return Object.entries(rows).map(([name, samples]) =>
    `| ${label} | ${name} | ${median(samples.map((s) => s.ms)).toFixed(0)} ms | ` +
    `${(Math.max(...samples.map((s) => s.rssKiB)) / 1024).toFixed(1)} MiB |`
  );
}

/** The drift timer's cost: a no-op reconcile inside a running process. */
async function inProcessNoop(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "nox-bench-" });
  const root = `${dir}/root`;
  await Deno.mkdir(root);
  await Deno.writeTextFile(`${dir}/host.json`, JSON.stringify({ managedRoots: [root] }));
  using host = await openEngine({
    stateDir: `${dir}/state`,
    configPath: `${dir}/host.json`,
    providers: () => Promise.resolve({ fs: posixFileSystem() }),
  });
  const text = JSON.stringify({ version: 1, resources: workload(root) });
  const options = { managedRoots: [root], own: host.config.own };
  await applyDeclaration(host, await parseDeclaration(text, options), {
    source: "file",
    origin: "bench",
  });
  const times: number[] = [];
  for (let i = 0; i < RUNS * 3; i++) {
    const t0 = performance.now();
    const report = await applyDeclaration(host, await parseDeclaration(text, options), {
      source: "file",
      origin: "bench",
    });
    times.push(performance.now() - t0);
    if (report.counts.changed !== 0) throw new Error("the no-op reconcile changed something");
  }
  await Deno.remove(dir, { recursive: true });
  return `| in-process | no-op reconcile (parse + check 570 resources + record) | ${
    median(times).toFixed(1)
  } ms | - |`;
}

async function bundle(): Promise<string> {
  const out = `${await Deno.makeTempDir({ prefix: "nox-bench-" })}/nox-mesh-host.js`;
  const result = await new Deno.Command(Deno.execPath(), {
    args: ["bundle", "--quiet", "--output", out, posix.join(REPO, "mod.ts")],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!result.success) {
    throw new Error(`deno bundle failed: ${new TextDecoder().decode(result.stderr)}`);
  }
  return out;
}

const flags = await hostFlags();
const lines = [
  "| form | operation | median wall | peak RSS |",
  "|---|---|---|---|",
  ...await benchForm("source (deno run mod.ts)", [
    Deno.execPath(),
    "run",
    "--quiet",
    ...flags,
    posix.join(REPO, "mod.ts"),
  ]),
  ...await benchForm("bundle (deno run one .js)", [
    Deno.execPath(),
    "run",
    "--quiet",
    ...flags,
    await bundle(),
  ]),
  await inProcessNoop(),
  ...await floors(),
];
/**
 * What no host can beat here, for reading the rows above: starting the runtime
 * with the bundle (`version`), and writing the workload's 520 files with one
 * fsync each (the durability every atomic write pays) and nothing else.
 */
async function floors(): Promise<string[]> {
  const program = [Deno.execPath(), "run", "--quiet", ...flags, await bundle()];
  const starts: Sample[] = [];
  for (let run = 0; run < RUNS; run++) starts.push(await runCli(program, ["version"], {}));
  const syncs: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const dir = await Deno.makeTempDir({ prefix: "nox-bench-" });
    const data = new TextEncoder().encode("key = value\n");
    const t0 = performance.now();
    for (let f = 0; f < 520; f++) {
      using file = Deno.openSync(`${dir}/f${f}`, { write: true, createNew: true });
      file.writeSync(data);
      file.syncSync();
    }
    syncs.push(performance.now() - t0);
    await Deno.remove(dir, { recursive: true });
  }
  return [
    `| floor | runtime start + bundle load (\`version\`) | ${
      median(starts.map((s) => s.ms)).toFixed(0)
    } ms | ` +
    `${(Math.max(...starts.map((s) => s.rssKiB)) / 1024).toFixed(1)} MiB |`,
    `| floor | 520 small files written with one fsync each, nothing else | ${
      median(syncs).toFixed(0)
    } ms | - |`,
  ];
}

// Deno refuses to read /proc without --allow-all, so ask grep.
const cpuinfo = await new Deno.Command("grep", {
  args: ["-m1", "model name", "/proc/cpuinfo"],
  stdout: "piped",
}).output();
const cpu = new TextDecoder().decode(cpuinfo.stdout).split(":")[1]?.trim() || "unknown CPU";
const machine =
  `${navigator.hardwareConcurrency} cores (${cpu}), ${Deno.build.target}, Deno ${Deno.version.deno}, ` +
  `median of ${RUNS} runs, ${new Date().toISOString().slice(0, 10)}`;
const table = `Workload: 50 directories + 500 small files + 20 files of 64 KiB. ${machine}.\n\n${
  lines.join("\n")
}\n`;
console.log(table);
if (values.write) await Deno.writeTextFile(values.write, table);
