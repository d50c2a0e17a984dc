/**
 * Pushed, never polled (issue 24), against a real nats-server: declarations reach a
 * node through its durable push consumer (src/link/subjects.ts, DECLARATION_PUSH),
 * which the control plane makes. An idle node asks for nothing (bytes counted at the
 * broker); a consumer that falls silent is noticed and, once it is back, delivers what
 * was published meanwhile; flow control is answered (a consumer whose requests go
 * unanswered stops delivering); a catch-up answered from a store behind what the node
 * accepted is ignored quietly, while an old declaration published again is a replay.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { enrol } from "../src/link/enrol.ts";
import { Link, type Pushed } from "../src/link/link.ts";
import { Store } from "../src/store/store.ts";
import { withState } from "../lab/mesh/state.ts";
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

Deno.test("an idle node holding a 300 KB declaration sends only its heartbeats and receives only the consumer's idle heartbeats (counted at the broker)", async () => {
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
  // What reached the node: pongs and at most a few idle heartbeats of its consumer.
  assert.ok(received < 8 * 1024, `the node received ${received} bytes in 20 s`);
  assert.ok(after.out_msgs - before.out_msgs <= 2, `${after.out_msgs - before.out_msgs} messages`);
  assert.equal(await readOr(`${s.root}/big`), content);
  assert.equal(await host.stop(), 0);
});

Deno.test("a declaration consumer that falls silent is noticed; once it is back it delivers what was published meanwhile; flow control is answered", async () => {
  await using mesh = await startMesh();
  // Short idle heartbeats and acknowledgement wait for this mesh's consumers.
  await withState(mesh.dir, (state) => {
    state.push = { idleHeartbeatMs: 500, ackWaitMs: 2000 };
  });
  await using s = await scratch();
  using engine = await hostOn(s);
  const identity = await enrol(engine, await mesh.control.mintToken("node-a"));
  const seed = new TextEncoder().encode(
    (await Deno.readTextFile(posix.join(s.stateDir, "node.nk"))).trim(),
  );
  const got: Pushed[] = [];
  const logged: string[] = [];
  const link = new Link(identity, seed, {
    onDeclaration: (pushed) => void got.push(pushed),
    onUp: ({ catchUp }) => void (catchUp && got.push(catchUp)),
    log: (line) => logged.push(line),
  }, { pushSilenceMs: 2000 });
  const serials = () => got.map((p) => JSON.parse(new TextDecoder().decode(p.data)).serial);
  const declare = (serial: number, pad = "") =>
    mesh.control.declare("node-a", {
      version: 1,
      resources: [fileResource("f", `${s.root}/f`, `serial ${serial}\n${pad}`)],
    }, { serial });
  link.start();
  try {
    await until("the link is up", () => link.state.phase === "up" || undefined, 20_000);
    await declare(1);
    await until("serial 1 pushed", () => serials().includes(1) || undefined, 10_000);
    const info = await mesh.control.consumerInfo("node-a");
    assert.equal(info?.push_bound, true);

    // The consumer goes away (a control plane that lost it): its heartbeats stop.
    await mesh.control.nc.request("$JS.API.CONSUMER.DELETE.MESH_DECL.node-a", "", {
      timeout: 5000,
    });
    await until(
      "the link saying the consumer is silent",
      () => logged.some((l) => /nothing from the declaration consumer/.test(l)) || undefined,
      20_000,
    );
    await declare(2);
    await sleep(1000);
    assert.ok(!serials().includes(2), "nothing delivers serial 2 without a consumer");
    // Made again: it delivers the last declaration stored, the one published meanwhile.
    await mesh.control.ensureConsumers();
    await until("serial 2 pushed", () => serials().includes(2) || undefined, 20_000);
    await until(
      "the link saying it hears the consumer again",
      () => logged.some((l) => /the declaration consumer is heard again/.test(l)) || undefined,
      10_000,
    );
    assert.equal(link.state.phase, "up");

    // Large declarations back to back: the consumer asks for flow control after a few
    // megabytes and stops until it is answered; every one is acknowledged.
    const pad = "x".repeat(900 * 1024);
    for (let serial = 3; serial <= 12; serial++) await declare(serial, pad);
    await until("serial 12 pushed", () => serials().includes(12) || undefined, 30_000);
    const done = await until("every delivery acknowledged", async () => {
      const now = await mesh.control.consumerInfo("node-a");
      return now?.num_ack_pending === 0 ? now : undefined;
    }, 10_000);
    assert.equal((done.delivered as { stream_seq: number }).stream_seq, got.at(-1)!.seq);
    // Each stored declaration was handed on once.
    assert.equal(new Set(got.map((p) => p.seq)).size, got.length);
  } finally {
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
