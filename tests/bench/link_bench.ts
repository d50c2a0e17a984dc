/**
 * `deno task bench:link`: the link and run mode, measured on a real nats-server
 * on 127.0.0.1 with the stand-in control plane of lab/mesh (started as the tests
 * start it, tests/_mesh.ts) and the host in its bundled form under the
 * development permission set:
 *   - start-to-first-reconcile: process start until the start reconcile of the
 *     held declaration has completed (median of 5 starts);
 *   - push-to-applied: the control plane's `declare` (signed, stored by JetStream,
 *     exactly what the lab sends) of a one-file declaration until the node's report
 *     of that apply arrives (200 pushes; p50, p99). Timed twice: from the moment the
 *     declaration is on the broker (a subscriber of its subject sees it: the host's
 *     part, issue 2's target) and from the call to `declare` (which also takes the
 *     stand-in's own bookkeeping: its state file under a lock, the signature);
 *   - idle CPU of `run` over 60 s (default heartbeat), and idle RSS;
 *   - `run`'s RSS over the pushes: read after each push, shown at each quarter, and
 *     its slope from the middle to the end, per 100 pushes (a host that keeps
 *     something per push shows it here; the first half pays for warming up).
 * It stops with an error when the node refuses or fails a push, or the host exits.
 * Prints a table with the targets; `--write FILE` also saves it.
 * Options: --pushes N (200), --idle SECONDS (60), --starts N (5), --deno-flag F (extra flag
 * for the host's deno, repeatable: to try V8 settings; V8 flags add to the packaged ones),
 * --packaged (the tarball's bundled build run as its shim runs it, under /var/lib, instead of
 * `deno bundle` under the development flags), --resources N (1: the pushed declaration holds
 * N resources: the pushed file, then directories and files that never change, as a store of
 * N resources; issue 28 measures 550). With the table: the floor F of the same run (an
 * empty script under the host's deno flags, idle; then the same importing node:fs and
 * node:sqlite), and the peak RSS of one drift pass after the idle figures (the drift interval
 * is set so the timer fires just after them; the peak is reset first, /proc/PID/clear_refs).
 * --env K=V (repeatable) adds to the host's environment (to try MALLOC_ARENA_MAX and the
 * like). --packaged starts the host with DENO_USR2_MEMORY_TRIM=1, as the launcher does (the host
 * gives freed memory back after its applies, issue 37); --no-trim leaves it out. --transport
 * deno (with --packaged) builds the host with src/link/connection_deno.ts in place of
 * connection.ts: the link on Deno's own sockets instead of node:net and node:tls (issue 37,
 * item 2); the table then adds the floors with node:crypto, and with node:net and node:tls,
 * and which of the node layer's socket modules run's parts load. The full run
 * is never part of the
 * tests; tests/bench/bench_smoke_test.ts runs a smoke form (2 pushes, 1 start, 1 s idle).
 */
import { posix } from "node:path";
import { parseArgs } from "node:util";
import { hostPermissionFlags } from "../_helpers.ts";
import { fileResource, startMesh } from "../_mesh.ts";
import { subjectsOf } from "../../src/link/subjects.ts";
import { benchContext } from "./_context.ts";
import { build } from "../../packaging/build.ts";

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
    packaged: { type: "boolean" },
    resources: { type: "string" },
    /** An extra environment variable for the host, K=V (repeatable). */
    env: { type: "string", multiple: true },
    /** Packaged: start the host without DENO_USR2_MEMORY_TRIM=1 (the launcher sets it). */
    "no-trim": { type: "boolean" },
    /** node (the link's transport) or deno (connection_deno.ts, measured: issue 37 item 2). */
    transport: { type: "string" },
  },
});
const TRANSPORT = values.transport ?? "node";
if (TRANSPORT !== "node" && TRANSPORT !== "deno") {
  throw new Error(`--transport is node or deno, not ${TRANSPORT}`);
}
if (TRANSPORT === "deno" && !values.packaged) throw new Error("--transport deno needs --packaged");
const PUSHES = Number(values.pushes ?? 200);
const IDLE_S = Number(values.idle ?? 60);
const STARTS = Number(values.starts ?? 5);
const PACKAGED = values.packaged ?? false;
const RESOURCES = Math.max(1, Number(values.resources ?? 1));
/** How long `run` is left alone after the pushes before the idle figures are taken. */
const SETTLE_MS = Math.min(3000, IDLE_S * 500);
/** The drift timer fires this long after the last push's apply: after the idle figures. */
const DRIFT_S = Math.max(10, Math.ceil(SETTLE_MS / 1000 + IDLE_S) + 8);
const NODE = "bench-node";

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** CPU ticks (user + system) and RSS of a process, from /proc. */
async function usage(pid: number): Promise<{ ticks: number; rssKiB: number }> {
  const stat = (await Deno.readTextFile(`/proc/${pid}/stat`)).split(") ")[1].split(" ");
  const ticks = Number(stat[11]) + Number(stat[12]);
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const rss = /VmRSS:\s+(\d+)/.exec(status)?.[1];
  if (rss === undefined) throw new Error(`process ${pid} has no resident set: it has exited`);
  return { ticks, rssKiB: Number(rss) };
}

const CLK_TCK = Number(
  new TextDecoder().decode(
    (await new Deno.Command("getconf", { args: ["CLK_TCK"] }).output()).stdout,
  )
    .trim(),
) || 100;

const context = await benchContext();
const mesh = await startMesh();
const control = mesh.control;
// The tarball's permission set writes only its managed roots (/var/lib is one).
const dir = await Deno.makeTempDir({
  prefix: "noxln-bench-",
  ...(PACKAGED ? { dir: "/var/lib" } : {}),
});
const root = posix.join(dir, "root");
const stateDir = posix.join(dir, "state");
await Deno.mkdir(root);
await Deno.writeTextFile(
  posix.join(dir, "host.json"),
  JSON.stringify({
    managedRoots: [root],
    bundle: posix.join(dir, "pkg", "substrate.lock"),
    driftIntervalSeconds: DRIFT_S,
  }),
);
const env: Record<string, string> = {
  NOX_MESH_HOST_STATE_DIR: stateDir,
  NOX_MESH_HOST_CONFIG: posix.join(dir, "host.json"),
};
// As the launcher starts the host (launcher/nox-mesh-host-launch, run_host).
if (PACKAGED && !values["no-trim"]) env.DENO_USR2_MEMORY_TRIM = "1";
for (const kv of values.env ?? []) {
  const at = kv.indexOf("=");
  if (at < 1) throw new Error(`--env wants K=V, not ${kv}`);
  env[kv.slice(0, at)] = kv.slice(at + 1);
}
let program = posix.join(dir, "nox-mesh-host.js");
let flags = [...await hostPermissionFlags(), ...(values["deno-flag"] ?? [])];
const lines: string[] = [];
const children = new Set<Deno.ChildProcess>();

interface Host {
  child: Deno.ChildProcess;
  log: () => string;
  /** The exit code once it has exited, else undefined. */
  exited: () => number | undefined;
}

function host(args: string[], script = program): Host {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", ...flags, script, ...args],
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
  let text = "";
  (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) text += decoder.decode(chunk, { stream: true });
  })();
  return { child, log: () => text, exited: () => code };
}

/** Polls `probe` until true; fails with the host's log when it exits or time runs out. */
async function waitFor(
  what: string,
  probe: () => boolean,
  of: Host,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    const code = of.exited();
    if (code !== undefined) {
      throw new Error(`the host exited (${code}) before ${what}; its log:\n${of.log()}`);
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}; the host's log:\n${of.log()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** What the declaration holds beside the pushed file: RESOURCES - 1 that never change. */
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

/** The pushed declaration: one file whose content names its serial, and what never changes. */
function declaration(serial: number): Record<string, unknown> {
  return {
    version: 1,
    resources: [...STILL, fileResource("f", `${root}/pushed.conf`, `push ${serial}\n`)],
  };
}

/** RSS by kind (MiB): the runtime's file pages, anonymous memory, and malloc's heap within it. */
async function rssKinds(pid: number): Promise<{ file: number; anon: number; brk: number }> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const kib = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  let brk = 0;
  let inHeap = false;
  for (const line of (await Deno.readTextFile(`/proc/${pid}/smaps`)).split("\n")) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inHeap = line.endsWith("[heap]");
    else if (inHeap && line.startsWith("Rss:")) brk += Number(line.split(/\s+/)[1]);
  }
  return { file: kib("RssFile") / 1024, anon: kib("RssAnon") / 1024, brk: brk / 1024 };
}

/** Peak RSS (MiB) since start or since the last reset. */
async function peakMiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/**
 * The floor: a script that imports `imports` and waits, run under the host's deno flags and
 * environment; its RSS (and kinds) once it has settled, and its peak.
 */
async function floor(
  name: string,
  imports: string[],
): Promise<{ rss: number; peak: number; file: number; anon: number; brk: number }> {
  const script = posix.join(dir, `floor-${name}.js`);
  await Deno.writeTextFile(
    script,
    imports.map((m) => `import ${JSON.stringify(m)};\n`).join("") +
      "console.error('ready');\nsetInterval(() => {}, 1 << 30);\n",
  );
  const child = host([], script);
  await waitFor(`the floor script (${name})`, () => child.log().includes("ready"), child);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const rss = (await usage(child.child.pid)).rssKiB / 1024;
  const peak = await peakMiB(child.child.pid);
  const kinds = await rssKinds(child.child.pid);
  child.child.kill("SIGKILL");
  await child.child.status;
  return { rss, peak, ...kinds };
}

/**
 * Which of the node layer's socket modules (net, tls, dns and their bindings) loading
 * `imports` evaluates: the runtime's script names in a heap snapshot of a process that
 * imported them (under --allow-all: which modules load does not depend on the flags).
 */
async function nodeSocketModules(imports: string[]): Promise<string> {
  const script = posix.join(dir, "socket-modules.js");
  const snapshot = posix.join(dir, "socket-modules.heapsnapshot");
  await Deno.writeTextFile(
    script,
    imports.map((m) => `import ${JSON.stringify(m)};\n`).join("") +
      `const v8 = await import("node:v8");\n` +
      `const text = Deno.readTextFileSync(v8.writeHeapSnapshot(${JSON.stringify(snapshot)}));\n` +
      `const names = new Set(text.match(/ext:deno_node\\/[A-Za-z0-9_\\/.-]+\\.(?:ts|js|mjs)/g));\n` +
      `console.log([...names].filter((n) => /\\/(net|tls|_tls_wrap|_tls_common|dns|` +
      `tls_wrap|tcp_wrap)\\.(ts|js|mjs)$/.test(n)).map((n) => n.slice(14)).sort().join(" "));\n`,
  );
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", "--allow-all", "--no-config", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  await Deno.remove(snapshot).catch(() => {});
  if (!out.success) return `(probe failed: ${new TextDecoder().decode(out.stderr).trim()})`;
  return new TextDecoder().decode(out.stdout).trim() || "none";
}

try {
  if (PACKAGED) {
    // As the tarball's shim runs it: `deno run --no-config` + its V8 and permission flags.
    const built = await build({
      os: "tarball",
      form: "bundled",
      out: posix.join(dir, "dist"),
      ...(TRANSPORT === "deno"
        ? { swaps: { "src/link/connection.ts": "src/link/connection_deno.ts" } }
        : {}),
    });
    program = posix.join(built.dir, "nox-mesh-host.js");
    // After the runtime (its glibc loader first, where it has one) and `run`.
    const start = built.command.indexOf("run") + 1;
    flags = [...built.command.slice(start, -1), ...(values["deno-flag"] ?? [])];
  } else {
    const made = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--output", program, "mod.ts"],
      cwd: REPO,
    }).output();
    if (!made.success) {
      throw new Error(`deno bundle failed: ${new TextDecoder().decode(made.stderr)}`);
    }
  }
  let socketModules = "-";
  const floors: Record<string, Awaited<ReturnType<typeof floor>>> = {
    "F (empty script)": await floor("empty", []),
    "F + node:fs + node:sqlite": await floor("node", ["node:fs", "node:sqlite"]),
  };
  if (PACKAGED) {
    // What `run` loads before it does anything (the engine's and the link's parts: the NATS
    // client, node:crypto, node:tls), loaded and not run, with node:fs (the file adapter's).
    const parts = [...Deno.readDirSync(posix.dirname(program))]
      .filter((e) => /^_(engine|link)-.*\.js$/.test(e.name))
      .map((e) => posix.join(posix.dirname(program), e.name));
    floors["F + run's parts, loaded, not run"] = await floor("parts", ["node:fs", ...parts]);
    floors["F + node:fs + node:sqlite + node:crypto"] = await floor("crypto", [
      "node:fs",
      "node:sqlite",
      "node:crypto",
    ]);
    floors["F + those + node:net + node:tls"] = await floor("sockets", [
      "node:fs",
      "node:sqlite",
      "node:crypto",
      "node:net",
      "node:tls",
    ]);
    socketModules = await nodeSocketModules(["node:fs", ...parts]);
  }
  const tokenFile = posix.join(dir, "token");
  await Deno.writeTextFile(tokenFile, await control.mintToken(NODE), { mode: 0o600 });
  const enrol = host(["enrol", "--token-file", tokenFile]);
  if ((await enrol.child.status).code !== 0) throw new Error(`enrol failed:\n${enrol.log()}`);
  let serial = 1;
  await control.declare(NODE, declaration(serial), { serial });

  // Start to first reconcile (the held declaration, fetched on link-up).
  const starts: number[] = [];
  const linkUps: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const t0 = performance.now();
    const run = host(["run"]);
    let up = 0;
    await waitFor("link up and the start reconcile", () => {
      if (!up && run.log().includes("link: up")) up = performance.now() - t0;
      return /apply \(start, [^)]*\): converged/.test(run.log());
    }, run);
    starts.push(performance.now() - t0);
    linkUps.push(up);
    run.child.kill("SIGTERM");
    await run.child.status;
  }

  // Push to applied: declare (signed, stored), then wait for the node's report of that serial.
  const run = host(["run"]);
  await waitFor("the first reconcile", () => /apply \(start, /.test(run.log()), run);
  const reported = new Map<number, number>();
  const refused: string[] = [];
  control.watch((m) => {
    if (m.kind !== "report") return;
    if (m.body.kind === "refused") {
      // A second copy of a push already applied (`declare` publishes again when the
      // broker's acknowledgement is late, on a loaded machine) is refused as a replay:
      // the host doing its job, not a failed push.
      if (m.body.reason === "replay" && reported.has(m.body.serial as number)) return;
      refused.push(`serial ${m.body.serial}: ${m.body.reason}: ${m.body.message}`);
    } else if (m.body.kind === "apply" && typeof m.body.serial === "number") {
      if (m.body.outcome !== "converged") {
        refused.push(`serial ${m.body.serial}: apply ${m.body.outcome}: ${m.body.error ?? ""}`);
      }
      reported.set(m.body.serial, performance.now());
    }
  }, NODE);
  // When the declaration leaves the control plane: the first copy a subscriber of its
  // subject sees (whatever the body's form; `declare` may publish again on a timeout).
  let onBroker: number | undefined;
  let unseen: Error | undefined;
  control.nc.subscribe(subjectsOf(NODE).declaration, {
    callback: (error) => {
      if (error) unseen ??= error;
      else onBroker ??= performance.now();
    },
  });
  await control.nc.flush();
  const fromBroker: number[] = [];
  const fromDeclare: number[] = [];
  const stored: number[] = [];
  /** RSS (KiB) after each push. */
  const rssAfter: number[] = [];
  const ticksBefore = (await usage(run.child.pid)).ticks;
  for (let i = 0; i < PUSHES; i++) {
    serial++;
    const s = serial;
    onBroker = undefined;
    const t0 = performance.now();
    await control.declare(NODE, declaration(s), { serial: s });
    stored.push(performance.now() - t0);
    await waitFor(
      `the report of serial ${s}`,
      () => {
        if (refused.length) throw new Error(`the node did not apply a push: ${refused.join("; ")}`);
        if (unseen) throw new Error(`the control plane cannot watch the declarations: ${unseen}`);
        return reported.has(s) && onBroker !== undefined;
      },
      run,
      30_000,
    );
    fromBroker.push(reported.get(s)! - onBroker!);
    fromDeclare.push(reported.get(s)! - t0);
    rssAfter.push((await usage(run.child.pid)).rssKiB);
  }
  /** The host's CPU (all its threads) per push, ms: what the load moves far less than the times. */
  const cpuPerPush = ((await usage(run.child.pid)).ticks - ticksBefore) / CLK_TCK * 1000 / PUSHES;
  for (const xs of [fromBroker, fromDeclare, stored]) xs.sort((a, b) => a - b);
  const onDisk = await Deno.readTextFile(`${root}/pushed.conf`);
  if (onDisk !== `push ${serial}\n`) {
    throw new Error(`after ${PUSHES} pushes the file holds ${JSON.stringify(onDisk)}`);
  }

  // Idle: no pushes, default heartbeat (30 s) and drift (600 s) timers.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const before = await usage(run.child.pid);
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000));
  const after = await usage(run.child.pid);
  const kinds = await rssKinds(run.child.pid);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = ((after.ticks - before.ticks) / CLK_TCK) / seconds * 100;
  const idlePeak = await peakMiB(run.child.pid);
  // One drift pass (the timer, DRIFT_S after the last push): its peak, from a reset.
  const driftLine = /apply \(drift, [^)]*\): converged/;
  const driftEarly = driftLine.test(run.log());
  await Deno.writeTextFile(`/proc/${run.child.pid}/clear_refs`, "5");
  const beforeDrift = (await usage(run.child.pid)).rssKiB / 1024;
  await waitFor("the drift pass", () => driftLine.test(run.log()), run, (DRIFT_S + 30) * 1000);
  const driftPeak = await peakMiB(run.child.pid);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const afterDrift = (await usage(run.child.pid)).rssKiB / 1024;
  run.child.kill("SIGTERM");
  const code = (await run.child.status).code;

  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  const row = (label: string, value: string, target: string) =>
    lines.push(`${label.padEnd(46)}${value.padStart(12)}  ${target}`);
  lines.push(
    "link bench: nats-server on 127.0.0.1 (stand-in control plane), " +
      (PACKAGED
        ? "host packaged (the tarball's bundled build, run as its shim runs it)"
        : "host bundled, development flags") +
      `; ${RESOURCES} resource${RESOURCES === 1 ? "" : "s"} held` +
      (env.DENO_USR2_MEMORY_TRIM ? "; DENO_USR2_MEMORY_TRIM=1" : "") +
      (values["deno-flag"] ? `; extra deno flags: ${values["deno-flag"].join(" ")}` : "") +
      `; link transport: ${TRANSPORT === "deno" ? "Deno's sockets" : "node:net/node:tls"}`,
    await context.line(),
  );
  row("measure", "value", "target");
  row(`start to link up (median of ${STARTS})`, ms(med(linkUps)), "-");
  row(`start to first reconcile (median of ${STARTS})`, ms(med(starts)), "-");
  row(
    `on the broker to applied, p50 (${PUSHES} pushes)`,
    ms(percentile(fromBroker, 50)),
    "< 25 ms",
  );
  row(`on the broker to applied, p99`, ms(percentile(fromBroker, 99)), "< 100 ms");
  row(`declare() to applied, p50`, ms(percentile(fromDeclare, 50)), "-");
  row(`declare() to applied, p99`, ms(percentile(fromDeclare, 99)), "-");
  row(`declare() to stored (it returned), p50`, ms(percentile(stored, 50)), "-");
  row("run's CPU per push (all threads)", ms(cpuPerPush), "-");
  row(`idle CPU of run over ${seconds.toFixed(0)} s`, `${cpu.toFixed(3)} %`, "< 0.5 % of one core");
  if (PUSHES >= 4) {
    const at = [1, 2, 3, 4].map((q) => Math.floor(PUSHES * q / 4));
    const mib = (n: number) => (rssAfter[n - 1] / 1024).toFixed(1);
    row(`RSS after ${at.join(" / ")} pushes (MiB)`, at.map(mib).join(" / "), "-");
    const half = at[1];
    const slope = (rssAfter[PUSHES - 1] - rssAfter[half - 1]) / 1024 / (PUSHES - half) * 100;
    row(`RSS growth per 100 pushes (${half + 1}-${PUSHES})`, `${slope.toFixed(1)} MiB`, "~0");
  }
  row("idle RSS", `${(after.rssKiB / 1024).toFixed(1)} MiB`, "< 80 MB; ≤ 40 MiB (issue 28)");
  row(
    "idle RSS: file pages / anon (malloc heap)",
    `${kinds.file.toFixed(1)} / ${kinds.anon.toFixed(1)} (${kinds.brk.toFixed(1)})`,
    "MiB",
  );
  row("peak RSS before the drift pass (since start)", `${idlePeak.toFixed(1)} MiB`, "-");
  row(
    "drift pass: RSS before / peak / 1 s after",
    `${beforeDrift.toFixed(1)} / ${driftPeak.toFixed(1)} / ${afterDrift.toFixed(1)}`,
    "MiB; peak ≤ 48 (issue 28)" + (driftEarly ? " (the pass came before the idle figures)" : ""),
  );
  for (const [label, f] of Object.entries(floors)) {
    row(
      `${label}: RSS, peak`,
      `${f.rss.toFixed(1)}, ${f.peak.toFixed(1)}`,
      `MiB (file ${f.file.toFixed(1)} / anon ${f.anon.toFixed(1)} (malloc ${f.brk.toFixed(1)}))`,
    );
  }
  row("node layer socket modules run's parts load", socketModules, "");
  row("exit on SIGTERM", String(code), "0");
  const table = lines.join("\n") + "\n";
  console.log(table);
  if (values.write) await Deno.writeTextFile(values.write, table);
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
