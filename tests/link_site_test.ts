/**
 * Sites behind leaf servers (DESIGN.md §20, issues 21 and 35), on a real three-server
 * cluster on 127.0.0.1 in NATS's operator mode with two sites' leaf servers: each site's
 * leaf logs in as users of signing keys scoped to its site (the nodes' account's, the
 * join account's), and carries what its site's nodes need (enrolment, declarations,
 * catch-ups, the objects their declarations name, reports, heartbeats) and nothing else.
 * A compromised leaf (a server of the attacker's making, with the site's creds and a
 * certificate of the mesh's CA) reaches no other site's node, no cluster node, no object
 * of theirs and no JetStream API, and cannot answer another node's enrolment.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { connect, credsAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import { brokerTls } from "../src/link/connection.ts";
import { caTrust } from "../src/link/trust.ts";
import { enrol as enrolInProcess } from "../src/link/enrol.ts";
import { readSeed } from "../src/link/identity.ts";
import { Link, type Pushed } from "../src/link/link.ts";
import { objectStoreSource } from "../src/link/object_source.ts";
import { CONTENT_SUBJECTS, OBJECT_READS, subjectsOf } from "../src/link/subjects.ts";
import { LOCAL_DOMAIN } from "../lab/mesh/local_broker.ts";
import { makeCertificates } from "../lab/lib/certs.ts";
import { hostOn, runHost, type Scratch, scratch } from "./_helpers.ts";
import { type ClusterMesh, connectAsNode, startClusterMesh, until } from "./_mesh.ts";

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

async function enrol(mesh: ClusterMesh, node: string, via?: string): Promise<Scratch> {
  const s = await scratch();
  const token = await mesh.control.mintToken(node, 3600, via);
  const run = await runHost(["enrol", "--token", "-"], { env: s.env, stdin: token });
  assert.equal(run.code, 0, `${node}: ${run.stderr}`);
  return s;
}

/** A connection as an enrolled node, to `url` (its site's leaf, or a cluster server). */
async function connectAs(
  mesh: ClusterMesh,
  node: string,
  s: Scratch,
  url: string,
): Promise<NatsConnection> {
  const state = await mesh.control.state();
  return await connectAsNode(url, state.caPem, node, s.stateDir);
}

/** A file resource by digest (the declaration names the object; nothing runs here). */
const byDigest = (id: string, contentSha256: string, size: number) => ({
  type: "file",
  id,
  path: `/srv/${id}`,
  contentSha256,
  size,
  mode: "0644",
  owner: "root",
  group: "root",
});

/**
 * A loopback relay that can be cut like a cable: it forwards to `target()` (asked at each
 * connection); `cut()` stops forwarding both ways and takes no new connection (nothing
 * is refused, nothing arrives: each side notices by its pings); `restore()` drops what it
 * held and takes connections again.
 */
function cuttableRelay(target: () => string) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let cut = false;
  let held: Deno.Conn[] = [];
  const close = (c: Deno.Conn) => {
    try {
      c.close();
    } catch { /* closed */ }
  };
  const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
    const reader = from.readable.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        if (cut) continue; // read and dropped: the cable is cut
        await to.write(value);
      }
    } catch { /* closed */ }
  };
  (async () => {
    for await (const client of listener) {
      if (cut) {
        held.push(client); // accepted, never answered: a cut cable
        continue;
      }
      const [hostname, port] = target().split(":");
      const server = await Deno.connect({ hostname, port: Number(port) }).catch(() => undefined);
      if (!server) {
        close(client);
        continue;
      }
      held.push(client, server);
      pipe(client, server).finally(() => close(server));
      pipe(server, client).finally(() => close(client));
    }
  })().catch(() => {});
  return {
    address: `127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    cut: () => void (cut = true),
    restore: () => {
      const old = held;
      held = [];
      old.forEach(close);
      cut = false;
    },
    [Symbol.dispose]: () => {
      listener.close();
      held.forEach(close);
    },
  };
}

/** What the rogue may hear of its own site's node s1: its declarations, republished. */
const OWN_SITE = /^mesh\.push\.s1$/;

/** Subjects the rogue sent itself (its own spy hears them in its own account). */
const sent = new Set<string>();

/** The answer to a request within 2 s, or why there was none. */
async function tryRequest(nc: NatsConnection, subject: string, body = ""): Promise<string> {
  sent.add(subject);
  try {
    const reply = await nc.request(subject, body, { timeout: 2000 });
    return `answered ${reply.headers?.code || 200}: ${reply.string().slice(0, 200)}`;
  } catch (error) {
    return `no answer (${(error as Error).message.slice(0, 80)})`;
  }
}

Deno.test("a site's leaf carries only its own site's nodes: a compromised leaf reaches no other node, object or JetStream API, and answers no enrolment", async () => {
  await using mesh = await startClusterMesh("noxln-site-", { enrolments: true, sites: true });
  const { cluster, control } = mesh;
  const leaf1 = await mesh.startLeaf("leaf1");
  const leaf2 = await mesh.startLeaf("leaf2");
  assert.notEqual(
    await Deno.readTextFile(leaf1.login.nodes),
    await Deno.readTextFile(leaf2.login.nodes),
  );
  assert.equal((await Deno.stat(leaf1.login.nodes)).mode! & 0o777, 0o600);
  const state = await control.state();

  // Nodes enrol through their site's leaf (tokens name it alone), or the cluster.
  await using s1 = await enrol(mesh, "s1", "leaf1");
  await using _s2 = await enrol(mesh, "s2", "leaf2");
  await using _c1 = await enrol(mesh, "c1");

  // Each node is declared an object of its own.
  const bytes = (who: string) => new TextEncoder().encode(`${who}'s private content\n`.repeat(9));
  const sha: Record<string, string> = {};
  for (const node of ["s1", "s2", "c1"]) {
    sha[node] = await control.putContent(bytes(node));
    await control.declare(node, {
      version: 1,
      resources: [byDigest("own", sha[node], bytes(node).length)],
    });
  }

  // Through its leaf a site node gets its declaration, its object, and reports.
  const n1 = await connectAs(mesh, "s1", s1, leaf1.url);
  try {
    const decl = await n1.request(subjectsOf("s1").catchUp, "", { timeout: 10_000 });
    assert.equal(JSON.parse(decl.string()).node, "s1");
    const source = objectStoreSource(
      "s1",
      (subject, body) => n1.request(subject, body, { timeout: 10_000 }),
    );
    assert.deepEqual(await source.get(sha.s1, bytes("s1").length), bytes("s1"));
    await assert.rejects(
      source.get(sha.s2, bytes("s2").length),
      /the control plane refused to give object/,
    );
    const ack = await n1.request(subjectsOf("s1").report, JSON.stringify({ kind: "apply" }), {
      timeout: 10_000,
    });
    assert.equal(JSON.parse(ack.string()).stream, "MESH_REPORT");
  } finally {
    await n1.close();
  }

  // A compromised leaf: the attacker's own server, with leaf1's creds and a certificate of
  // the mesh's CA, local users without any permission limit bound to the remotes.
  const dir = mesh.dir;
  const certs = await makeCertificates(dir, {
    names: ["localhost"],
    ips: ["127.0.0.1"],
    server: "rogue",
  });
  const port = freePort();
  const hubs = cluster.leafHubs.map((h) => JSON.stringify(`nats-leaf://${h}`));
  const rogueConf = join(dir, "rogue.conf");
  const rogueLog = join(dir, "rogue.log");
  const tls =
    `tls: { ca_file: "${certs.caFile}", cert_file: "${certs.certFile}", key_file: "${certs.keyFile}" }`;
  await Deno.writeTextFile(
    rogueConf,
    `server_name: rogue
listen: "127.0.0.1:${port}"
accounts {
  EVIL { users: [ { user: evil, password: evil } ] }
  EVILJOIN { users: [ { user: eviljoin, password: evil } ] }
}
leafnodes {
  remotes: [
    { urls: [ ${hubs.join(", ")} ], account: EVIL, credentials: "${leaf1.login.nodes}", ${tls} }
    { urls: [ ${hubs.join(", ")} ], account: EVILJOIN, credentials: "${leaf1.login.join}", ${tls} }
  ]
}
`,
  );
  const rogue = new Deno.Command("nats-server", {
    args: ["-c", rogueConf, "-l", rogueLog],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  await using _rogue = {
    async [Symbol.asyncDispose]() {
      try {
        rogue.kill("SIGKILL");
      } catch { /* gone */ }
      await rogue.status;
    },
  };
  await until("the rogue leaf is connected, twice", async () => {
    const text = await Deno.readTextFile(rogueLog).catch(() => "");
    return text.split("Leafnode connection created").length > 2 ? true : undefined;
  }, 30_000);
  // Its client uses the inbox of its own site's node s1: answers reach it only there.
  const evil = await connect({
    servers: `nats://127.0.0.1:${port}`,
    user: "evil",
    pass: "evil",
    inboxPrefix: subjectsOf("s1").inboxPrefix,
  });
  const evilJoin = await connect({
    servers: `nats://127.0.0.1:${port}`,
    user: "eviljoin",
    pass: "evil",
  });
  const heard: string[] = [];
  const listen = (nc: NatsConnection, subject: string) =>
    nc.subscribe(subject, { callback: (_e, m) => void heard.push(m.subject) });
  // Everything, and each other node's push subject and inbox by name, and every
  // enrolment and its answers, as a rogue would ask.
  const spies = [
    listen(evil, ">"),
    ...["s1", "s2", "c1", "c2"].map((n) => listen(evil, subjectsOf(n).push)),
    listen(evil, "_INBOX.s2.>"),
    listen(evil, "_INBOX.c2.>"),
    listen(evil, "mesh.node.*.heartbeat"),
    listen(evilJoin, ">"),
    listen(evilJoin, "mesh.enrol.*.*"),
    listen(evilJoin, "_JOIN.>"),
  ];
  await evil.flush();
  await evilJoin.flush();
  try {
    const js = `$JS.${LOCAL_DOMAIN}.API`;
    // What the site's nodes use answers (the creds work, so the refusals below are real).
    assert.match(await tryRequest(evil, subjectsOf("s1").catchUp), /^answered 200: \{"node":"s1"/);
    assert.match(await tryRequest(evil, OBJECT_READS.meta("s1", sha.s1)), /^answered 200/);
    // Its own site's node's read of another object: the control plane refuses it.
    assert.match(await tryRequest(evil, OBJECT_READS.meta("s1", sha.s2)), /^answered 403/);
    // Nothing else: other nodes' declarations and objects, the JetStream API (asked at
    // once: each waits out its timeout).
    const subjects = [
      subjectsOf("s2").catchUp,
      subjectsOf("c1").catchUp,
      `${js}.DIRECT.GET.MESH_DECL.mesh.decl.s1`,
      `${js}.DIRECT.GET.MESH_DECL.mesh.decl.s2`,
      `${js}.DIRECT.GET.MESH_DECL.mesh.decl.c1`,
      `${js}.DIRECT.GET.MESH_OBJ.${CONTENT_SUBJECTS.meta(sha.s1)}`,
      `${js}.DIRECT.GET.MESH_OBJ.${CONTENT_SUBJECTS.meta(sha.s2)}`,
      `${js}.DIRECT.GET.MESH_OBJ.${CONTENT_SUBJECTS.chunk(sha.c1, 0)}`,
      OBJECT_READS.meta("s2", sha.s2),
      OBJECT_READS.chunk("c1", sha.c1, 0),
      `${js}.INFO`,
      `${js}.STREAM.INFO.MESH_DECL`,
      `${js}.STREAM.PURGE.MESH_DECL`,
      `${js}.STREAM.DELETE.MESH_REPORT`,
      `${js}.STREAM.MSG.GET.MESH_REPORT`,
      `${js}.CONSUMER.CREATE.MESH_REPORT`,
      `${js}.CONSUMER.CREATE.MESH_DECL.rogue.mesh.decl.s1`,
      "$JS.API.CONSUMER.CREATE.MESH_DECL",
      "$JS.API.INFO",
      "$JS.API.STREAM.PURGE.MESH_DECL",
      "$JS.API.DIRECT.GET.MESH_DECL.mesh.decl.c1",
      "$SYS.REQ.CLAIMS.UPDATE",
      "mesh.decl.s1",
    ];
    const answers = await Promise.all(
      subjects.flatMap((subject) => [
        tryRequest(evil, subject, "{}").then((a) => `${subject}: ${a}`),
        tryRequest(evilJoin, subject, "{}").then((a) => `join ${subject}: ${a}`),
      ]),
    );
    assert.deepEqual(answers.filter((a) => !/: no answer/.test(a)), []);
    // Reports and heartbeats as another node are not stored; as its own site's node they are.
    const c1Before = (await control.reportRecords("c1")).length;
    for (const node of ["c1", "s2"]) {
      assert.match(
        await tryRequest(evil, subjectsOf(node).report, JSON.stringify({ kind: "forged" })),
        /^no answer/,
      );
      assert.match(
        await tryRequest(evil, subjectsOf(node).heartbeat, JSON.stringify({ kind: "forged" })),
        /^no answer/,
      );
    }
    assert.equal((await control.reportRecords("c1")).length, c1Before);
    assert.equal((await control.reportRecords("s2")).length, 0);
    assert.equal((await control.lastHeartbeat("s2"))?.kind, undefined);

    // It hears no other node's declaration, and no enrolment of another node: a cluster
    // node and another site's node enrol (answered by the control plane) while the rogue
    // listens to everything, and is asked to answer enrolments itself.
    await control.declare("c1", { version: 1, resources: [] });
    await control.declare("s2", { version: 1, resources: [] });
    await using _c2 = await enrol(mesh, "c2");
    await using _s3 = await enrol(mesh, "s3", "leaf2");
    await control.declare("s1", { version: 1, resources: [] });
    await until(
      "s1's declaration reaches the rogue (its own site)",
      () => heard.some((s) => OWN_SITE.test(s)) || undefined,
      10_000,
    );
    assert.deepEqual(
      heard.filter((s) => !sent.has(s) && !OWN_SITE.test(s) && !/^_INBOX\.s1\./.test(s)),
      [],
      "the rogue heard another node's traffic",
    );
    for (const node of ["s1", "s2", "c1", "c2"]) {
      assert.ok(await control.lastDeclaration(node) || node === "c2", node);
    }
    // Its join login reaches only its site's own join keys' subjects: it cannot ask to
    // enrol a node of another site or the cluster with any key.
    const other = (await control.mintTokens(["c3"]))["c3"];
    const otherKey = Object.entries((await control.state()).tokens)
      .find(([, t]) => t.node === "c3")![0];
    assert.ok(other);
    assert.match(
      await tryRequest(evilJoin, `mesh.enrol.c3.${otherKey}`, "{}"),
      /^no answer/,
    );
  } finally {
    spies.forEach((s) => s.unsubscribe());
    await evil.close();
    await evilJoin.close();
  }

  // The site's creds used by a client of a server (nats-server 2.9.10 does not hold a
  // scoped user to the scope's connection types): confined to the site's scope all the same.
  const member = cluster.members[0];
  const client = await connect({
    servers: member.url,
    authenticator: credsAuthenticator(await Deno.readFile(leaf1.login.nodes)),
    inboxPrefix: subjectsOf("s1").inboxPrefix,
    tls: brokerTls({ url: member.url, trust: caTrust(state.caPem) }),
    reconnect: false,
  });
  try {
    for (const subject of [subjectsOf("c1").catchUp, subjectsOf("s2").report, "$JS.API.INFO"]) {
      await assert.rejects(
        client.request(subject, "{}", { timeout: 5000 }),
        /Permissions Violation for Publish/,
        subject,
      );
    }
    const sub = client.subscribe(subjectsOf("c1").push);
    assert.match(String(await sub.closed), /Permissions Violation for Subscription/);
  } finally {
    await client.close().catch(() => {});
  }
});

Deno.test("a site keeps its answers when its leaf moves to another server, and when a token for a new site node changes its scope", async () => {
  await using mesh = await startClusterMesh("noxln-site-", { enrolments: true, sites: true });
  const { cluster, control } = mesh;
  const leaf = await mesh.startLeaf("leaf1");
  await using s = await enrol(mesh, "s1", "leaf1");
  await control.declare("s1", { version: 1, resources: [] });
  const nc = await connectAs(mesh, "s1", s, leaf.url);
  try {
    const works = async () => {
      const decl = await nc.request(subjectsOf("s1").catchUp, "", { timeout: 5000 });
      const ack = await nc.request(subjectsOf("s1").report, JSON.stringify({ kind: "apply" }), {
        timeout: 5000,
      });
      return decl.data.length > 0 && JSON.parse(ack.string()).stream === "MESH_REPORT";
    };
    assert.ok(await works());
    // The server the leaf is connected to dies: the leaf reconnects to another.
    const carrier = await until("the server carrying the leaf", async () => {
      for (const m of cluster.members) {
        if (Number((await m.monitor("leafz")).leafnodes) > 0) return m;
      }
      return undefined;
    });
    await carrier.kill();
    await until("the leaf on another server, and the site's reports stored again", async () => {
      try {
        return await works() || undefined;
      } catch {
        return undefined;
      }
    }, 60_000);
    await carrier.start();
    // A token for another site node widens the site's scope (every server closes the
    // leaf's connections, which come back under it); that node enrols through the leaf,
    // and the first one gets its answers again.
    await using _s2 = await enrol(mesh, "s2", "leaf1");
    await until("s1's answers through the leaf again", async () => {
      try {
        return await works() || undefined;
      } catch {
        return undefined;
      }
    }, 30_000);
  } finally {
    await nc.close();
  }
});

Deno.test("a site's node hears its declarations through the leaf as they are published, and one published while the uplink was cut once it is back (one catch-up after a heartbeat)", async () => {
  // Every way from the leaf to the cluster goes through a relay that can be cut: the one it
  // is given, and those the servers tell it of.
  const hubs: string[] = [];
  const relays = [0, 1, 2].map((i) => cuttableRelay(() => hubs[i]));
  using _relays = { [Symbol.dispose]: () => relays.forEach((r) => r[Symbol.dispose]()) };
  await using mesh = await startClusterMesh("noxln-site-", {
    enrolments: true,
    sites: true,
    leafAdvertise: relays.map((r) => r.address),
  });
  const { cluster, control } = mesh;
  hubs.push(...cluster.leafHubs);
  const leaf = await mesh.startLeaf("leaf1", { hubs: relays.map((r) => r.address) });
  await using s = await scratch();
  using engine = await hostOn(s);
  const identity = await enrolInProcess(engine, await control.mintToken("s1", 3600, "leaf1"));
  assert.deepEqual(identity.brokers.map((b) => b.url), [leaf.url]);
  const seed = await readSeed(identity);
  const got: Pushed[] = [];
  const logged: string[] = [];
  const link = new Link(identity, seed, {
    onDeclaration: (pushed) => void got.push(pushed),
    onUp: ({ catchUp }) => void (catchUp && got.push(catchUp)),
    log: (line) => void logged.push(line),
  }, { heartbeatAckMs: 1500 });
  // The run loop's heartbeats, every second.
  const ticker = setInterval(() => link.publish("heartbeat", { kind: "heartbeat" }), 1000);
  const serials = () => got.map((p) => JSON.parse(new TextDecoder().decode(p.data)).serial);
  const declare = (serial: number) =>
    control.declare("s1", { version: 1, resources: [] }, { serial });
  link.start();
  try {
    await until("the link is up", () => link.state.phase === "up" || undefined, 30_000);
    // Pushed as it is published.
    await declare(1);
    await until(
      "serial 1 pushed through the leaf",
      () => serials().includes(1) || undefined,
      10_000,
    );
    // The uplink is cut: the node's connection to its leaf stays up.
    relays.forEach((r) => r.cut());
    await until("the leaf without its uplink", async () => {
      const leafz = await fetchLeafz(cluster);
      return leafz === 0 ? true : undefined;
    }, 30_000);
    await declare(2);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.ok(!serials().includes(2), "nothing crosses a cut uplink");
    relays.forEach((r) => r.restore());
    await until(
      "serial 2 caught up once the uplink is back",
      () => serials().includes(2) || undefined,
      60_000,
    );
    assert.ok(logged.some((l) => /link: caught up/.test(l)), logged.join("\n"));
    assert.equal(link.state.phase, "up");
    assert.equal(link.state.connects, 1, "the node's connection to its leaf never ended");
  } finally {
    clearInterval(ticker);
    await link.close();
  }
});

/** How many leaf connections the cluster's members hold. */
async function fetchLeafz(cluster: ClusterMesh["cluster"]): Promise<number> {
  let n = 0;
  for (const m of cluster.members) {
    if (m.running()) n += Number((await m.monitor("leafz").catch(() => undefined))?.leafnodes ?? 0);
  }
  return n;
}
