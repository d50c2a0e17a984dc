/**
 * One process of `deno task bench:scale`: many simulated nodes, each running the host's
 * own link code (src/link and the run loop's outbox): `enrol` with its token (its own
 * key, its own store), a `Link` kept up, heartbeats on a jittered timer, every
 * declaration pushed or caught up verified against the pinned signing key
 * (`verifyDeclaration`), the object it names read through the link (`contentSource`) and
 * checked by digest, and a report of each kept in its store's outbox and delivered with
 * a message id. Nothing here re-implements the protocol: the node's store is the host's
 * `Store`, the enrolment the host's `enrol`. What it does not run is the engine's apply
 * (nothing is written to the machine): a report says "converged" for what was verified.
 *
 * Input: a JSON file `{root, heartbeatS, nodes: [{node, token}]}` (argv[0]). Output: one
 * JSON line per event on stdout: `enrolled` (ms), `up` (reconnect, catch-up serial),
 * `verified` (serial, how it came), `failed` (why). It ends on SIGTERM.
 */
import { enrol } from "../../src/link/enrol.ts";
import { readSeed } from "../../src/link/identity.ts";
import { Link, type Pushed } from "../../src/link/link.ts";
import { isSignatureProblem, verifyDeclaration } from "../../src/link/signature.ts";
import { OutboxSender } from "../../src/run/outbox.ts";
import { Store } from "../../src/store/store.ts";
import { sha256Hex } from "../../src/declaration/canonical.ts";
import { jitteredDelay } from "../../src/run/timers.ts";
import type { Engine } from "../../src/engine/mod.ts";
import { VERSION } from "../../src/version.ts";

const input = JSON.parse(await Deno.readTextFile(Deno.args[0])) as {
  root: string;
  heartbeatS: number;
  /** How many enrol at once in this process. */
  enrolAtOnce: number;
  nodes: { node: string; token: string }[];
};

const say = (event: Record<string, unknown>) =>
  console.log(JSON.stringify({ ...event, t: Date.now() }));

interface Sim {
  node: string;
  store: Store;
  link: Link;
  outbox: OutboxSender;
  lastSerial: number;
  timer?: ReturnType<typeof setTimeout>;
}

const sims: Sim[] = [];
const decoder = new TextDecoder();

/** A pushed or caught-up declaration: verified, its object read, a report kept and sent. */
async function take(sim: Sim, signer: string, pushed: Pushed, how: string): Promise<void> {
  const verified = verifyDeclaration(
    signer,
    sim.node,
    pushed.data,
    pushed.signature,
    pushed.rotation,
    Date.now(),
  );
  if (isSignatureProblem(verified)) {
    return say({ event: "failed", node: sim.node, why: `${verified.reason}: ${verified.message}` });
  }
  const declaration = JSON.parse(decoder.decode(pushed.data)) as {
    serial: number;
    resources?: { contentSha256?: string; size?: number }[];
  };
  if (declaration.serial <= sim.lastSerial) return;
  sim.lastSerial = declaration.serial;
  const started = performance.now();
  for (const r of declaration.resources ?? []) {
    if (!r.contentSha256 || r.size === undefined) continue;
    const bytes = await sim.link.contentSource().get(r.contentSha256, r.size);
    if (!(bytes instanceof Uint8Array) || await sha256Hex(bytes) !== r.contentSha256) {
      return say({ event: "failed", node: sim.node, why: `object ${r.contentSha256} not read` });
    }
  }
  sim.outbox.keep({
    v: 1,
    kind: "apply",
    node: sim.node,
    version: VERSION,
    at: new Date().toISOString(),
    trigger: how === "push" ? "declaration" : "reconnect",
    source: "link",
    origin: `mesh.decl.${sim.node}`,
    serial: declaration.serial,
    digest: await sha256Hex(pushed.data),
    outcome: "converged",
    durationMs: Math.round(performance.now() - started),
    counts: {
      changed: 0,
      unchanged: declaration.resources?.length ?? 0,
      removed: 0,
      forgotten: 0,
      failed: 0,
    },
    results: [],
  });
  say({ event: "verified", node: sim.node, serial: declaration.serial, how });
}

function heartbeat(sim: Sim): void {
  sim.link.publish("heartbeat", {
    v: 1,
    kind: "heartbeat",
    node: sim.node,
    version: VERSION,
    at: new Date().toISOString(),
    serial: sim.lastSerial || null,
  });
  sim.timer = setTimeout(() => heartbeat(sim), jitteredDelay(input.heartbeatS * 1000));
}

async function start(node: string, token: string): Promise<void> {
  const stateDir = `${input.root}/${node}`;
  const store = Store.open(stateDir);
  // The parts of an engine enrolment uses: its store and its state directory.
  const engine = { store, config: { stateDir } } as unknown as Engine;
  const began = performance.now();
  const identity = await enrol(engine, token, { joinRetryMs: 30_000, admitWaitMs: 60_000 });
  say({ event: "enrolled", node, ms: Math.round(performance.now() - began) });
  const seed = await readSeed(identity);
  const sim: Sim = { node, store, lastSerial: 0 } as Sim;
  sim.outbox = new OutboxSender({
    store,
    bounds: { maxReports: 100, maxAgeSeconds: 86_400 },
    log: (line, level) => {
      if (level === "warning" || level === "error") say({ event: "log", node, line });
    },
  });
  sim.link = new Link(identity, seed, {
    onDeclaration: (p) => void take(sim, identity.signer, p, "push"),
    onUp: ({ reconnect, catchUp }) => {
      say({ event: "up", node, reconnect });
      sim.outbox.kick();
      if (catchUp) void take(sim, identity.signer, catchUp, "catch-up");
      say({ event: "caught-up", node, reconnect });
    },
    log: (line, level) => {
      if (level === "warning" || level === "error") say({ event: "log", node, line });
    },
  });
  sim.outbox.attach(sim.link, node);
  sim.link.start();
  sim.timer = setTimeout(() => heartbeat(sim), jitteredDelay(input.heartbeatS * 1000));
  sims.push(sim);
}

let next = 0;
await Promise.all(
  Array.from({ length: Math.max(1, input.enrolAtOnce) }, async () => {
    while (next < input.nodes.length) {
      const { node, token } = input.nodes[next++];
      await start(node, token).catch((error) =>
        say({ event: "failed", node, why: `enrol: ${(error as Error).message}` })
      );
    }
  }),
);
say({ event: "all-started", count: sims.length });

await new Promise<void>((resolve) => Deno.addSignalListener("SIGTERM", () => resolve()));
for (const sim of sims) clearTimeout(sim.timer);
await Promise.all(sims.map((sim) => sim.link.close().catch(() => {})));
for (const sim of sims) sim.store.close();
Deno.exit(0);
