/**
 * `deno task bench:broker [--clients K] [--processes P] [--layers a,b,…] [--gogc N]
 * [--gomemlimit SIZE] [--settle S] [--write FILE]`: what one node costs the broker, layer by
 * layer (issue 35: the floor under "broker memory ≤ 100 KiB per node"). For each layer it
 * starts fresh nats-servers (this machine's, on 127.0.0.1), opens K client connections
 * shaped as a node's link (tests/bench/_floor_worker.ts, K/P per process), lets them idle,
 * and reads what the servers hold:
 *
 * - resident memory (/varz `mem`) with every client up, less what the servers held before
 *   the first, over K: the figure bench:scale calls "broker memory per node";
 * - Go's own accounts (`runtime.MemStats` from the servers' profiling port, on loopback):
 *   the heap in use and its live objects, goroutine stacks, and the goroutines per client;
 * - the same after a forced collection (the profile's `gc=1`), and the resident memory 10 s
 *   later (or `--settle`'s, when shorter): how much of the resident figure is heap not yet collected (GOGC's headroom);
 * - where the live heap was allocated (the heap profile, scaled from its samples), by the
 *   first function outside Go's runtime and standard containers.
 *
 * The layers, each adding one thing to the one before:
 *   bare     one server, plain TCP, no authentication, no subscription
 *   tls      + TLS (the mesh's: EC P-256 under one CA)
 *   subs     + the node's subscriptions (its push subject, the client's request inbox)
 *   jwt      + operator mode: each client a user of NODES with its own JWT and permissions,
 *            the mesh's accounts (lab/mesh/operator.ts), the push subject imported from CONTROL
 *   cluster  + three servers routed (TLS, route login), clients spread over them: the node's
 *            subscriptions are interest on all three
 *   routed   the same cluster with every client on the first server: the others hold only
 *            the routed interest (the split of `cluster`)
 *
 * `--gogc` and `--gomemlimit` are given to every server as GOGC and GOMEMLIMIT.
 * A benchmark, never a test: the figures go to tests/bench/RESULTS.md.
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { createUser } from "@nats-io/nkeys";
import { makeCertificates } from "../../lab/lib/certs.ts";
import { renderNatsConfig } from "../../lab/lib/nats_config.ts";
import { newRouteCredentials } from "../../lab/lib/routes.ts";
import { newOperatorSeeds, nodeUserJwt, operatorInclude } from "../../lab/mesh/operator.ts";
import { signerOf } from "../../src/link/_nkeys.ts";
import { benchContext } from "./_context.ts";
import { type GoMemory, goMemory, sumGo, topSites } from "./_go_memory.ts";
import { spawnWorker } from "./_workers.ts";

interface Layer {
  servers: number;
  tls: boolean;
  subs: boolean;
  jwt: boolean;
  /** Every client on the first server (else spread over all). */
  first: boolean;
  what: string;
}

const LAYERS: Record<string, Layer> = {
  bare: {
    servers: 1,
    tls: false,
    subs: false,
    jwt: false,
    first: true,
    what: "one server, TCP, no auth, no subscription",
  },
  tls: { servers: 1, tls: true, subs: false, jwt: false, first: true, what: "+ TLS" },
  subs: {
    servers: 1,
    tls: true,
    subs: true,
    jwt: false,
    first: true,
    what: "+ push subscription and request inbox",
  },
  jwt: {
    servers: 1,
    tls: true,
    subs: true,
    jwt: true,
    first: true,
    what: "+ operator mode: own user JWT, mesh accounts",
  },
  cluster: {
    servers: 3,
    tls: true,
    subs: true,
    jwt: true,
    first: false,
    what: "+ three servers routed, clients spread",
  },
  routed: {
    servers: 3,
    tls: true,
    subs: true,
    jwt: true,
    first: true,
    what: "three servers, every client on the first",
  },
};

const { values } = parseArgs({
  args: Deno.args,
  options: {
    clients: { type: "string" },
    processes: { type: "string" },
    layers: { type: "string" },
    gogc: { type: "string" },
    gomemlimit: { type: "string" },
    settle: { type: "string" },
    "at-once": { type: "string" },
    write: { type: "string" },
  },
});
const K = Number(values.clients ?? 2000);
const P = Math.max(1, Math.min(K, Number(values.processes ?? Math.ceil(K / 2500))));
const SETTLE_S = Number(values.settle ?? 15);
const AT_ONCE = Math.max(1, Number(values["at-once"] ?? 32));
const chosen = (values.layers ?? Object.keys(LAYERS).join(",")).split(",").filter(Boolean);
const stop = (line: string): never => {
  console.error(`bench:broker: ${line}`);
  Deno.exit(64);
};
if (!Number.isSafeInteger(K) || K < 1 || K > 20_000) stop("--clients takes 1 to 20000");
for (const l of chosen) {
  if (!LAYERS[l]) stop(`no layer "${l}"; the layers: ${Object.keys(LAYERS).join(", ")}`);
}
if (values.gogc !== undefined && !/^([0-9]+|off)$/.test(values.gogc)) {
  stop(`--gogc takes a percentage or "off", not "${values.gogc}"`);
}
if (values.gomemlimit !== undefined && !/^[0-9]+(KiB|MiB|GiB)?$/.test(values.gomemlimit)) {
  stop(`--gomemlimit takes a size such as 900MiB, not "${values.gomemlimit}"`);
}
const goEnv: Record<string, string> = {
  ...(values.gogc !== undefined ? { GOGC: values.gogc } : {}),
  ...(values.gomemlimit !== undefined ? { GOMEMLIMIT: values.gomemlimit } : {}),
};
const context = await benchContext();
const WORKER = new URL("./_floor_worker.ts", import.meta.url).pathname;
const say = (line: string) => console.log(`bench:broker: ${line}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

async function get(url: string): Promise<string> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return await response.text();
}

async function varz(s: Server): Promise<Record<string, number>> {
  return JSON.parse(await get(`http://127.0.0.1:${s.http}/varz`));
}

/** One running nats-server of a layer. */
interface Server {
  name: string;
  url: string;
  http: number;
  prof: number;
  child: Deno.ChildProcess;
  log: string;
}

function cpuOf(pid: number): number {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

async function waitFor(what: string, ms: number, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await sleep(200);
  }
}

/** Starts a layer's servers in `dir` and waits until they are ready (and routed). */
async function startServers(dir: string, layer: Layer): Promise<Server[]> {
  const names = Array.from({ length: layer.servers }, (_, i) => `floor${i + 1}`);
  const ports = names.map(() => ({
    client: freePort(),
    route: freePort(),
    http: freePort(),
    prof: freePort(),
  }));
  const routes = newRouteCredentials();
  if (layer.jwt) {
    await Deno.writeTextFile(join(dir, "operator.conf"), await operatorInclude(operatorSeeds));
  }
  const servers: Server[] = [];
  for (const [i, name] of names.entries()) {
    const certs = await makeCertificates(dir, {
      names: ["localhost"],
      ips: ["127.0.0.1"],
      server: name,
    });
    const configFile = join(dir, `${name}.conf`);
    const p = ports[i];
    await Deno.writeTextFile(
      configFile,
      renderNatsConfig({
        header: "bench:broker (tests/bench/broker_floor.ts): one server of a layer",
        serverName: name,
        listen: `127.0.0.1:${p.client}`,
        maxPayload: "8MB",
        http: `127.0.0.1:${p.http}`,
        ...(layer.tls ? { tls: { certFile: certs.certFile, keyFile: certs.keyFile } } : {}),
        ...(layer.servers > 1
          ? {
            cluster: {
              name: "floor",
              listen: `127.0.0.1:${p.route}`,
              routes: ports.filter((_, j) => j !== i).map((o) => `127.0.0.1:${o.route}`),
              tls: { ...certs, verify: true },
              credentials: routes,
            },
          }
          : {}),
        ...(layer.jwt
          ? { operator: { include: "operator.conf", resolver: { dir: join(dir, `jwt-${name}`) } } }
          : {}),
        // Go's profiles (the heap's statistics and sites), on loopback only.
        extra: `prof_port: ${p.prof}`,
      }),
      { mode: 0o600 },
    );
    const log = join(dir, `${name}.log`);
    const child = new Deno.Command("nats-server", {
      args: ["-c", configFile, "-l", log],
      env: goEnv,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    servers.push({
      name,
      url: `${layer.tls ? "tls" : "nats"}://127.0.0.1:${p.client}`,
      http: p.http,
      prof: p.prof,
      child,
      log,
    });
  }
  for (const s of servers) {
    await waitFor(
      `${s.name} ready`,
      30_000,
      async () => (await Deno.readTextFile(s.log)).includes("Server is ready"),
    );
  }
  if (layer.servers > 1) {
    for (const s of servers) {
      await waitFor(
        `${s.name} routed`,
        60_000,
        async () =>
          Number(JSON.parse(await get(`http://127.0.0.1:${s.http}/routez`)).num_routes) >=
            layer.servers - 1,
      );
    }
  }
  return servers;
}

async function stopServers(servers: Server[]): Promise<void> {
  for (const s of servers) {
    try {
      s.child.kill("SIGTERM");
    } catch { /* gone */ }
  }
  await Promise.all(servers.map(async (s) => {
    const done = await Promise.race([
      s.child.status.then(() => true),
      sleep(10_000).then(() => false),
    ]);
    if (!done) {
      try {
        s.child.kill("SIGKILL");
      } catch { /* gone */ }
      await s.child.status;
    }
  }));
}

/** The clients of every layer: node names, and (for operator mode) each one's JWT and seed. */
const operatorSeeds = newOperatorSeeds();
const nodes = Array.from({ length: K }, (_, i) => `f${i + 1}`);
const minted = Date.now();
const users = await Promise.all(nodes.map(async (node) => {
  const seed = text(createUser().getSeed());
  return { node, seed, jwt: await nodeUserJwt(operatorSeeds, node, signerOf(seed).publicKey) };
}));
say(`${K} user JWTs minted in ${((Date.now() - minted) / 1000).toFixed(1)} s`);

interface Result {
  layer: string;
  up: number;
  failed: number;
  connectS: number;
  serverCpuS: number;
  before: { mem: number; go: GoMemory };
  linked: { mem: number; go: GoMemory; subs: number; perServer: string };
  collected: { go: GoMemory; mem: number };
  sites: Map<string, number>;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
async function runLayer(name: string): Promise<Result> {
  const layer = LAYERS[name];
  const dir = await Deno.makeTempDir({ prefix: `noxln-floor-${name}-` });
  const servers = await startServers(dir, layer);
  const workers: Deno.ChildProcess[] = [];
  try {
    await sleep(3000);
    const before = {
      mem: sum(await Promise.all(servers.map(async (s) => (await varz(s)).mem))),
      go: sumGo(await Promise.all(servers.map((s) => goMemory(`127.0.0.1:${s.prof}`)))),
    };
    const ca = layer.tls ? await Deno.readTextFile(join(dir, "ca.pem")) : undefined;
    const cpu0 = sum(servers.map((s) => cpuOf(s.child.pid)));
    const started = Date.now();
    let up = 0;
    let failed = 0;
    let ready = 0;
    for (let w = 0; w < P; w++) {
      const mine = users.filter((_, i) => i % P === w);
      const input = join(dir, `worker-${w}.json`);
      await Deno.writeTextFile(
        input,
        JSON.stringify({
          ...(ca ? { ca } : {}),
          subs: layer.subs,
          atOnce: Math.max(1, Math.round(AT_ONCE / P)),
          clients: mine.map((u, j) => ({
            node: u.node,
            url: servers[layer.first ? 0 : (j * P + w) % servers.length].url,
            ...(layer.jwt ? { jwt: u.jwt, seed: u.seed } : {}),
          })),
        }),
      );
      const child = spawnWorker(WORKER, input, (e) => {
        if (e.event === "ready") {
          ready++;
          up += Number(e.up);
          failed += Number(e.failed);
        } else if (e.event === "failed" && failed === 0) {
          say(`${name}: first failure: ${e.node}: ${String(e.why).slice(0, 300)}`);
        }
      });
      workers.push(child);
    }
    let said = Date.now();
    await waitFor(`${name}: every client up`, 900_000, async () => {
      if (Date.now() - said > 30_000) {
        said = Date.now();
        const conns = sum(await Promise.all(servers.map(async (s) => (await varz(s)).connections)));
        say(`${name}: ${conns} of ${K} connected`);
      }
      return ready === P;
    });
    const connectS = (Date.now() - started) / 1000;
    const serverCpuS = sum(servers.map((s) => cpuOf(s.child.pid))) - cpu0;
    await sleep(SETTLE_S * 1000);
    const v = await Promise.all(servers.map(varz));
    const linked = {
      mem: sum(v.map((x) => x.mem)),
      go: sumGo(await Promise.all(servers.map((s) => goMemory(`127.0.0.1:${s.prof}`)))),
      subs: sum(v.map((x) => x.subscriptions)),
      perServer: v.map((x) =>
        `${(x.mem / 2 ** 20).toFixed(0)} MiB, ${x.connections} conns, ${x.subscriptions} subs`
      ).join("; "),
    };
    const sites = new Map<string, number>();
    const collectedGo = sumGo(
      await Promise.all(servers.map((s) => goMemory(`127.0.0.1:${s.prof}`, { gc: true, sites }))),
    );
    await sleep(Math.min(10, SETTLE_S) * 1000);
    const collected = {
      go: collectedGo,
      mem: sum(await Promise.all(servers.map(async (s) => (await varz(s)).mem))),
    };
    return { layer: name, up, failed, connectS, serverCpuS, before, linked, collected, sites };
  } finally {
    for (const w of workers) {
      try {
        w.kill("SIGTERM");
      } catch { /* ended */ }
    }
    await Promise.all(workers.map((w) => w.status));
    await stopServers(servers);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

const results: Result[] = [];
for (const name of chosen) {
  say(`layer ${name} (${LAYERS[name].what}): ${K} clients in ${P} processes`);
  const r = await runLayer(name);
  say(
    `layer ${name}: ${r.up} up, ${r.failed} failed in ${r.connectS.toFixed(1)} s; ` +
      `${((r.linked.mem - r.before.mem) / K / 1024).toFixed(1)} KiB resident per client`,
  );
  results.push(r);
}

const kib = (bytes: number) => (bytes / K / 1024).toFixed(1);
const env = Object.entries(goEnv).map(([k, v]) => `${k}=${v}`).join(" ") || "Go's defaults";
const lines = [
  `K = ${K} clients, ${P} processes, ${env}: ${await context.line()}`,
  "",
  "KiB per client (all servers of the layer, each figure with every client up less before the first):",
  "",
  "| layer | up (failed) | resident | heap in use | heap live (alloc) | stacks | goroutines per client | after a forced GC: heap live / resident 10 s later | subscriptions | connect (server CPU) |",
  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ...results.map((r) =>
    `| ${r.layer} | ${r.up} (${r.failed}) | ${kib(r.linked.mem - r.before.mem)} | ${
      kib(r.linked.go.heapInuse - r.before.go.heapInuse)
    } | ${kib(r.linked.go.heapAlloc - r.before.go.heapAlloc)} | ${
      kib(r.linked.go.stackInuse - r.before.go.stackInuse)
    } | ${((r.linked.go.goroutines - r.before.go.goroutines) / K).toFixed(2)} | ${
      kib(r.collected.go.heapAlloc - r.before.go.heapAlloc)
    } / ${kib(r.collected.mem - r.before.mem)} | ${r.linked.subs} | ${r.connectS.toFixed(0)} s (${
      r.serverCpuS.toFixed(0)
    } s) |`
  ),
  "",
  ...results.map((r) =>
    `- ${r.layer}, each server linked: ${r.linked.perServer}; GCs ${r.linked.go.numGc}`
  ),
  "",
  "Live heap after a forced GC by where it was allocated (KiB per client, the profile's samples scaled; the top 8 and the rest):",
  "",
  ...results.map((r) => `- ${r.layer}: ${topSites(r.sites, K)}`),
];
const table = lines.join("\n");
console.log(table);
if (values.write) await Deno.writeTextFile(values.write, `\n${table}\n`, { append: true });
