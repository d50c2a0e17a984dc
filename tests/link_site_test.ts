/**
 * Sites behind leaf servers (DESIGN.md §20, issue 21), on a real three-server cluster
 * on 127.0.0.1 with two sites' leaf servers: each site's leaf logs into its own
 * account with its own password, and carries what its site's nodes need (enrolment,
 * declarations, the objects their declarations name, reports) and nothing else. A
 * compromised leaf (a server of the attacker's making, with the site's login and a
 * certificate of the mesh's CA) reaches no other site's node, no cluster node, no
 * object of theirs and no JetStream API, and cannot answer another node's enrolment.
 */
import assert from "node:assert/strict";
import { join, posix } from "node:path";
import { connect, type NatsConnection, nkeyAuthenticator } from "@nats-io/transport-node";
import { brokerTls } from "../src/link/connection.ts";
import { caTrust } from "../src/link/trust.ts";
import { enrol as enrolInProcess } from "../src/link/enrol.ts";
import { Link, type Pushed } from "../src/link/link.ts";
import { withState } from "../lab/mesh/state.ts";
import { objectStoreSource } from "../src/link/object_source.ts";
import { CONTENT_SUBJECTS, OBJECT_READS, subjectsOf } from "../src/link/subjects.ts";
import { LOCAL_DOMAIN } from "../lab/mesh/local_broker.ts";
import { makeCertificates } from "../lab/lib/certs.ts";
import { hostOn, runHost, type Scratch, scratch } from "./_helpers.ts";
import { type ClusterMesh, startClusterMesh, until } from "./_mesh.ts";

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
  const seed = (await Deno.readTextFile(posix.join(s.stateDir, "node.nk"))).trim();
  return await connect({
    servers: url,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
    inboxPrefix: subjectsOf(node).inboxPrefix,
    tls: brokerTls({ url, trust: caTrust(state.caPem) }),
    reconnect: false,
  });
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

/** What the rogue may hear of its own site's node s1: its declarations, as its consumer delivers them. */
const OWN_SITE = /^mesh\.decl\.s1$|^mesh\.site\.leaf1\.push\.s1$/;

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

Deno.test("a site's leaf carries only its own site's nodes: a compromised leaf reaches no other node, object or JetStream API", async () => {
  await using mesh = await startClusterMesh("noxln-site-", { enrolments: true, sites: true });
  const { cluster, control } = mesh;
  const leaf1 = await cluster.startLeaf("leaf1");
  await cluster.startLeaf("leaf2");
  const state = await control.state();
  assert.notEqual(state.leaves!.leaf1.password, state.leaves!.leaf2.password);

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
    const decl = await n1.request(subjectsOf("s1").directGet, "", { timeout: 10_000 });
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

  // A compromised leaf: the attacker's own server, with leaf1's login and a certificate
  // of the mesh's CA, a local user without any permission limit bound to the remote.
  const dir = mesh.dir;
  const certs = await makeCertificates(dir, {
    names: ["localhost"],
    ips: ["127.0.0.1"],
    server: "rogue",
  });
  const port = freePort();
  const login = `${leaf1.login.user}:${leaf1.login.password}`;
  const hubs = (await Deno.readTextFile(leaf1.configFile)).match(/"nats-leaf:\/\/[^"]+"/g)!;
  assert.ok(hubs.every((h) => h.includes(login)));
  const rogueConf = join(dir, "rogue.conf");
  const rogueLog = join(dir, "rogue.log");
  await Deno.writeTextFile(
    rogueConf,
    `server_name: rogue
listen: "127.0.0.1:${port}"
accounts { EVIL { users: [ { user: evil, password: evil } ] } }
leafnodes {
  remotes: [ {
    urls: [ ${hubs.join(", ")} ]
    account: EVIL
    tls: { ca_file: "${certs.caFile}", cert_file: "${certs.certFile}", key_file: "${certs.keyFile}" }
  } ]
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
  await until("the rogue leaf is connected", async () => {
    const text = await Deno.readTextFile(rogueLog).catch(() => "");
    return text.includes("Leafnode connection created") ? true : undefined;
  }, 30_000);
  const evil = await connect({ servers: `nats://127.0.0.1:${port}`, user: "evil", pass: "evil" });
  const heard: string[] = [];
  const spy = evil.subscribe(">", { callback: (_e, m) => void heard.push(m.subject) });
  // And where its own site's and another site's node's declarations are delivered, as a
  // rogue would ask (a ">" from a leaf gets nothing of an import, in nats-server 2.9.10).
  const pushes = ["mesh.site.leaf1.push.s1", "mesh.site.leaf2.push.s2"].map((subject) =>
    evil.subscribe(subject, { callback: (_e, m) => void heard.push(m.subject) })
  );
  await evil.flush();
  try {
    const js = `$JS.${LOCAL_DOMAIN}.API`;
    // What the site's nodes use answers (the login works, so the refusals below are real).
    assert.match(
      await tryRequest(evil, `${js}.DIRECT.GET.MESH_DECL.mesh.decl.s1`),
      /^answered 200: \{"node":"s1"/,
    );
    assert.match(await tryRequest(evil, OBJECT_READS.meta("s1", sha.s1)), /^answered 200/);
    // Its own site's node's read of another object: the control plane refuses it.
    assert.match(await tryRequest(evil, OBJECT_READS.meta("s1", sha.s2)), /^answered 403/);
    // Nothing else: other nodes' declarations and objects, the JetStream API.
    for (
      const subject of [
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
        `${js}.CONSUMER.DURABLE.CREATE.MESH_DECL.s1`,
        `${js}.CONSUMER.INFO.MESH_DECL.s1`,
        `${js}.CONSUMER.DELETE.MESH_DECL.s1`,
        `${js}.CONSUMER.DELETE.MESH_DECL.c1`,
        `${js}.CONSUMER.MSG.NEXT.MESH_DECL.s1`,
        "$JS.API.CONSUMER.DELETE.MESH_DECL.s1",
        "$JS.API.INFO",
        "$JS.API.STREAM.PURGE.MESH_DECL",
        "$JS.API.DIRECT.GET.MESH_DECL.mesh.decl.c1",
      ]
    ) {
      assert.match(await tryRequest(evil, subject, "{}"), /^no answer/, subject);
    }
    // Acknowledgements and flow control reach only the consumers of its own site's nodes:
    // another node's are not carried (no answer), and its consumer is intact.
    for (const node of ["s2", "c1"]) {
      evil.publish(subjectsOf(node).ack.replace(">", "1.1.1.1.0"), "+TERM");
      evil.publish(subjectsOf(node).flowControl.replace(">", "x"), "");
      sent.add(subjectsOf(node).ack.replace(">", "1.1.1.1.0"));
      sent.add(subjectsOf(node).flowControl.replace(">", "x"));
    }
    // Reports as another node are not stored; as its own site's node they are.
    const c1Before = (await control.reportRecords("c1")).length;
    assert.match(
      await tryRequest(evil, subjectsOf("c1").report, JSON.stringify({ kind: "forged" })),
      /^no answer/,
    );
    assert.match(
      await tryRequest(evil, subjectsOf("s2").report, JSON.stringify({ kind: "forged" })),
      /^no answer/,
    );
    assert.equal((await control.reportRecords("c1")).length, c1Before);
    assert.equal((await control.reportRecords("s2")).length, 0);

    // It hears no other node's declaration, and no enrolment of another node: a cluster
    // node enrols (answered by the control plane) while the rogue listens to everything.
    await control.declare("c1", { version: 1, resources: [] });
    await control.declare("s2", { version: 1, resources: [] });
    await using _c2 = await enrol(mesh, "c2");
    await control.declare("s1", { version: 1, resources: [] });
    await until(
      "s1's declaration reaches the rogue (its own site)",
      () => heard.some((s) => OWN_SITE.test(s)) || undefined,
      10_000,
    );
    assert.deepEqual(
      heard.filter((s) => !sent.has(s) && !OWN_SITE.test(s) && !/^_INBOX\./.test(s)),
      [],
      "the rogue heard another node's traffic",
    );
    // Declarations and reports are all there, and every node's consumer.
    for (const node of ["s1", "s2", "c1"]) {
      assert.ok(await control.lastDeclaration(node), node);
      assert.ok(await control.consumerInfo(node), `${node}'s consumer`);
    }
  } finally {
    spy.unsubscribe();
    pushes.forEach((p) => p.unsubscribe());
    await evil.close();
  }

  // The site's login is for leaf connections only: as a client of a server it is refused.
  const member = cluster.members[0];
  await assert.rejects(
    connect({
      servers: member.url,
      user: leaf1.login.user,
      pass: leaf1.login.password,
      tls: brokerTls({ url: member.url, trust: caTrust(state.caPem) }),
      reconnect: false,
    }),
    /Authorization Violation/,
  );
});

Deno.test("a site keeps its replies after its leaf moved to another server and the configuration was reloaded (nats-server 2.9.10)", async () => {
  // A leaf that reconnected and then reloaded its accounts made a new reply prefix for
  // its bound account that nats-server 2.9.10 never told the cluster of: every answer
  // (acknowledgements, direct gets, enrolments) through the leaf was lost until it
  // reconnected again. The site's account on the leaf maps `_R_.>` to itself, so the
  // cluster hears that interest once, on every connection, whatever prefix comes next.
  await using mesh = await startClusterMesh("noxln-site-", { enrolments: true, sites: true });
  const { cluster, control } = mesh;
  const leaf = await cluster.startLeaf("leaf1");
  await using s = await enrol(mesh, "s1", "leaf1");
  await control.declare("s1", { version: 1, resources: [] });
  const nc = await connectAs(mesh, "s1", s, leaf.url);
  try {
    const works = async () => {
      const decl = await nc.request(subjectsOf("s1").directGet, "", { timeout: 5000 });
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
    // A reload of every server and the leaf (a token for another site node), then that
    // node enrols through the leaf, and the first one still gets its answers.
    await using _s2 = await enrol(mesh, "s2", "leaf1");
    assert.ok(await works());
  } finally {
    await nc.close();
  }
});

Deno.test("a site's node hears its declarations through the leaf as they are published, and one published while the uplink was cut once it is back", async () => {
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
  // Short idle heartbeats and acknowledgement wait for this mesh's consumers.
  await withState(mesh.dir, (state) => {
    state.push = { idleHeartbeatMs: 1000, ackWaitMs: 2000 };
  });
  const leaf = await cluster.startLeaf("leaf1", { hubs: relays.map((r) => r.address) });
  await using s = await scratch();
  using engine = await hostOn(s);
  const identity = await enrolInProcess(engine, await control.mintToken("s1", 3600, "leaf1"));
  assert.deepEqual(identity.brokers.map((b) => b.url), [leaf.url]);
  const seed = new TextEncoder().encode(
    (await Deno.readTextFile(posix.join(s.stateDir, "node.nk"))).trim(),
  );
  const got: Pushed[] = [];
  const link = new Link(identity, seed, {
    onDeclaration: (pushed) => void got.push(pushed),
    onUp: ({ catchUp }) => void (catchUp && got.push(catchUp)),
  }, { pushSilenceMs: 3000 });
  const serials = () => got.map((p) => JSON.parse(new TextDecoder().decode(p.data)).serial);
  const declare = (serial: number) =>
    control.declare("s1", { version: 1, resources: [] }, { serial });
  link.start();
  try {
    await until("the link is up", () => link.state.phase === "up" || undefined, 30_000);
    // Pushed as it is published: no declaration is asked for while the link is up.
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
      "serial 2 pushed once the uplink is back",
      () => serials().includes(2) || undefined,
      60_000,
    );
    assert.equal(link.state.phase, "up");
    assert.equal(link.state.connects, 1, "the node's connection to its leaf never ended");
    await until(
      "every delivery acknowledged through the leaf",
      async () => (await control.consumerInfo("s1"))?.num_ack_pending === 0 || undefined,
      20_000,
    );
  } finally {
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
