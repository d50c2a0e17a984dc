/**
 * Pushed, never polled (issues 24 and 35), against a real nats-server: the declaration
 * stream republishes each declaration it stores to the node's push subject
 * (src/link/subjects.ts, DECLARATION_REPUBLISH); nothing is kept per node on the broker.
 * An idle node sends only its heartbeats and hears only their acknowledgements (bytes
 * counted at the broker); one catch-up follows a heartbeat whose acknowledgement names a
 * later declaration than the link took, or one after a heartbeat nobody acknowledged,
 * and none otherwise (requests counted at the broker); a catch-up answered from a store
 * behind what the node accepted is ignored quietly, while an old declaration published
 * again is a replay.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { enrol } from "../src/link/enrol.ts";
import { readSeed } from "../src/link/identity.ts";
import { Link, type Pushed } from "../src/link/link.ts";
import { declarationGet } from "../src/link/subjects.ts";
import { Store } from "../src/store/store.ts";
import { hostOn, readOr, runHost, type Scratch, scratch } from "./_helpers.ts";
import { fileResource, type Mesh, spawnHost, startMesh, until } from "./_mesh.ts";

async function enrolHost(mesh: Mesh, node: string, s: Scratch): Promise<void> {
  const run = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken(node),
  });
  assert.equal(run.code, 0, run.stderr);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The broker's counters of the connection named for `node` (connz: in = from it, out = to it). */
async function connection(mesh: Mesh, node: string) {
  const connz = await mesh.broker.monitor("connz?limit=1024");
  const all = (connz.connections ?? []) as {
    name?: string;
    in_msgs: number;
    out_msgs: number;
    in_bytes: number;
    out_bytes: number;
  }[];
  const mine = all.filter((c) => c.name?.endsWith(` ${node}`));
  assert.equal(
    mine.length,
    1,
    `one connection of ${node}: ${JSON.stringify(all.map((c) => c.name))}`,
  );
  return mine[0];
}

Deno.test("an idle node holding a 300 KB declaration sends only its heartbeats and receives only their acknowledgements (counted at the broker)", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  await enrolHost(mesh, "node-a", s);
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/link: up to /);
  const content = "0123456789abcdef".repeat(300 * 1024 / 16);
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [fileResource("big", `${s.root}/big`, content)],
  });
  await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 1);
  // The report, the inventory and the heartbeats after the apply go first.
  await sleep(3000);
  const heard: string[] = [];
  const watch = mesh.control.watch((m) => void heard.push(m.kind), "node-a");
  await mesh.control.nc.flush();
  const before = await connection(mesh, "node-a");
  // About 20 heartbeat ticks (each 0.8–1.2 s): on main, each asked for the whole
  // declaration again (20 × 300 KB to the node, and a request from it).
  await sleep(20_000);
  const after = await connection(mesh, "node-a");
  watch.unsubscribe();
  const received = after.out_bytes - before.out_bytes;
  const sentMsgs = after.in_msgs - before.in_msgs;
  const beats = heard.filter((k) => k === "heartbeat").length;
  assert.ok(beats >= 10, `heartbeats kept going: ${beats}`);
  assert.deepEqual([...new Set(heard)], ["heartbeat"], "the node sent nothing but heartbeats");
  // Every message the broker took from the node in the window was a heartbeat (the
  // watch and the counters are read a moment apart: one either way).
  assert.ok(
    Math.abs(sentMsgs - beats) <= 1,
    `${sentMsgs} messages from the node, ${beats} heartbeats`,
  );
  // What reached the node: pongs and one acknowledgement per heartbeat (a few dozen bytes).
  const acks = after.out_msgs - before.out_msgs;
  assert.ok(received < 8 * 1024, `the node received ${received} bytes in 20 s`);
  assert.ok(Math.abs(acks - beats) <= 1, `${acks} messages to the node, ${beats} heartbeats`);
  assert.equal(await readOr(`${s.root}/big`), content);
  assert.equal(await host.stop(), 0);
});

Deno.test("one catch-up follows a heartbeat acknowledged after one that was not, or whose acknowledgement names a later declaration; none otherwise (requests counted at the broker)", async () => {
  // This mesh's control plane answers no heartbeat: the test does, as it pleases.
  await using mesh = await startMesh({ serveNodes: false });
  await using s = await scratch();
  using engine = await hostOn(s);
  const identity = await enrol(engine, await mesh.control.mintToken("node-a"));
  const seed = await readSeed(identity);
  // Every catch-up the node asks reaches the stream's direct get in the control plane's
  // account, where the control plane can count it (JetStream answers it).
  let catchUps = 0;
  const counter = mesh.control.nc.subscribe(declarationGet("node-a"), {
    callback: () => void catchUps++,
  });
  let ack: Record<string, unknown> | undefined; // undefined: no answer
  const answers = mesh.control.nc.subscribe("mesh.node.node-a.heartbeat", {
    callback: (_e, m) => void (ack && m.respond(JSON.stringify(ack))),
  });
  await mesh.control.nc.flush();
  const got: Pushed[] = [];
  const link = new Link(identity, seed, {
    onDeclaration: (pushed) => void got.push(pushed),
    onUp: ({ catchUp }) => void (catchUp && got.push(catchUp)),
  }, { heartbeatAckMs: 500 });
  const beat = async () => {
    assert.ok(link.publish("heartbeat", { kind: "heartbeat" }));
    await sleep(900);
  };
  link.start();
  try {
    await until("the link is up", () => link.state.phase === "up" || undefined, 20_000);
    await sleep(300);
    assert.equal(catchUps, 1, "one catch-up at link-up");
    // Unacknowledged heartbeats ask for nothing (no control plane: no poll).
    for (let i = 0; i < 3; i++) await beat();
    assert.equal(catchUps, 1, "nothing asked while heartbeats go unacknowledged");
    // The first acknowledged one after them: one catch-up; the next ones: none.
    ack = { v: 1, decl: 0 };
    for (let i = 0; i < 3; i++) await beat();
    assert.equal(catchUps, 2, "one catch-up after heartbeats went unacknowledged");
    // A declaration pushed: the link took it, and an acknowledgement naming it asks nothing.
    const { seq } = await mesh.control.declare("node-a", { version: 1, resources: [] });
    await until("serial 1 pushed", () => got.some((p) => p.seq === seq) || undefined, 10_000);
    ack = { v: 1, decl: seq };
    for (let i = 0; i < 3; i++) await beat();
    assert.equal(catchUps, 2, "nothing asked when the node holds what the stream holds");
    // An acknowledgement naming a later one (a push lost on the way): one catch-up each.
    ack = { v: 1, decl: seq + 5 };
    await beat();
    assert.equal(catchUps, 3);
    await beat();
    assert.equal(catchUps, 4, "asked again while the stream seems ahead (a replica behind)");
    // An acknowledgement that says nothing of the stream (another control plane) asks nothing.
    ack = { v: 1 };
    for (let i = 0; i < 2; i++) await beat();
    assert.equal(catchUps, 4);
    assert.equal(link.state.phase, "up");
  } finally {
    counter.unsubscribe();
    answers.unsubscribe();
    await link.close();
  }
});

Deno.test("a catch-up answered from a store behind what the node accepted is ignored quietly; an old declaration published again is a replay", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  await enrolHost(mesh, "node-a", s);
  const f = `${s.root}/f`;
  const declare = (content: string) =>
    mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, content)] });
  const store = posix.join(mesh.dir, "jetstream");
  const snapshot = posix.join(mesh.dir, "jetstream-serial-1");
  const cp = async (from: string, to: string) => {
    await Deno.remove(to, { recursive: true }).catch(() => {});
    const r = await new Deno.Command("cp", { args: ["-a", from, to] }).output();
    assert.ok(r.success, new TextDecoder().decode(r.stderr));
  };
  {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
    await host.waitLog(/link: up to /);
    await declare("one\n");
    await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 1);
    const old = (await mesh.control.lastDeclaration("node-a"))!;
    // The broker's store as it was at serial 1: a replica that will fall behind.
    await mesh.stopBroker();
    await cp(store, snapshot);
    await mesh.startBroker();
    await declare("two\n");
    await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 2);
    assert.equal(await host.stop(), 0);
    await Deno.writeTextFile(posix.join(s.dir, "old.json"), JSON.stringify(old));
  }
  {
    using db = Store.open(s.stateDir);
    const at = JSON.parse(db.meta("link_declaration_seq")!);
    assert.equal(at.node, "node-a");
  }
  // The broker comes back with the store of serial 1: its answer is older than what the
  // node accepted, and was stored before it.
  await mesh.stopBroker();
  await cp(snapshot, store);
  await mesh.startBroker();
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(
    /link: serial 1 \(stream sequence \d+\) is older than the accepted one, from a replica behind the others: ignored/,
  );
  await host.waitLog(/apply \(start, link serial 2\): converged/);
  await sleep(3000);
  assert.deepEqual(
    (await mesh.control.reports("node-a")).filter((r) => r.kind === "refused"),
    [],
    "nothing reported as refused",
  );
  assert.equal(await readOr(f), "two\n");

  // The same old declaration published again (after something else, later in the
  // stream than serial 2 was): a replay, refused and reported.
  await mesh.control.declare("node-z", { version: 1, resources: [] });
  const old = JSON.parse(await Deno.readTextFile(posix.join(s.dir, "old.json")));
  await mesh.control.declare("node-a", new TextEncoder().encode(old.body), {
    signature: old.signature,
  });
  const replay = await mesh.control.waitReport("node-a", (r) => r.kind === "refused");
  assert.equal(replay.reason, "replay");
  assert.equal(replay.serial, 1);
  assert.equal(await readOr(f), "two\n");
  assert.equal(await host.stop(), 0);
});
