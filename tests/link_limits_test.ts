/**
 * One node cannot starve the mesh (issue 21): against a real nats-server, a node that
 * sends as much as it can, as large as it can, stores at most its own share (each
 * report at most NODE_LIMITS.reportBytes, its last REPORTS_KEPT), while the control
 * plane still stores another node's declaration and that node its reports. The
 * streams carry these limits (and the declarations none by age).
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { connect, headers, type NatsConnection, nkeyAuthenticator } from "@nats-io/transport-node";
import { brokerTls } from "../src/link/connection.ts";
import { caTrust } from "../src/link/trust.ts";
import { MESSAGE_ID_HEADER, NODE_LIMITS, subjectsOf } from "../src/link/subjects.ts";
import { nodeShare, REPORTS_KEPT, STREAMS } from "../lab/mesh/streams.ts";
import { fromSeed } from "@nats-io/nkeys";
import { base64url } from "../src/link/_base64url.ts";
import { runHost, type Scratch, scratch } from "./_helpers.ts";
import { type Mesh, startMesh } from "./_mesh.ts";

async function enrol(mesh: Mesh, node: string, s: Scratch): Promise<void> {
  const run = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken(node),
  });
  assert.equal(run.code, 0, run.stderr);
}

/** A connection as the node enrolled in `s` (its own key, its own inbox). */
async function connectAs(mesh: Mesh, node: string, s: Scratch): Promise<NatsConnection> {
  const state = await mesh.control.state();
  const seed = (await Deno.readTextFile(posix.join(s.stateDir, "node.nk"))).trim();
  return await connect({
    servers: state.url,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
    inboxPrefix: subjectsOf(node).inboxPrefix,
    tls: brokerTls({ url: state.url, trust: caTrust(state.caPem) }),
    reconnect: false,
  });
}

/**
 * What the broker says to a client that ignores the max_payload it was told: the
 * node's key logs in over a raw connection (INFO in the clear, then TLS, CONNECT signed
 * over the nonce, PING) and publishes `bytes` bytes on its report subject; returns
 * everything it heard until the broker closed the connection.
 */
async function rawPublish(mesh: Mesh, node: string, s: Scratch, bytes: number): Promise<string> {
  const state = await mesh.control.state();
  const url = new URL(state.url.replace("tls://", "https://"));
  const pair = fromSeed(
    new TextEncoder().encode((await Deno.readTextFile(posix.join(s.stateDir, "node.nk"))).trim()),
  );
  const plain = await Deno.connect({ hostname: url.hostname, port: Number(url.port) });
  const buffer = new Uint8Array(64 * 1024);
  const n = await plain.read(buffer);
  const info = new TextDecoder().decode(buffer.subarray(0, n ?? 0));
  const nonce = JSON.parse(info.slice(5, info.indexOf("\r\n"))).nonce as string;
  const conn = await Deno.startTls(plain, { hostname: url.hostname, caCerts: [state.caPem] });
  const sig = base64url(pair.sign(new TextEncoder().encode(nonce)));
  const send = (text: string | Uint8Array) =>
    conn.write(typeof text === "string" ? new TextEncoder().encode(text) : text);
  await send(
    `CONNECT ${
      JSON.stringify({ verbose: false, pedantic: false, nkey: pair.getPublicKey(), sig })
    }\r\nPING\r\n`,
  );
  let heard = "";
  const reading = (async () => {
    try {
      for (;;) {
        const got = await conn.read(buffer);
        if (got === null) return;
        heard += new TextDecoder().decode(buffer.subarray(0, got));
      }
    } catch { /* closed by the broker */ }
  })();
  for (let i = 0; i < 200 && !heard.includes("PONG"); i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  try {
    await send(`PUB ${subjectsOf(node).report} ${bytes}\r\n`);
    await send(new Uint8Array(bytes).fill(0x78));
    await send("\r\n");
  } catch { /* the broker may close before all of it is written */ }
  await Promise.race([reading, new Promise((r) => setTimeout(r, 10_000))]);
  try {
    conn.close();
  } catch { /* closed */ }
  return heard;
}

let ids = 0;
/** Send one report as the node does (a message id, JetStream's acknowledgement awaited). */
async function report(nc: NatsConnection, node: string, body: Uint8Array | string) {
  const h = headers();
  h.set(MESSAGE_ID_HEADER, `${node}.flood.${ids++}`);
  const reply = await nc.request(subjectsOf(node).report, body, { timeout: 10_000, headers: h });
  return JSON.parse(reply.string()) as { seq?: number; error?: { description?: string } };
}

Deno.test("one node cannot starve the mesh: large reports refused, a flood keeps only its own share, another node's declaration and reports are stored", async () => {
  await using mesh = await startMesh();
  await using a = await scratch();
  await using b = await scratch();
  await enrol(mesh, "node-a", a);
  await enrol(mesh, "node-b", b);
  const na = await connectAs(mesh, "node-a", a);
  const nb = await connectAs(mesh, "node-b", b);
  try {
    const before = await report(nb, "node-b", JSON.stringify({ kind: "apply", n: 0 }));
    assert.equal(before.error, undefined, JSON.stringify(before));

    // node-a's account may publish at most NODE_LIMITS.maxPayload bytes at once, less than
    // the server takes from the control plane.
    assert.equal(na.info?.max_payload, NODE_LIMITS.maxPayload);
    assert.ok(Number(mesh.control.nc.info?.max_payload) > NODE_LIMITS.maxPayload);
    assert.throws(
      () => na.publish(subjectsOf("node-a").report, new Uint8Array(NODE_LIMITS.maxPayload + 1)),
      /max_payload/,
    );
    // A client that ignores it is cut off by the broker, not stored.
    const said = await rawPublish(mesh, "node-a", a, NODE_LIMITS.maxPayload + 1);
    assert.match(said, /-ERR 'Maximum Payload Violation'/);

    // 900 KiB reports, as many as fill a broker's store: each one refused.
    const big = JSON.stringify({ kind: "apply", pad: "a".repeat(900 * 1024) });
    let stored = 0;
    let refusal = "";
    for (let i = 0; i < 300; i++) {
      const answer = await report(na, "node-a", big);
      if (answer.error) {
        refusal = answer.error.description ?? JSON.stringify(answer.error);
        break;
      }
      stored++;
    }
    assert.equal(stored, 0, `the broker stored ${stored} reports of 900 KiB (then: ${refusal})`);
    assert.match(refusal, /message size exceeds maximum allowed/);

    // Reports within the limit, more than the broker keeps of one node: its own oldest go.
    const full = JSON.stringify({ kind: "apply", pad: "b".repeat(NODE_LIMITS.reportBytes - 300) });
    for (let i = 0; i < REPORTS_KEPT + 30; i++) {
      const answer = await report(na, "node-a", full);
      assert.equal(answer.error, undefined, JSON.stringify(answer));
    }
    const kept = await mesh.control.reportRecords("node-a");
    assert.equal(kept.length, REPORTS_KEPT);
    assert.ok(kept.every((r) => r.msgId !== null && Number(r.msgId.split(".")[2]) >= 30));

    // node-b is untouched: its report is kept, the control plane stores its declaration,
    // and its next report is stored too.
    const bReports = await mesh.control.reportRecords("node-b");
    assert.deepEqual(bReports.map((r) => r.body), [{ kind: "apply", n: 0 }]);
    const declared = await mesh.control.declare("node-b", { version: 1, resources: [] });
    assert.equal(declared.serial, 1);
    const after = await report(nb, "node-b", JSON.stringify({ kind: "apply", n: 1 }));
    assert.equal(after.error, undefined, JSON.stringify(after));
    assert.equal((await mesh.control.reportRecords("node-b")).length, 2);
  } finally {
    await na.close();
    await nb.close();
  }
});

Deno.test("the streams bound every node's share, reserved on the broker; declarations never expire by age", async () => {
  await using mesh = await startMesh();
  await using a = await scratch();
  await enrol(mesh, "node-a", a);
  const info = async (name: string) => {
    const reply = await mesh.control.nc.request(`$JS.API.STREAM.INFO.${name}`, "", {
      timeout: 10_000,
    });
    return JSON.parse(reply.string()).config as Record<string, unknown>;
  };
  const decl = await info("MESH_DECL");
  assert.equal(decl.max_age, 0, "a declaration is kept until the next one replaces it");
  assert.equal(decl.max_msgs_per_subject, 1);
  assert.equal(decl.discard, "new", "a full stream refuses, never drops another node's");
  for (const [name, plan] of Object.entries(STREAMS)) {
    const config = await info(name);
    assert.equal(config.max_msgs_per_subject, plan.max_msgs_per_subject, name);
    assert.equal(config.max_msg_size, plan.max_msg_size, name);
    // One node has an account: its share is reserved (at least one node's, always).
    assert.equal(config.max_bytes, nodeShare(plan), name);
  }
  assert.equal((await info("MESH_REPORT")).max_msg_size, NODE_LIMITS.reportBytes);
  // A second node's account grows every stream by its share, before its token exists.
  await mesh.control.mintToken("node-b");
  for (const [name, plan] of Object.entries(STREAMS)) {
    assert.equal((await info(name)).max_bytes, 2 * nodeShare(plan), name);
  }
  const objects = await info("MESH_OBJ");
  assert.ok(Number(objects.max_bytes) > 0, "the object store is bounded");
  assert.equal(objects.discard, "new");
});
