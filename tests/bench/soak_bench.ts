/**
 * `deno task bench:soak` (issue 37, "flat over time"): `run` under a long stream of work, its
 * resident memory sampled as it goes. A real nats-server on 127.0.0.1 with the stand-in control
 * plane (tests/_mesh.ts), the host as a process (bundled, development flags; `--packaged`: the
 * tarball's bundled build run as its shim runs it, under /var/lib, with DENO_USR2_MEMORY_TRIM=1
 * as the launcher starts it). The work, at the highest rate the host takes it: pushes (the
 * control plane's signed `declare`, each waited for until the node's report of its apply
 * arrives) and drift passes (`run --drift-interval 1`: after every `--drift-every` pushes the
 * bench waits for the drift timer's pass, one second after the last apply), in that ratio until
 * both counts are reached. After every event (a push applied or a drift pass) it reads the
 * host's RSS from /proc, and keeps for every `--sample` events the reading at the last one and
 * the lowest: RSS moves by 1–3 MiB with where in its work the host is read, and what a leak
 * raises is the floor, so the lowest reading of each window is the sample that is judged.
 * It prints the slope of those samples over the last half of the run (least squares, KiB per
 * 1,000 events, with its standard error), the same for the readings at every 100th event, the
 * RSS after the first 1,000 events (or the first tenth, in a shorter run) and at the end, and
 * exits 1 when the judged slope is above `--max-slope` (KiB per 1,000 events, default 64: the
 * issue's target), so a run that grows fails itself. The full run (10,000 pushes, 1,000
 * drift passes) is never part of the tests; tests/bench/bench_smoke_test.ts runs a smoke form
 * and tests/run_soak_guard_test.ts a small form with a bound a leak would cross.
 * Options: --pushes N (10000), --drifts N (1000), --resources N (55: the pushed declaration
 * holds N resources, the pushed file and N - 1 that never change), --sample N (100),
 * --max-slope KIB (64), --packaged, --no-trim (packaged, without DENO_USR2_MEMORY_TRIM),
 * --write FILE (also save the table).
 */
import { posix } from "node:path";
import { parseArgs } from "node:util";
import { hostPermissionFlags } from "../_helpers.ts";
import { fileResource, startMesh } from "../_mesh.ts";
import { benchContext } from "./_context.ts";
import { build } from "../../packaging/build.ts";

const REPO = new URL("../..", import.meta.url).pathname;
const { values } = parseArgs({
  args: Deno.args,
  options: {
    pushes: { type: "string" },
    drifts: { type: "string" },
    resources: { type: "string" },
    sample: { type: "string" },
    "max-slope": { type: "string" },
    packaged: { type: "boolean" },
    "no-trim": { type: "boolean" },
    write: { type: "string" },
  },
});
const count = (name: string, fallback: number, least: number): number => {
  const n = Number(values[name as keyof typeof values] ?? fallback);
  if (!Number.isSafeInteger(n) || n < least) {
    throw new Error(`--${name} takes a whole number of at least ${least}`);
  }
  return n;
};
const PUSHES = count("pushes", 10_000, 1);
const DRIFTS = count("drifts", 1_000, 0);
const RESOURCES = count("resources", 55, 1);
const SAMPLE = count("sample", 100, 1);
const MAX_SLOPE = Number(values["max-slope"] ?? 64);
const PACKAGED = values.packaged ?? false;
/** Pushes between two drift passes: the two kinds of work interleaved in their ratio. */
const DRIFT_EVERY = DRIFTS === 0 ? Infinity : Math.max(1, Math.floor(PUSHES / DRIFTS));
const NODE = "soak-node";

const context = await benchContext();
const mesh = await startMesh();
const dir = await Deno.makeTempDir({
  prefix: "noxsoak-",
  ...(PACKAGED ? { dir: "/var/lib" } : {}),
});
const root = posix.join(dir, "root");
await Deno.mkdir(root);
await Deno.writeTextFile(
  posix.join(dir, "host.json"),
  JSON.stringify({ managedRoots: [root], bundle: posix.join(dir, "pkg", "substrate.lock") }),
);
const env: Record<string, string> = {
  NOX_MESH_HOST_STATE_DIR: posix.join(dir, "state"),
  NOX_MESH_HOST_CONFIG: posix.join(dir, "host.json"),
};
// As the launcher starts the host (launcher/nox-mesh-host-launch, run_host).
if (PACKAGED && !values["no-trim"]) env.DENO_USR2_MEMORY_TRIM = "1";
let program = posix.join(dir, "nox-mesh-host.js");
let flags = await hostPermissionFlags();
const children = new Set<Deno.ChildProcess>();

/** A host process; its log is kept short (the last lines) and its drift passes counted. */
interface Host {
  child: Deno.ChildProcess;
  tail: () => string;
  drifts: () => number;
  exited: () => number | undefined;
}

function host(args: string[]): Host {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", ...flags, program, ...args],
    env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  children.add(child);
  let code: number | undefined;
  child.status.then((s) => {
    code = s.code;
    children.delete(child);
  });
  let lines: string[] = [];
  let partial = "";
  let drifts = 0;
  (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      const text = partial + decoder.decode(chunk, { stream: true });
      const split = text.split("\n");
      partial = split.pop()!;
      for (const line of split) {
        if (/apply \(drift, [^)]*\): converged/.test(line)) drifts++;
        lines.push(line);
      }
      if (lines.length > 200) lines = lines.slice(-100);
    }
  })();
  return {
    child,
    tail: () => [...lines, partial].join("\n"),
    drifts: () => drifts,
    exited: () => code,
  };
}

async function waitFor(what: string, probe: () => boolean, of: Host, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    const code = of.exited();
    if (code !== undefined) {
      throw new Error(`the host exited (${code}) before ${what}; its log:\n${of.tail()}`);
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}; the host's log:\n${of.tail()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function rssKiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const rss = /VmRSS:\s+(\d+)/.exec(status)?.[1];
  if (rss === undefined) throw new Error(`process ${pid} has no resident set: it has exited`);
  return Number(rss);
}

/** Least-squares slope of y over x, and its standard error. */
export function slope(points: readonly [number, number][]): { slope: number; error: number } {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  if (den === 0) return { slope: 0, error: NaN };
  const b = num / den;
  const residual = points.reduce((s, [x, y]) => s + (y - my - b * (x - mx)) ** 2, 0);
  return { slope: b, error: n > 2 ? Math.sqrt(residual / (n - 2) / den) : NaN };
}

const STILL: Record<string, unknown>[] = (() => {
  const dirs = Math.round((RESOURCES - 1) / 11);
  const still: Record<string, unknown>[] = [];
  for (let d = 0; d < dirs; d++) {
    still.push({
      type: "directory",
      id: `d${d}`,
      path: `${root}/d${d}`,
      mode: "0755",
      owner: "root",
      group: "root",
    });
  }
  for (let f = 0; f < RESOURCES - 1 - dirs; f++) {
    const at = dirs > 0 ? `${root}/d${f % dirs}` : root;
    still.push(fileResource(`s${f}`, `${at}/still-${f}.conf`, `# still ${f}\nkey = ${f}\n`));
  }
  return still;
})();

const declaration = (serial: number) => ({
  version: 1,
  resources: [...STILL, fileResource("f", `${root}/pushed.conf`, `push ${serial}\n`)],
});

let failed = false;
try {
  if (PACKAGED) {
    const built = await build({ os: "tarball", form: "bundled", out: posix.join(dir, "dist") });
    program = posix.join(built.dir, "nox-mesh-host.js");
    flags = built.command.slice(built.command.indexOf("run") + 1, -1);
  } else {
    const made = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--output", program, "mod.ts"],
      cwd: REPO,
    }).output();
    if (!made.success) {
      throw new Error(`deno bundle failed: ${new TextDecoder().decode(made.stderr)}`);
    }
  }
  const control = mesh.control;
  const tokenFile = posix.join(dir, "token");
  await Deno.writeTextFile(tokenFile, await control.mintToken(NODE), { mode: 0o600 });
  const enrol = host(["enrol", "--token-file", tokenFile]);
  if ((await enrol.child.status).code !== 0) throw new Error(`enrol failed:\n${enrol.tail()}`);
  let serial = 1;
  await control.declare(NODE, declaration(serial), { serial });

  const run = host(["run", "--drift-interval", "1"]);
  await waitFor("the first reconcile", () => /apply \(start, /.test(run.tail()), run);
  const reported = new Set<number>();
  const refused: string[] = [];
  control.watch((m) => {
    if (m.kind !== "report") return;
    if (m.body.kind === "refused") {
      // `declare` publishes again when the broker's acknowledgement is late: a replay of a
      // serial already applied is the host doing its job.
      if (m.body.reason === "replay" && reported.has(m.body.serial as number)) return;
      refused.push(`serial ${m.body.serial}: ${m.body.reason}: ${m.body.message}`);
    } else if (m.body.kind === "apply" && typeof m.body.serial === "number") {
      if (m.body.outcome !== "converged") {
        refused.push(`serial ${m.body.serial}: apply ${m.body.outcome}: ${m.body.error ?? ""}`);
      }
      reported.add(m.body.serial);
    }
  }, NODE);

  const pid = run.child.pid;
  /** [events done, RSS KiB] at every SAMPLE-th event. */
  const samples: [number, number][] = [];
  /** [events done, the lowest RSS KiB read in the SAMPLE events up to it]. */
  const floors: [number, number][] = [];
  let events = 0;
  let lowest = Infinity;
  const event = async () => {
    events++;
    const kib = await rssKiB(pid);
    lowest = Math.min(lowest, kib);
    if (events % SAMPLE === 0) {
      samples.push([events, kib]);
      floors.push([events, lowest]);
      lowest = Infinity;
    }
  };
  const started = performance.now();
  let pushes = 0;
  let drifts = 0;
  let pushMs = 0;
  while (pushes < PUSHES || drifts < DRIFTS) {
    for (let i = 0; i < DRIFT_EVERY && pushes < PUSHES; i++) {
      serial++;
      const s = serial;
      const t0 = performance.now();
      await control.declare(NODE, declaration(s), { serial: s });
      await waitFor(`the report of serial ${s}`, () => {
        if (refused.length) throw new Error(`the node did not apply a push: ${refused.join("; ")}`);
        return reported.has(s);
      }, run);
      pushMs += performance.now() - t0;
      pushes++;
      await event();
    }
    if (drifts < DRIFTS) {
      // The drift timer fires one second after the last apply; a pass counted since (a stall
      // of the bench between pushes) is as good.
      const seen = run.drifts();
      await waitFor("a drift pass", () => run.drifts() > seen, run);
      drifts += run.drifts() - seen;
      for (let i = 0; i < run.drifts() - seen; i++) await event();
    }
  }
  const seconds = (performance.now() - started) / 1000;
  const onDisk = await Deno.readTextFile(`${root}/pushed.conf`);
  if (onDisk !== `push ${serial}\n`) {
    throw new Error(`after ${PUSHES} pushes the file holds ${JSON.stringify(onDisk)}`);
  }
  run.child.kill("SIGTERM");
  const code = (await run.child.status).code;

  const lastHalf = (xs: [number, number][]) => xs.slice(Math.floor(xs.length / 2));
  const half = lastHalf(floors);
  const judged = half.length >= 2 ? slope(half) : { slope: NaN, error: NaN };
  const perThousand = judged.slope * 1000;
  const atEvery = lastHalf(samples).length >= 2
    ? slope(lastHalf(samples))
    : { slope: NaN, error: NaN };
  const earlyAt = Math.min(1000, Math.max(SAMPLE, Math.floor(events / 10 / SAMPLE) * SAMPLE));
  const early = samples.find(([at]) => at >= earlyAt) ?? samples[0];
  const last = samples.at(-1);
  const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;
  const lines: string[] = [
    `soak bench: nats-server on 127.0.0.1 (stand-in control plane), ${
      PACKAGED
        ? "host packaged (the tarball's bundled build, run as its shim runs it)"
        : "host bundled, development flags"
    }; ${RESOURCES} resources per declaration` +
    (env.DENO_USR2_MEMORY_TRIM ? "; DENO_USR2_MEMORY_TRIM=1" : ""),
    await context.line(),
  ];
  const row = (label: string, value: string, target = "-") =>
    lines.push(`${label.padEnd(48)}${value.padStart(16)}  ${target}`);
  row("measure", "value", "target");
  row("pushes applied / drift passes", `${pushes} / ${drifts}`);
  row("events per second", (events / seconds).toFixed(1));
  row("push to applied (declare() to report), mean", `${(pushMs / pushes).toFixed(1)} ms`);
  if (early && last) {
    row(
      `RSS after ${early[0]} events / at the end (${last[0]})`,
      `${mib(early[1])} / ${mib(last[1])}`,
    );
    row(
      "RSS at the end against that",
      `${((last[1] / early[1] - 1) * 100).toFixed(1)} %`,
      "within 5 % (issue 37)",
    );
  }
  row(
    `RSS slope over the last half (${half.length} samples)`,
    `${perThousand.toFixed(1)} KiB/1000`,
    `≤ ${MAX_SLOPE} KiB per 1,000 events (the lowest of each ${SAMPLE}; ± ${
      (judged.error * 1000).toFixed(1)
    })`,
  );
  row(
    `the same, read at the last of each ${SAMPLE}`,
    `${(atEvery.slope * 1000).toFixed(1)} KiB/1000`,
    `± ${(atEvery.error * 1000).toFixed(1)} (not judged)`,
  );
  const peak = samples.reduce((m, [, kib]) => Math.max(m, kib), 0);
  row("highest RSS sampled", mib(peak));
  row("exit on SIGTERM", String(code), "0");
  lines.push(
    "RSS every " + SAMPLE + " events (MiB): " +
      samples.map(([, kib]) => (kib / 1024).toFixed(1)).join(" "),
    "lowest RSS of each " + SAMPLE + " events (MiB): " +
      floors.map(([, kib]) => (kib / 1024).toFixed(1)).join(" "),
  );
  const table = lines.join("\n") + "\n";
  console.log(table);
  if (values.write) await Deno.writeTextFile(values.write, table);
  if (!(perThousand <= MAX_SLOPE)) {
    console.error(
      `soak: RSS grew ${perThousand.toFixed(1)} KiB per 1,000 events over the last half of the ` +
        `run, above the bound of ${MAX_SLOPE}: the host keeps something per event`,
    );
    failed = true;
  }
} finally {
  for (const child of children) {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await child.status;
  }
  await mesh[Symbol.asyncDispose]();
  await Deno.remove(dir, { recursive: true });
}
if (failed) Deno.exit(1);
