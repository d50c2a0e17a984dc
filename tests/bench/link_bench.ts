/**
 * `deno task bench:link`: the link and run mode, measured on a real nats-server
 * on 127.0.0.1 (the stand-in control plane of lab/mesh) with the host in its
 * bundled form under the development permission set:
 *   - start-to-first-reconcile: process start until the start reconcile of the
 *     held declaration has completed (median of 5 starts);
 *   - push-to-applied: the control plane publishes a one-file declaration until
 *     the node's report of that apply arrives (200 pushes; p50, p99);
 *   - idle CPU of `run` over 60 s (default heartbeat), and idle RSS.
 * Prints a table with the targets; `--write FILE` also saves it.
 * Options: --pushes N (200), --idle SECONDS (60), --starts N (5), --deno-flag F (extra flag
 * for the host's deno, repeatable: to try V8 settings). Never run by the tests.
 */
import { posix } from "node:path";
import { parseArgs } from "node:util";
import { startLocalBroker } from "../../lab/mesh/broker.ts";
import { ControlPlane } from "../../lab/mesh/control.ts";
import { subjectsOf } from "../../src/link/subjects.ts";

const REPO = new URL("../..", import.meta.url).pathname;
const { values } = parseArgs({
  args: Deno.args,
  options: {
    pushes: { type: "string" },
    idle: { type: "string" },
    starts: { type: "string" },
    write: { type: "string" },
    /** An extra flag for the host's deno (repeatable), e.g. --v8-flags=--max-semi-space-size=1. */
    "deno-flag": { type: "string", multiple: true },
  },
});
const PUSHES = Number(values.pushes ?? 200);
const IDLE_S = Number(values.idle ?? 60);
const STARTS = Number(values.starts ?? 5);
const NODE = "bench-node";

async function hostFlags(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(posix.join(REPO, "deno.json")));
  return (config.tasks.host as string).split(/\s+/).filter((w) =>
    w.startsWith("--allow-") || w.startsWith("--deny-")
  );
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** CPU ticks (user + system) and RSS of a process, from /proc. */
async function usage(pid: number): Promise<{ ticks: number; rssKiB: number }> {
  const stat = (await Deno.readTextFile(`/proc/${pid}/stat`)).split(") ")[1].split(" ");
  const ticks = Number(stat[11]) + Number(stat[12]);
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { ticks, rssKiB };
}

const CLK_TCK = Number(
  new TextDecoder().decode(
    (await new Deno.Command("getconf", { args: ["CLK_TCK"] }).output()).stdout,
  )
    .trim(),
) || 100;

const dir = await Deno.makeTempDir({ prefix: "noxln-bench-" });
const broker = await startLocalBroker(posix.join(dir, "mesh"));
const control = await ControlPlane.open(posix.join(dir, "mesh"));
control.serveEnrolments();
const root = posix.join(dir, "root");
const stateDir = posix.join(dir, "state");
await Deno.mkdir(root);
await Deno.writeTextFile(
  posix.join(dir, "host.json"),
  JSON.stringify({ managedRoots: [root], bundle: posix.join(dir, "pkg", "substrate.lock") }),
);
const env = {
  NOX_MESH_HOST_STATE_DIR: stateDir,
  NOX_MESH_HOST_CONFIG: posix.join(dir, "host.json"),
};
const program = posix.join(dir, "nox-mesh-host.js");
const flags = [...await hostFlags(), ...(values["deno-flag"] ?? [])];
const lines: string[] = [];
const children = new Set<Deno.ChildProcess>();

function host(args: string[]): { child: Deno.ChildProcess; log: () => string } {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", ...flags, program, ...args],
    env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  children.add(child);
  child.status.then(() => children.delete(child));
  let text = "";
  (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) text += decoder.decode(chunk, { stream: true });
  })();
  return { child, log: () => text };
}

async function waitFor(what: string, probe: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

function declaration(serial: number): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({
    version: 1,
    node: NODE,
    serial,
    resources: [{
      type: "file",
      id: "f",
      path: `${root}/pushed.conf`,
      content: `push ${serial}\n`,
      mode: "0644",
      owner: "root",
      group: "root",
    }],
  }));
}

try {
  const made = await new Deno.Command(Deno.execPath(), {
    args: ["bundle", "--quiet", "--output", program, "mod.ts"],
    cwd: REPO,
  }).output();
  if (!made.success) throw new Error("deno bundle failed");
  const tokenFile = posix.join(dir, "token");
  await Deno.writeTextFile(tokenFile, await control.mintToken(NODE), { mode: 0o600 });
  const enrol = host(["enrol", "--token-file", tokenFile]);
  if ((await enrol.child.status).code !== 0) throw new Error(`enrol failed:\n${enrol.log()}`);
  let serial = 1;
  await control.nc.request(subjectsOf(NODE).declaration, declaration(serial), { timeout: 10_000 });

  // Start to first reconcile (the held declaration, fetched on link-up).
  const starts: number[] = [];
  const linkUps: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const t0 = performance.now();
    const run = host(["run"]);
    let up = 0;
    await waitFor("link up", () => {
      if (!up && run.log().includes("link: up")) up = performance.now() - t0;
      return /apply \(start, [^)]*\): converged/.test(run.log());
    });
    starts.push(performance.now() - t0);
    linkUps.push(up);
    run.child.kill("SIGTERM");
    await run.child.status;
  }

  // Push to applied: publish, then wait for the node's report of that serial.
  const run = host(["run"]);
  await waitFor("first reconcile", () => /apply \(start, /.test(run.log()));
  const reported = new Map<number, number>();
  control.watch((m) => {
    if (m.kind === "report" && m.body.kind === "apply" && typeof m.body.serial === "number") {
      reported.set(m.body.serial, performance.now());
    }
  }, NODE);
  await control.nc.flush();
  const latencies: number[] = [];
  for (let i = 0; i < PUSHES; i++) {
    serial++;
    const body = declaration(serial);
    const t0 = performance.now();
    control.nc.publish(subjectsOf(NODE).declaration, body);
    const s = serial;
    await waitFor(`the report of serial ${s}`, () => reported.has(s), 30_000);
    latencies.push(reported.get(s)! - t0);
  }
  latencies.sort((a, b) => a - b);

  // Idle: no pushes, default heartbeat (30 s) and drift (600 s) timers.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const before = await usage(run.child.pid);
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000));
  const after = await usage(run.child.pid);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = ((after.ticks - before.ticks) / CLK_TCK) / seconds * 100;
  run.child.kill("SIGTERM");
  const code = (await run.child.status).code;

  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  const row = (label: string, value: string, target: string) =>
    lines.push(`${label.padEnd(42)}${value.padStart(12)}  ${target}`);
  lines.push(
    "link bench: nats-server on 127.0.0.1 (stand-in control plane), host bundled, development flags",
  );
  row("measure", "value", "target");
  row(`start to link up (median of ${STARTS})`, ms(med(linkUps)), "-");
  row(`start to first reconcile (median of ${STARTS})`, ms(med(starts)), "-");
  row(`push to applied, p50 (${PUSHES} pushes)`, ms(percentile(latencies, 50)), "< 25 ms");
  row(`push to applied, p99 (${PUSHES} pushes)`, ms(percentile(latencies, 99)), "< 100 ms");
  row(`idle CPU of run over ${seconds.toFixed(0)} s`, `${cpu.toFixed(3)} %`, "< 0.5 % of one core");
  row("idle RSS", `${(after.rssKiB / 1024).toFixed(1)} MiB`, "< 80 MB");
  row("exit on SIGTERM", String(code), "0");
  const table = lines.join("\n") + "\n";
  console.log(table);
  if (values.write) {
    const machine =
      `${Deno.build.target}, ${navigator.hardwareConcurrency} cores, deno ${Deno.version.deno}`;
    await Deno.writeTextFile(values.write, `${table}machine: ${machine}\n`);
  }
} finally {
  for (const child of children) {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await child.status;
  }
  await control.close();
  await broker.stop();
  await Deno.remove(dir, { recursive: true });
}
