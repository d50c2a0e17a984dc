/**
 * The link against a real three-server NATS cluster on 127.0.0.1 (routes,
 * JetStream with 3 replicas): the token names every server, the node fails
 * over when the server it uses is killed, keeps its place (the declaration
 * published while it moved still arrives), `status` says where it is and why it
 * moved, and the killed server comes back into the cluster.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { enrol } from "../src/link/enrol.ts";
import type { Identity } from "../src/link/identity.ts";
import { decodeToken } from "../src/link/token.ts";
import { hostOn, runHost, scratch } from "./_helpers.ts";
import { fileResource, spawnHost, startClusterMesh, until } from "./_mesh.ts";

Deno.test("a node fails over between the servers of a cluster without losing its place", async () => {
  await using mesh = await startClusterMesh("noxln-cluster-", { enrolments: true });
  const { cluster, control } = mesh;
  const pkg = await Deno.makeTempDir({ prefix: "noxln-pkg-" });
  await using _pkg = {
    [Symbol.asyncDispose]: () => Deno.remove(pkg, { recursive: true }).catch(() => {}),
  };
  await using s = await scratch({ bundle: posix.join(pkg, "substrate.lock") });

  // The token names the three servers under the mesh's CA (no server's own certificate).
  const token = await control.mintToken("node-c");
  const decoded = decodeToken(token);
  assert.deepEqual(decoded.brokers, cluster.members.map((m) => m.url));
  const enrolled = await runHost(["enrol", "--token", "-", "--json"], {
    env: s.env,
    stdin: token,
  });
  assert.equal(enrolled.code, 0, enrolled.stderr);
  assert.equal(JSON.parse(enrolled.stdout).brokers.length, 3);

  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  const up = await host.waitLog(/link: up to (tls:\/\/127\.0\.0\.1:\d+) as node-c/);
  const f = `${s.root}/f`;
  // Applied, as the machine shows it (each declaration writes other content).
  const contents = ["", "one\n", "two\n", "three\n"];
  const applied = (serial: number) =>
    until(`serial ${serial} applied`, async () => {
      const text = await Deno.readTextFile(f).catch(() => undefined);
      return text === contents[serial] ? true : undefined;
    }, 90_000).catch((e) => {
      throw new Error(`${e.message}\nhost log:\n${host.log()}`);
    });
  await control.declare("node-c", { version: 1, resources: [fileResource("f", f, "one\n")] });
  await applied(1);
  assert.equal(await Deno.readTextFile(f), "one\n");
  // What the newly admitted node sends upward reaches CONTROL's streams: its report and
  // its heartbeats (a heartbeat exported as a stream import, which a reload added, often
  // never reached MESH_BEAT when the node's server was not the stream's leader).
  await control.waitReport("node-c", (r) => r.kind === "apply" && r.serial === 1, 60_000);
  const beat = await until(
    "a heartbeat kept by MESH_BEAT",
    async () => (await control.lastHeartbeat("node-c")) ?? undefined,
    60_000,
  );
  assert.equal(beat.node, "node-c");

  // Kill the server the node uses, as a crash (SIGKILL), and publish while it moves.
  const victim = cluster.members.find((m) => m.url === up[1])!;
  await victim.kill();
  await control.declare("node-c", { version: 1, resources: [fileResource("f", f, "two\n")] });
  const moved = await host.waitLog(
    new RegExp(`link: moved from ${victim.url.replace(/\./g, "\\.")} to (tls://\\S+) \\(`),
    90_000,
  );
  assert.notEqual(moved[1], victim.url);
  await applied(2);
  assert.equal(await Deno.readTextFile(f), "two\n");

  // status: which server, and why it moved.
  const status = await until("status naming the move", async () => {
    const run = await runHost(["status", "--json"], { env: s.env });
    const json = JSON.parse(run.stdout);
    return json.link?.state === "up" && json.link.lastMove ? json : undefined;
  });
  assert.equal(status.link.server, moved[1]);
  assert.equal(status.link.lastMove.from, victim.url);
  assert.equal(status.link.lastMove.to, moved[1]);
  assert.match(status.link.lastMove.why, new RegExp(victim.url.replace(/\./g, "\\.")));
  assert.equal(status.identity.brokers.length, 3);
  const text = await runHost(["status"], { env: s.env });
  assert.match(text.stdout, /link moved\s+from tls:\/\/127\.0\.0\.1:\d+ to tls:/);

  // The server comes back and rejoins: its replica of the declarations catches up.
  await victim.start();
  await until("the restarted server current again in MESH_DECL", async () => {
    const reply = await control.nc.request("$JS.API.STREAM.INFO.MESH_DECL", "", {
      timeout: 5000,
    }).catch(() => undefined);
    if (!reply) return undefined;
    const info = JSON.parse(reply.string()) as {
      cluster?: { leader?: string; replicas?: { name: string; current: boolean }[] };
    };
    const names = [
      info.cluster?.leader,
      ...(info.cluster?.replicas ?? []).filter((r) => r.current).map((r) => r.name),
    ];
    return names.includes(victim.name) ? true : undefined;
  }, 90_000);
  await control.declare("node-c", { version: 1, resources: [fileResource("f", f, "three\n")] });
  await applied(3);
  assert.equal(await Deno.readTextFile(f), "three\n");
});

Deno.test("nodes enrol at the same moment against a cluster, while tokens are minted, and every one is admitted", async () => {
  // Every mint and every admission reloads the auth block on the three servers, and
  // nats-server (2.9.10) closes on a reload every connection that has not yet sent its
  // CONNECT ("Authorization Violation"): a node whose handshake overlaps another's
  // admission is refused although its token is good. Eight nodes, each enrolling as
  // soon as its token is minted, overlap one another's reloads.
  await using mesh = await startClusterMesh("noxln-cluster-", { enrolments: true });
  const { control } = mesh;
  const nodes = Array.from({ length: 8 }, (_, i) => `node-${i + 1}`);
  const tokens: string[] = [];
  const enrolments: Promise<Identity>[] = [];
  for (const node of nodes) {
    const token = await control.mintToken(node);
    tokens.push(token);
    enrolments.push((async () => {
      await using s = await scratch();
      using host = await hostOn(s);
      return await enrol(host, token);
    })());
  }
  const outcomes = await Promise.allSettled(enrolments);
  const refused = outcomes.flatMap((o, i) =>
    o.status === "rejected" ? [`${nodes[i]}: ${(o.reason as Error).message}`] : []
  );
  assert.deepEqual(refused, [], "every node enrolled");
  const state = await control.state();
  for (const [i, o] of outcomes.entries()) {
    const identity = (o as PromiseFulfilledResult<Identity>).value;
    assert.equal(identity.node, nodes[i]);
    assert.equal(state.nodes[nodes[i]].publicKey, identity.publicKey);
  }
  // The service retires each join key (a reload) once its answer is out.
  await until("every token used and retired", async () => {
    const records = Object.values((await control.state()).tokens);
    return records.length === nodes.length && records.every((t) => t.usedAt && t.retired)
      ? true
      : undefined;
  });

  // A used token is still refused, with the same words, after the host's retries.
  await using again = await scratch();
  using host = await hostOn(again);
  await assert.rejects(
    () => enrol(host, tokens[0]),
    /refused the token's one-time key: the token was already used/,
  );
  assert.equal(
    (await control.state()).nodes[nodes[0]].publicKey,
    (outcomes[0] as PromiseFulfilledResult<Identity>).value.publicKey,
  );
});
