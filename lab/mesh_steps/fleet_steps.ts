/**
 * Scenario steps for fleets of light nodes on the lab's NATS cluster (scenarios
 * fleet, broker-failover, site; `deno task bench:fleet`). Light nodes are
 * `plain` machines: no init system; the packaged host (the tarball, under its
 * permission set) is started in the background by a step, its output kept in
 * /var/log/nox-mesh-host.log. The control plane's clients run in the first
 * server's namespace (steps.ts `mesh`).
 */
import { join } from "node:path";
import type { Lab } from "../lib/lab.ts";
import { HOST_PATH, hostCommand } from "../lib/host.ts";
import type { Machine } from "../lib/machine.ts";
import { fail, type Step, type StepContext } from "../lib/scenario.ts";
import { mesh, meshArgs } from "./link_steps.ts";
import { CHECKOUT } from "../lib/bundle.ts";
import type { RolloutRow, StreamPlacement } from "../mesh/fleet.ts";
import type { BrokerCluster, NatsServer } from "../lib/cluster.ts";
import { until } from "../lib/_process.ts";

/** Where a light node's host writes its output. */
export const PLAIN_HOST_LOG = "/var/log/nox-mesh-host.log";

/** Names `prefix1` … `prefixN`. */
export function fleetNames(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);
}

/** Runs `work` on every item, at most `limit` at a time. */
export async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/** What a fleet scenario measured (printed by its steps, read by bench:fleet). */
export interface FleetFigures {
  rollouts: { serial: number; rows: RolloutRow[] }[];
  killedAt?: number;
  victim?: string;
  /** The nodes whose link was on the victim when it was killed. */
  onVictim?: string[];
  brokerMemory?: { server: string; bytes: number; connections: number }[];
  hostRss?: number[];
}

/** Figures of the last fleet scenario run in this process. */
export const figures: FleetFigures = { rollouts: [] };

/** How many machines of a fleet enrol at the same moment. */
export const ENROL_AT_ONCE = 8;

/**
 * Each machine (named as its node) enrols with a one-time token listing every
 * server of the cluster, ENROL_AT_ONCE at a time, while one enrolment service answers all.
 */
export function enrolFleet(nodes: string[], via?: string): Step {
  return {
    title: `${nodes.length} nodes enrol (tokens list ${via ? `the leaf ${via}` : "every server"})`,
    timeoutS: 120 + nodes.length * 10,
    async run(ctx) {
      const args = ["tokens", ...(via ? ["--via", via] : []), ...nodes];
      const tokens = JSON.parse(await mesh(ctx, args, 300_000)) as Record<
        string,
        string
      >;
      await using service = await serveEnrolments(ctx, nodes.length, 60 + nodes.length * 10);
      // Eight at a time, as an operator with a batch of tokens would (no server reloads for
      // any of it: each answer carries the node's JWT).
      await eachLimited(nodes, ENROL_AT_ONCE, async (node) => {
        const m = ctx.machine(node);
        const r = await m.exec([hostCommand(m), "enrol", "--token", "-"], {
          input: tokens[node],
        });
        if (r.code !== 0) fail(`${node} enrolled`, `exit ${r.code}: ${r.stderr.trim()}`);
      });
      await service.finished();
    },
  };
}

/** The control plane's enrolment service, answering (see serveEnrolments). */
export interface EnrolmentService extends AsyncDisposable {
  /** Wait until it has answered its count and ended; a failure fails the step. */
  finished(): Promise<void>;
}

/**
 * Starts the control plane's enrolment service (`mesh serve`) for `count` enrolments
 * within `timeoutS`, and returns once it says it answers. Disposing of it stops it.
 */
export async function serveEnrolments(
  ctx: StepContext,
  count: number,
  timeoutS: number,
): Promise<EnrolmentService> {
  const serve = new Deno.Command("nsenter", {
    args: meshArgs(ctx, ["serve", "--count", String(count), "--timeout", String(timeoutS)]),
    cwd: CHECKOUT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stop = async () => {
    try {
      serve.kill("SIGTERM");
    } catch { /* finished */ }
    await serve.status;
  };
  const reader = serve.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = new Response(serve.stderr).text();
  try {
    let seen = "";
    while (!seen.includes("answering enrolments")) {
      const { value, done } = await reader.read();
      if (done) fail("the enrolment service to start", seen + (await stderr));
      seen += value;
    }
  } catch (error) {
    await stop();
    throw error;
  }
  // What it says from now on is drained, so that it never blocks on a full pipe.
  const drained = (async () => {
    while (!(await reader.read()).done) { /* drained */ }
  })();
  return {
    async finished() {
      await drained;
      if (!(await serve.status).success) {
        fail("the enrolment service to answer every node", await stderr);
      }
    },
    [Symbol.asyncDispose]: stop,
  };
}

/**
 * Starts the packaged host on a light machine (no init) the way the tarball's init
 * files do: its launcher (`nox-mesh-host-launch run …`, NOX_MESH_HOST_PKG=tarball)
 * in the background, in its own session, which runs the host and starts it again
 * when it dies. Both write to PLAIN_HOST_LOG.
 */
export async function startPlainHost(
  m: Machine,
  heartbeatS: number,
  driftS = 600,
): Promise<void> {
  const r = await m.exec([
    "/bin/sh",
    "-c",
    `setsid "$1" run --heartbeat-interval "$2" --drift-interval "$3" >>"$4" 2>&1 </dev/null &`,
    "start-host",
    `${hostCommand(m)}-launch`,
    String(heartbeatS),
    String(driftS),
    PLAIN_HOST_LOG,
  ], {
    env: {
      PATH: HOST_PATH,
      NOX_MESH_HOST_PKG: "tarball",
      NOX_MESH_HOST_BIN: hostCommand(m),
      NOX_MESH_HOST_STATE_DIR: "/var/lib/mesh-host",
    },
  });
  if (r.code !== 0) fail(`the host started on ${m.name}`, `exit ${r.code}: ${r.stderr.trim()}`);
}

/**
 * SIGKILL of the host on `node` (its launcher lives on): the launcher starts it
 * again, counting a failure, and the new process's link comes up.
 */
export function killHostOnce(node: string): Step {
  return {
    title: `kill -9 the host on ${node}; its launcher starts it again and its link comes up`,
    timeoutS: 120,
    async run(ctx) {
      const m = ctx.machine(node);
      const pidOf = async () =>
        ((await hostStatus(m)).service as { pid?: number; running?: boolean } | null) ?? null;
      const before = await pidOf();
      if (!before?.running || !before.pid) {
        fail(`a running host on ${node}`, JSON.stringify(before));
      }
      // The shell's own kill: a light machine may have no kill program.
      const killed = await m.exec(["/bin/sh", "-c", 'kill -9 "$1"', "kill", String(before.pid)]);
      if (killed.code !== 0) fail(`kill -9 ${before.pid} on ${node}`, killed.stderr.trim());
      await until(`the host on ${node} running again with its link up`, 90_000, async () => {
        const s = await hostStatus(m).catch(() => undefined);
        const service = s?.service as { pid?: number; running?: boolean } | null | undefined;
        const link = s?.link as { state?: string } | undefined;
        return service?.running && service.pid !== before.pid && link?.state === "up"
          ? true
          : undefined;
      }, 250);
      const log = (await m.exec(["cat", PLAIN_HOST_LOG])).stdout;
      if (!/nox-mesh-host failed \(exit 137\), 1 in a row; starting again/.test(log)) {
        fail(
          `the launcher on ${node} saying it starts the killed host again`,
          log.split("\n").filter((l) => l.startsWith("nox-mesh-host-launch:")).slice(-5).join(
            " | ",
          ),
        );
      }
    },
  };
}

/** `status --json` of the host on a machine. */
export async function hostStatus(m: Machine): Promise<Record<string, unknown>> {
  const r = await m.exec([hostCommand(m), "status", "--json"], { env: { PATH: HOST_PATH } });
  try {
    return JSON.parse(r.stdout);
  } catch {
    return fail(`status --json on ${m.name}`, `exit ${r.code}: ${r.stderr.trim()}`);
  }
}

/** Starts each node's host (light machines) and waits until every link is up. */
export function startFleet(nodes: string[], heartbeatS = 5, driftS = 600): Step {
  return {
    title: `start the packaged host on ${nodes.length} light machines; every link comes up`,
    timeoutS: 120 + nodes.length * 4,
    async run(ctx) {
      await eachLimited(nodes, 8, (n) => startPlainHost(ctx.machine(n), heartbeatS, driftS));
      const deadline = Date.now() + (60 + nodes.length * 3) * 1000;
      const pending = new Set(nodes);
      while (pending.size) {
        for (const n of [...pending]) {
          const s = await hostStatus(ctx.machine(n)).catch(() => undefined);
          if ((s?.link as { state?: string } | undefined)?.state === "up") pending.delete(n);
        }
        if (pending.size && Date.now() > deadline) {
          const m = ctx.machine([...pending][0]);
          const log = await m.exec(["tail", "-n", "20", PLAIN_HOST_LOG]);
          fail("every link up", `${[...pending].join(", ")} not up; ${m.name}: ${log.stdout}`);
        }
        if (pending.size) await new Promise((resolve) => setTimeout(resolve, 500));
      }
    },
  };
}

/** The declaration of a rollout: one file per node, its content naming node and serial. */
export function fleetDeclaration(serial: number): string {
  return JSON.stringify({
    version: 1,
    resources: [{
      type: "file",
      id: "fleet",
      path: "/srv/fleet",
      content: `{{node}} serial ${serial}\n`,
      mode: "0644",
      owner: "root",
      group: "root",
    }],
  });
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

/** "p50 … p99 … max …" of publish-to-applied times, in ms. */
export function latencyLine(rows: RolloutRow[]): string {
  const ms = rows.filter((r) => r.appliedAt !== undefined).map((r) => r.appliedAt! - r.publishedAt)
    .sort((a, b) => a - b);
  if (ms.length === 0) return "no node applied";
  const all = Math.max(...rows.map((r) => r.appliedAt ?? 0)) -
    Math.min(...rows.map((r) => r.publishedAt));
  return `publish to applied over ${ms.length} nodes: p50 ${quantile(ms, 0.5)} ms, p99 ${
    quantile(ms, 0.99)
  } ms, max ${ms.at(-1)} ms; first publish to last applied ${all} ms`;
}

/**
 * The control plane publishes serial `serial` to every node (one declaration each)
 * and waits until every node reported it applied and converged. `during` runs when
 * half the fleet has its declaration (the rest follows 1.5 s later): e.g. a server
 * is killed.
 */
export function rolloutFleet(
  nodes: string[],
  serial: number,
  during?: { title: string; run: (ctx: StepContext) => Promise<void> },
): Step {
  return {
    title: `roll serial ${serial} out to ${nodes.length} nodes; every node reports it applied` +
      (during ? ` (${during.title} during the rollout)` : ""),
    timeoutS: 240 + nodes.length * 2,
    async run(ctx) {
      const file = join(ctx.lab.dir, "mesh", `fleet-${serial}.json`);
      await Deno.writeTextFile(file, fleetDeclaration(serial));
      const args = ["rollout", file, "--serial", String(serial), "--timeout", "180", ...nodes];
      if (!during) {
        const rows = JSON.parse(await mesh(ctx, args, 230_000)) as RolloutRow[];
        return report(ctx, serial, rows);
      }
      // Half the fleet gets its declaration, then the action, then the other half.
      const half = Math.floor(nodes.length / 2);
      const child = new Deno.Command("nsenter", {
        args: meshArgs(ctx, [...args, "--pause-after", String(half), "--pause-ms", "1500"]),
        cwd: CHECKOUT,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stdout = new Response(child.stdout).text();
      const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
      let seen = "";
      while (!seen.includes("paused after")) {
        const { value, done } = await reader.read();
        if (done) fail("the rollout to pause half-way", seen.slice(-600));
        seen += value;
      }
      await during.run(ctx);
      const rest = (async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return seen;
          seen += value;
        }
      })();
      const status = await child.status;
      const out = await stdout;
      await rest;
      if (!status.success) {
        fail("the rollout to finish", `exit ${status.code}: ${seen.slice(-600)}`);
      }
      return report(ctx, serial, JSON.parse(out) as RolloutRow[]);
    },
  };
}

function report(ctx: StepContext, serial: number, rows: RolloutRow[]): void {
  figures.rollouts.push({ serial, rows });
  ctx.lab.log(`serial ${serial}: ${latencyLine(rows)}`);
  const missing = rows.filter((r) => r.appliedAt === undefined).map((r) => r.node);
  if (missing.length) fail("every node's apply report", `none from ${missing.join(", ")}`);
  const bad = rows.filter((r) => r.outcome !== "converged");
  if (bad.length) {
    fail("every apply converged", bad.map((r) => `${r.node}: ${r.outcome}`).join(", "));
  }
}
/** The control plane publishes serial `serial` to every node and does not wait for reports. */
export function publishFleet(nodes: string[], serial: number): Step {
  return {
    title: `the control plane publishes serial ${serial} to ${nodes.length} nodes`,
    async run(ctx) {
      const file = join(ctx.lab.dir, "mesh", `fleet-${serial}.json`);
      await Deno.writeTextFile(file, fleetDeclaration(serial));
      await mesh(ctx, ["rollout", file, "--serial", String(serial), "--timeout", "0", ...nodes]);
    },
  };
}

/**
 * On each node a person overwrites /srv/fleet; the host's drift reconcile puts serial
 * `serial`'s content back from its store (no broker needed).
 */
export function driftRepairsOn(nodes: string[], serial: number): Step {
  return {
    title: `edit /srv/fleet on ${nodes.join(", ")}; each host repairs it from its store ` +
      `(serial ${serial})`,
    timeoutS: 90,
    async run(ctx) {
      await eachLimited(nodes, 8, async (n) => {
        const m = ctx.machine(n);
        await m.writeFile("/srv/fleet", "edited by a person\n");
        const want = `${n} serial ${serial}\n`;
        await until(`${n}'s drift repair`, 60_000, async () => {
          const r = await m.exec(["cat", "/srv/fleet"]);
          return r.stdout === want ? true : undefined;
        }, 500);
      });
    },
  };
}

/** Every node's /srv/fleet holds its serial's content (the machine, not the report). */
export function assertFleetFiles(nodes: string[], serial: number): Step {
  return {
    title: `assert every node's /srv/fleet is serial ${serial}'s`,
    async run(ctx) {
      const wrong: string[] = [];
      await eachLimited(nodes, 8, async (n) => {
        const r = await ctx.machine(n).exec(["cat", "/srv/fleet"]);
        if (r.stdout !== `${n} serial ${serial}\n`) wrong.push(`${n}: ${JSON.stringify(r.stdout)}`);
      });
      if (wrong.length) fail(`serial ${serial} everywhere`, wrong.join("; "));
    },
  };
}

/**
 * The broker keeps each node's reports once: no message id twice, none without one,
 * and for each of `serials` exactly one report of its declaration's apply.
 */
export function assertReportsOnce(nodes: string[], serials: number[]): Step {
  return {
    title: `assert the broker keeps every node's reports once (serials ${
      serials.join(", ")
    }) and a heartbeat of each`,
    timeoutS: 60 + nodes.length * 2,
    async run(ctx) {
      const tallies = JSON.parse(await mesh(ctx, ["tally", ...nodes], 120_000)) as {
        node: string;
        applies: { serial: number | null; trigger: string }[];
        duplicateIds: number;
        withoutId: number;
        heartbeat: boolean;
      }[];
      const problems: string[] = [];
      for (const t of tallies) {
        if (t.duplicateIds) problems.push(`${t.node}: ${t.duplicateIds} ids twice`);
        if (t.withoutId) problems.push(`${t.node}: ${t.withoutId} without an id`);
        if (!t.heartbeat) problems.push(`${t.node}: no heartbeat in MESH_BEAT`);
        for (const serial of serials) {
          const n = t.applies.filter((a) => a.serial === serial && a.trigger === "declaration")
            .length;
          if (n !== 1) problems.push(`${t.node}: ${n} declaration reports of serial ${serial}`);
        }
      }
      if (problems.length) fail("one report each", problems.slice(0, 10).join("; "));
    },
  };
}

/** The stream placement as the control plane reads it. */
async function placementOf(ctx: StepContext): Promise<StreamPlacement[]> {
  return JSON.parse(await mesh(ctx, ["placement"]));
}

/** The lab's running cluster (fails the step when there is none). */
export function clusterOf(lab: Lab): BrokerCluster {
  const cluster = lab.runningCluster;
  if (!cluster) fail("a running cluster", "none (meshUpCluster first)");
  return cluster;
}

/** The server that leads MESH_REPORT now (the outbox's acknowledgements come from it). */
export async function reportLeader(ctx: StepContext): Promise<NatsServer> {
  const report = (await placementOf(ctx)).find((p) => p.stream === "MESH_REPORT");
  const server = clusterOf(ctx.lab).servers.find((s) => s.name === report?.leader);
  if (!server) fail("a leader of MESH_REPORT", JSON.stringify(report));
  return server;
}

/** Which server each node's link is on now (its `status --json` link.server, a URL). */
async function serversOfNodes(ctx: StepContext, nodes: string[]): Promise<Map<string, string>> {
  const on = new Map<string, string>();
  await eachLimited(nodes, 8, async (n) => {
    const link = (await hostStatus(ctx.machine(n))).link as { server?: string };
    if (link.server) on.set(n, link.server);
  });
  return on;
}

/** How many times the report stream's leader may be asked to step down before the kill. */
const STEPDOWNS = 8;

/**
 * Kills (SIGKILL) the server leading MESH_REPORT; remembered for the later steps,
 * with the nodes that were on it. Each node starts at a random server, so a small
 * fleet may have none on the leader (6 nodes: 1 run in 11); the leader is then asked
 * to step down until it is a server that some node uses, so that every run sees
 * nodes move.
 */
export function killReportLeader(nodes: string[]): (ctx: StepContext) => Promise<void> {
  return async (ctx) => {
    let victim = await reportLeader(ctx);
    let on = await serversOfNodes(ctx, nodes);
    for (let i = 0; i < STEPDOWNS && ![...on.values()].includes(victim.url); i++) {
      ctx.lab.log(`no node is on ${victim.name}, the leader of MESH_REPORT: it steps down`);
      const before = victim.name;
      await mesh(ctx, ["stepdown", "MESH_REPORT"]);
      await until(`a new leader of MESH_REPORT after ${before} stepped down`, 15_000, async () => {
        // While the replicas elect, the stream's info may be refused: asked again.
        const now = (await placementOf(ctx).catch(() => []))
          .find((p) => p.stream === "MESH_REPORT");
        return now?.leader !== undefined && now.leader !== before ? now.leader : undefined;
      }, 200);
      victim = await reportLeader(ctx);
      on = await serversOfNodes(ctx, nodes);
    }
    figures.onVictim = [...on].filter(([, url]) => url === victim.url).map(([n]) => n);
    if (figures.onVictim.length === 0) {
      fail(`some node on the leader of MESH_REPORT after ${STEPDOWNS} step-downs`, "none");
    }
    figures.killedAt = Date.now();
    figures.victim = victim.name;
    await victim.kill();
    ctx.lab.log(
      `killed ${victim.name} (${victim.url}), the leader of MESH_REPORT, used by ` +
        figures.onVictim.join(", "),
    );
  };
}

/** Starts the killed server again (same configuration and store). */
export function restartVictim(): Step {
  return {
    title: "the killed server starts again",
    async run(ctx) {
      const victim = clusterOf(ctx.lab).servers.find((s) => s.name === figures.victim);
      if (!victim) fail("a killed server", "none");
      await victim.start();
    },
  };
}

/**
 * Every stream of the control plane is on all three servers again, each replica
 * current (JetStream's stream info), and /jsz of the restarted server says it
 * holds them.
 */
export function assertReplicasCurrent(): Step {
  return {
    title: "assert every stream has 3 replicas, all current (the restarted one included)",
    async run(ctx) {
      const servers = clusterOf(ctx.lab).servers.map((s) => s.name).sort();
      for (const p of await placementOf(ctx)) {
        const current = [p.leader, ...p.replicas.filter((r) => r.current).map((r) => r.name)]
          .filter((n): n is string => !!n).sort();
        if (JSON.stringify(current) !== JSON.stringify(servers)) {
          fail(`${p.stream} current on ${servers.join(", ")}`, JSON.stringify(p));
        }
      }
      const victim = clusterOf(ctx.lab).servers.find((s) => s.name === figures.victim);
      if (victim) {
        const jsz = await victim.monitor("jsz");
        if (Number(jsz.streams ?? 0) < 4) {
          fail(`${victim.name} /jsz holding 4 streams`, `${jsz.streams}`);
        }
      }
    },
  };
}

/**
 * Reads each node's `status --json` link.lastMove: the nodes that used the killed
 * server moved away from it; prints the histogram of their reconnect times (from
 * the kill to the move, 1 s buckets).
 */
export function reconnectHistogram(nodes: string[]): Step {
  return {
    title: "the nodes on the killed server moved to another; histogram of reconnect times",
    async run(ctx) {
      const victim = clusterOf(ctx.lab).servers.find((s) => s.name === figures.victim);
      if (!victim || figures.killedAt === undefined) fail("a killed server", "none");
      const times: number[] = [];
      const moved = new Set<string>();
      const wrong: string[] = [];
      await eachLimited(nodes, 8, async (n) => {
        const link = (await hostStatus(ctx.machine(n))).link as {
          state: string;
          server?: string;
          lastMove?: { from: string; to: string; at: string } | null;
        };
        if (link.state !== "up") wrong.push(`${n}: link ${link.state}`);
        if (link.server === victim.url && !victim.running) {
          wrong.push(`${n}: still on ${victim.url}`);
        }
        const move = link.lastMove;
        if (move && move.from === victim.url && Date.parse(move.at) >= figures.killedAt!) {
          times.push(Date.parse(move.at) - figures.killedAt!);
          moved.add(n);
        }
      });
      if (wrong.length) fail("every link up, none on the killed server", wrong.join("; "));
      const stayed = (figures.onVictim ?? []).filter((n) => !moved.has(n));
      if (stayed.length) {
        fail(
          `every node that was on ${victim.name} moved away after the kill`,
          `no move recorded by ${stayed.join(", ")}`,
        );
      }
      if (times.length === 0) fail("some node moved away from the killed server", "none moved");
      ctx.lab.log(`${times.length} of ${nodes.length} nodes moved from ${victim.name}:`);
      for (const line of histogram(times)) ctx.lab.log(line);
    },
  };
}

/** Text histogram of millisecond values in 1 s buckets. */
export function histogram(ms: number[]): string[] {
  const buckets = new Map<number, number>();
  for (const t of ms) {
    buckets.set(Math.floor(t / 1000), (buckets.get(Math.floor(t / 1000)) ?? 0) + 1);
  }
  const last = Math.max(...buckets.keys());
  const lines: string[] = [];
  for (let b = 0; b <= last; b++) {
    const n = buckets.get(b) ?? 0;
    lines.push(`  ${String(b).padStart(3)}-${String(b + 1).padEnd(3)} s ${"#".repeat(n)} ${n}`);
  }
  return lines;
}

/** Broker-side memory (/varz mem of each server) and each node's host RSS; printed. */
export function fleetMemory(nodes: string[]): Step {
  return {
    title: "broker memory (/varz) and each node's host RSS",
    timeoutS: 60 + nodes.length * 2,
    async run(ctx) {
      const cluster = clusterOf(ctx.lab);
      figures.brokerMemory = [];
      for (const s of [...cluster.servers, ...cluster.leaves].filter((s) => s.running)) {
        const varz = await s.monitor("varz");
        figures.brokerMemory.push({
          server: s.name,
          bytes: Number(varz.mem),
          connections: Number(varz.connections),
        });
      }
      const rss: number[] = [];
      await eachLimited(nodes, 8, async (n) => {
        const r = await ctx.machine(n).exec([
          "/bin/sh",
          "-c",
          `for p in /proc/[0-9]*; do
  if tr '\\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q 'nox-mesh-host.js run'; then
    sed -n 's/^VmRSS:[[:space:]]*\\([0-9]*\\) kB/\\1/p' "$p/status"
  fi
done`,
        ]);
        const kb = r.stdout.trim().split("\n").map(Number).filter((x) => x > 0);
        if (kb.length) rss.push(Math.max(...kb) * 1024);
      });
      figures.hostRss = rss.sort((a, b) => a - b);
      const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
      for (const b of figures.brokerMemory) {
        ctx.lab.log(`${b.server}: ${mib(b.bytes)} resident, ${b.connections} client connections`);
      }
      if (rss.length) {
        ctx.lab.log(
          `host RSS over ${rss.length} nodes: median ${mib(quantile(rss, 0.5))}, max ${
            mib(rss.at(-1)!)
          }`,
        );
      }
      if (rss.length !== nodes.length) {
        fail(`an RSS for each of ${nodes.length} hosts`, `${rss.length}`);
      }
    },
  };
}
