/**
 * `deno task bench:scale --nodes N [--processes P] [--heartbeat S] [--enrol-limit S] [--gogc N]
 * [--write FILE]`
 * (issue 35, item 4): N simulated nodes, each running the host's own link code
 * (tests/bench/_scale_worker.ts: enrol, a link kept up, heartbeats, every declaration
 * verified against the pinned key, the object it names read, a report through the
 * outbox), N/P per process in P processes, against the stand-in's three-server cluster on
 * 127.0.0.1 with its control plane (enrolments and object reads served here). It prints:
 *
 * - the time to enrol all N (tokens minted in batches of 500 first) and to have every
 *   link up;
 * - broker memory per node: the three servers' resident memory (/varz `mem`, monitoring
 *   on loopback) with every node linked, less what they held before any token, over N;
 *   and Go's own account of it (tests/bench/_go_memory.ts, from each server's profiling
 *   port on loopback): heap in use, live heap, goroutine stacks, the live heap after a
 *   forced collection and where it was allocated;
 * - CPU seconds of the servers and of the simulated nodes in each phase (/proc);
 * - publish-to-report p50/p99 and the whole wave for a declaration (naming one object) to
 *   every node, the control plane's clock from publish to the report's arrival in CONTROL
 *   (published K at a time, each awaiting its JetStream acknowledgement: `--publish-at-once`,
 *   1 unless given);
 *   and the same for a single node at a time with the fleet idle (20 samples);
 * - after every server is killed and started again: the time until every node's link is
 *   up again and its catch-up answered.
 *
 * The servers run with NATS_SERVER_ENV (lab/lib/nats_config.ts), `--gogc` replacing its GOGC
 * (100 is Go's default). Enrolling longer than `--enrol-limit` seconds (3600), or with no node moving for 5
 * minutes, is given up: the table then says what was measured and why it stopped.
 *
 * A benchmark, never a test: the figures go to tests/bench/RESULTS.md (`--write`).
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { startLocalCluster } from "../../lab/mesh/local_broker.ts";
import { ControlPlane } from "../../lab/mesh/control.ts";
import { withState } from "../../lab/mesh/state.ts";
import { benchContext } from "./_context.ts";
import { NATS_SERVER_ENV } from "../../lab/lib/nats_config.ts";
import { type GoMemory, goMemory, sumGo, topSites } from "./_go_memory.ts";
import { spawnWorker } from "./_workers.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    nodes: { type: "string" },
    processes: { type: "string" },
    heartbeat: { type: "string" },
    write: { type: "string" },
    "enrol-at-once": { type: "string" },
    "publish-at-once": { type: "string" },
    "enrol-limit": { type: "string" },
    gogc: { type: "string" },
  },
});
const N = Number(values.nodes ?? 100);
const P = Math.min(N, Number(values.processes ?? Math.max(1, Math.ceil(N / 2500))));
const HEARTBEAT_S = Number(values.heartbeat ?? 30);
const AT_ONCE = Number(values["enrol-at-once"] ?? 8);
/** How many declarations of the wave to all are awaiting their acknowledgement at once. */
const PUBLISH_AT_ONCE = Math.max(1, Number(values["publish-at-once"] ?? 1));
/** How long enrolling may take before the bench gives up and prints what it measured (s). */
const ENROL_LIMIT_S = Number(values["enrol-limit"] ?? 3600);
if (!Number.isSafeInteger(N) || N < 1 || N > 20_000) {
  console.error("bench:scale: --nodes takes 1 to 20000");
  Deno.exit(64);
}
if (values.gogc !== undefined && !/^([0-9]+|off)$/.test(values.gogc)) {
  console.error(`bench:scale: --gogc takes a percentage or "off", not "${values.gogc}"`);
  Deno.exit(64);
}
const serverEnv = { ...NATS_SERVER_ENV, ...(values.gogc ? { GOGC: values.gogc } : {}) };
const context = await benchContext();
const WORKER = new URL("./_scale_worker.ts", import.meta.url).pathname;
const say = (line: string) => console.log(`bench:scale: ${line}`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

const dir = await Deno.makeTempDir({ prefix: "noxln-scale-" });
// Each node's share of every stream is reserved when its token is minted (lab/mesh/streams.ts):
// about 8.6 MiB a node, on each of the three servers.
const reserveGb = Math.max(4, Math.ceil((N * 9) / 1024) + 2);
const cluster = await startLocalCluster(dir, {
  size: 3,
  maxFileStore: `${reserveGb}GB`,
  env: serverEnv,
  profile: true,
});
const control = await ControlPlane.open(dir);
control.serveEnrolments();
control.serveNodes();
const workers: Deno.ChildProcess[] = [];

/** CPU seconds (user + system) of a process, from /proc. */
async function cpuOf(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`).catch(() => "");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) / 100;
}
const serverPids = async () => {
  const state = await control.state();
  return Promise.all(
    state.cluster!.map(async (s) => Number((await Deno.readTextFile(s.pidFile)).trim())),
  );
};
async function cpu(): Promise<{ servers: number; nodes: number }> {
  const servers = (await Promise.all((await serverPids()).map(cpuOf))).reduce((a, b) => a + b, 0);
  const nodes = (await Promise.all(workers.map((w) => cpuOf(w.pid)))).reduce((a, b) => a + b, 0);
  return { servers, nodes };
}
/** Each server's resident memory (MiB), client connections and subscriptions, from /varz. */
async function perServer(): Promise<string> {
  const varz = await Promise.all(cluster.members.map((m) => m.monitor("varz")));
  return varz.map((v) =>
    `${(Number(v.mem) / 2 ** 20).toFixed(0)} MiB, ${v.connections} conns, ${v.subscriptions} subs`
  ).join("; ");
}
/** Go's accounts of the three servers, summed (`sites`: after a forced collection, by site). */
async function goMemories(sites?: Map<string, number>): Promise<GoMemory> {
  return sumGo(
    await Promise.all(cluster.members.map((m) => goMemory(m.prof!, { gc: !!sites, sites }))),
  );
}
async function memory(): Promise<number> {
  const mems = await Promise.all(
    cluster.members.map(async (m) => Number((await m.monitor("varz")).mem)),
  );
  return mems.reduce((a, b) => a + b, 0);
}

const events = {
  enrolled: new Map<string, number>(),
  up: new Map<string, number>(),
  caughtUp: new Map<string, number>(),
  failed: [] as string[],
  kinds: new Set<string>(),
  logs: 0,
};
const nodes = Array.from({ length: N }, (_, i) => `s${i + 1}`);
const rows: [string, string][] = [];
try {
  const baseline = await memory();
  const baselineGo = await goMemories();
  const started = Date.now();
  const tokens: Record<string, string> = {};
  for (let at = 0; at < N; at += 500) {
    Object.assign(tokens, await control.mintTokens(nodes.slice(at, at + 500), 7200));
  }
  const minted = Date.now() - started;
  say(`${N} tokens minted in ${seconds(minted)}`);
  const cpu0 = await cpu();
  const enrolStart = Date.now();
  for (let w = 0; w < P; w++) {
    const mine = nodes.filter((_, i) => i % P === w);
    const input = join(dir, `worker-${w}.json`);
    await Deno.writeTextFile(
      input,
      JSON.stringify({
        root: join(dir, `nodes-${w}`),
        heartbeatS: HEARTBEAT_S,
        enrolAtOnce: Math.max(1, Math.round(AT_ONCE / P)),
        nodes: mine.map((node) => ({ node, token: tokens[node] })),
      }),
    );
    const child = spawnWorker(WORKER, input, (e) => {
      const node = String(e.node);
      if (e.event === "enrolled") events.enrolled.set(node, Number(e.t));
      else if (e.event === "up") events.up.set(node, Number(e.t));
      else if (e.event === "caught-up") events.caughtUp.set(node, Number(e.t));
      else if (e.event === "failed") {
        events.failed.push(`${node}: ${e.why}`);
        // Each kind of failure said once, as it happens.
        const kind = String(e.why).replace(/\d+/g, "#").slice(0, 90);
        if (!events.kinds.has(kind)) {
          events.kinds.add(kind);
          say(`first failure of its kind: ${node}: ${String(e.why).slice(0, 400)}`);
        }
      } else if (e.event === "log") events.logs++;
    });
    workers.push(child);
  }
  /** Progress: nodes enrolled, up or failed (a phase that stops moving is given up). */
  const progress = () => events.enrolled.size + events.up.size + events.failed.length;
  const wait = async (what: string, done: () => boolean, limitMs: number, stallMs = 300_000) => {
    const deadline = Date.now() + limitMs;
    let said = 0;
    let last = progress();
    let movedAt = Date.now();
    while (!done()) {
      if (Date.now() > deadline) {
        throw new Error(`not every node ${what} within ${seconds(limitMs)}`);
      }
      if (progress() !== last) {
        last = progress();
        movedAt = Date.now();
      } else if (Date.now() - movedAt > stallMs) {
        throw new Error(`not every node ${what}: nothing moved for ${seconds(stallMs)}`);
      }
      if (Date.now() - said > 30_000) {
        said = Date.now();
        say(
          `${what}: enrolled ${events.enrolled.size}, up ${events.up.size} of ${N}; ` +
            `${events.failed.length} failed`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  };
  const stalled = await wait(
    "enrolled",
    () => events.enrolled.size + events.failed.length >= N,
    ENROL_LIMIT_S * 1000,
  ).then(() => undefined, (e: Error) => e.message);
  const enrolMs = Date.now() - enrolStart;
  if (stalled) {
    // What was measured so far, and why it stopped: the rest is not run.
    rows.push(["nodes (processes)", `${N} (${P})`]);
    rows.push(["tokens minted", seconds(minted)]);
    rows.push([
      "enrolment given up",
      `${stalled}: ${events.enrolled.size} enrolled and ${events.failed.length} failed in ${
        seconds(enrolMs)
      }; first failures: ${events.failed.slice(0, 2).join("; ").slice(0, 400)}`,
    ]);
    throw new Error("stalled");
  }
  await wait("linked", () => events.up.size + events.failed.length >= N, 600_000);
  const linkedMs = Date.now() - enrolStart;
  const cpu1 = await cpu();
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const linkedMem = await memory();
  const linkedServers = await perServer();
  const linkedGo = await goMemories();
  const sites = new Map<string, number>();
  const collectedGo = await goMemories(sites);
  rows.push(["nodes (processes)", `${N} (${P})`]);
  rows.push(["tokens minted", seconds(minted)]);
  rows.push(["time to enrol all", seconds(enrolMs)]);
  rows.push(["time to every link up", seconds(linkedMs)]);
  rows.push([
    "failed",
    `${events.failed.length}${
      events.failed.length ? `: ${events.failed.slice(0, 3).join("; ")}` : ""
    }`,
  ]);
  rows.push([
    "broker memory per node",
    `${((linkedMem - baseline) / N / 1024).toFixed(0)} KiB (3 servers: ${
      (baseline / 2 ** 20).toFixed(0)
    } MiB before, ${(linkedMem / 2 ** 20).toFixed(0)} MiB linked)`,
  ]);
  rows.push(["each server, linked", linkedServers]);
  const kib = (bytes: number) => `${(bytes / N / 1024).toFixed(1)} KiB`;
  rows.push([
    "Go's account per node (3 servers)",
    `heap in use ${kib(linkedGo.heapInuse - baselineGo.heapInuse)}, live ${
      kib(linkedGo.heapAlloc - baselineGo.heapAlloc)
    }, stacks ${kib(linkedGo.stackInuse - baselineGo.stackInuse)}, goroutines ${
      ((linkedGo.goroutines - baselineGo.goroutines) / N).toFixed(2)
    }; live after a forced GC ${kib(collectedGo.heapAlloc - baselineGo.heapAlloc)}`,
  ]);
  rows.push(["live heap per node by site, after a forced GC", topSites(sites, N, 16)]);
  rows.push([
    "CPU while enrolling",
    `servers ${(cpu1.servers - cpu0.servers).toFixed(0)} s, nodes ${
      (cpu1.nodes - cpu0.nodes).toFixed(0)
    } s`,
  ]);

  // A declaration naming one object, to every node.
  const object = new Uint8Array(4096).map((_, i) => (i * 7) & 0xff);
  const sha = await control.putContent(object);
  await withState(dir, (s) => {
    s.grants = Object.fromEntries(nodes.map((n) => [n, [sha]]));
  });
  const sign = await control.declarationSigner();
  const arrived = new Map<string, number>();
  const sub = control.nc.subscribe("mesh.node.*.report", {
    callback: (_e, m) => {
      try {
        const r = JSON.parse(m.string());
        if (r.kind === "apply") arrived.set(`${r.node} ${r.serial}`, Date.now());
      } catch { /* not a report */ }
    },
  });
  const publish = async (node: string, serial: number) => {
    const body = new TextEncoder().encode(JSON.stringify({
      version: 1,
      node,
      serial,
      resources: [{
        type: "file",
        id: "blob",
        path: "/srv/blob",
        contentSha256: sha,
        size: object.length,
        mode: "0644",
        owner: "root",
        group: "root",
      }],
    }));
    const at = Date.now();
    await control.nc.request(`mesh.decl.${node}`, body, {
      headers: sign(node, body),
      timeout: 30_000,
    });
    return at;
  };
  const quantile = (xs: number[], q: number) =>
    xs.length ? xs[Math.min(xs.length - 1, Math.ceil(q * xs.length) - 1)] : NaN;
  const cpu2 = await cpu();
  const published = new Map<string, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(PUBLISH_AT_ONCE, N) }, async () => {
      while (next < N) {
        const node = nodes[next++];
        published.set(node, await publish(node, 1));
      }
    }),
  );
  await wait("reported serial 1", () => nodes.every((n) => arrived.has(`${n} 1`)), 600_000)
    .catch((e) => say(String(e)));
  const cpu3 = await cpu();
  const wave = nodes.filter((n) => arrived.has(`${n} 1`)).map((n) =>
    arrived.get(`${n} 1`)! - published.get(n)!
  ).sort((a, b) => a - b);
  const whole = Math.max(...nodes.map((n) => arrived.get(`${n} 1`) ?? 0)) -
    Math.min(...published.values());
  rows.push([
    "declaration to all: publish to report",
    `p50 ${quantile(wave, 0.5)} ms, p99 ${quantile(wave, 0.99)} ms; first publish to last report ${
      seconds(whole)
    } (${wave.length} of ${N}; ${PUBLISH_AT_ONCE} published at once)`,
  ]);
  rows.push([
    "CPU for that wave",
    `servers ${(cpu3.servers - cpu2.servers).toFixed(0)} s, nodes ${
      (cpu3.nodes - cpu2.nodes).toFixed(0)
    } s`,
  ]);
  // One node at a time, the fleet idle.
  const single: number[] = [];
  for (let i = 0; i < 20; i++) {
    const node = nodes[Math.floor(Math.random() * N)];
    const at = await publish(node, 2 + i);
    const deadline = Date.now() + 30_000;
    while (!arrived.has(`${node} ${2 + i}`) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    if (arrived.has(`${node} ${2 + i}`)) single.push(arrived.get(`${node} ${2 + i}`)! - at);
  }
  single.sort((a, b) => a - b);
  rows.push([
    "one node's push, fleet idle",
    `p50 ${quantile(single, 0.5)} ms, p99 ${quantile(single, 0.99)} ms (${single.length} samples)`,
  ]);
  sub.unsubscribe();

  // Every server killed and started again: every link up and caught up.
  const restartAt = Date.now();
  await Promise.all(cluster.members.map((m) => m.kill()));
  await Promise.all(cluster.members.map((m) => m.start()));
  const back = () => nodes.filter((n) => (events.caughtUp.get(n) ?? 0) > restartAt).length;
  await wait("caught up after the restart", () => back() + events.failed.length >= N, 600_000)
    .catch((e) => say(String(e)));
  rows.push([
    "every server restarted: all linked and caught up",
    `${seconds(Date.now() - restartAt)} (${back()} of ${N})`,
  ]);
  rows.push(["node warnings logged", String(events.logs)]);
} catch (error) {
  if ((error as Error).message !== "stalled") throw error;
} finally {
  for (const w of workers) {
    try {
      w.kill("SIGTERM");
    } catch { /* ended */ }
  }
  await Promise.all(workers.map((w) => w.status));
  await control.close();
  await cluster.stop();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
const table = [
  `N = ${N}, servers' environment ${
    Object.entries(serverEnv).map(([k, v]) => `${k}=${v}`).join(" ")
  }: ${await context.line()}`,
  "",
  "| measure | value |",
  "| --- | --- |",
  ...rows.map(([k, v]) => `| ${k} | ${v} |`),
].join("\n");
console.log(table);
if (values.write) await Deno.writeTextFile(values.write, `\n${table}\n`, { append: true });
// Enrolment requests still queued in the control plane (a stalled run) would keep this
// process writing into the removed directory: it ends here.
Deno.exit(0);
