/**
 * Enrolment and confinement against a real nats-server on 127.0.0.1 (TLS,
 * JetStream, nkeys), with the host as a real process under its permission set.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { connect, headers, nkeyAuthenticator } from "@nats-io/transport-node";
import { brokerTls } from "../src/link/connection.ts";
import { caTrust } from "../src/link/trust.ts";
import { decodeToken, encodeToken } from "../src/link/token.ts";
import { fromSeed } from "@nats-io/nkeys";
import { createSigningKey, signDeclaration, signingKeyFromSeed } from "../src/link/signature.ts";
import { joinInboxPrefix, subjectsOf } from "../src/link/subjects.ts";
import { Store } from "../src/store/store.ts";
import { readOr, runHost, scratch } from "./_helpers.ts";
import { fileResource, spawnHost, startMesh, until } from "./_mesh.ts";

Deno.test("enrol: the node makes its own key (0600, never sent), the token works once", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const token = await mesh.control.mintToken("node-a");
  const first = await runHost(["enrol", "--token", "-"], { env: s.env, stdin: token });
  assert.equal(first.code, 0, first.stderr);
  assert.match(
    first.stdout,
    /^enrolled as node-a \(key (U[A-Z0-9]{55})\) with tls:\/\/127\.0\.0\.1:\d+/,
  );
  const publicKey = first.stdout.match(/key (U[A-Z0-9]{55})/)![1];

  const seedFile = posix.join(s.stateDir, "node.nk");
  assert.equal((await Deno.stat(seedFile)).mode! & 0o777, 0o600);
  const seed = (await Deno.readTextFile(seedFile)).trim();
  assert.match(seed, /^SU/);
  // The control plane learned only the public key; the seed is nowhere in its records.
  const state = await mesh.control.state();
  assert.equal(state.nodes["node-a"].publicKey, publicKey);
  assert.ok(!JSON.stringify(state).includes(seed));
  assert.ok(!(await Deno.readTextFile(posix.join(mesh.dir, "auth.conf"))).includes(seed));
  // The store names the seed file, never holds a credential.
  {
    using store = Store.open(s.stateDir);
    assert.equal(store.meta("node_id"), "node-a");
    assert.equal(store.meta("link_seed_file"), seedFile);
    assert.equal(store.meta("link_public_key"), publicKey);
  }
  const storeBytes = await Deno.readFile(posix.join(s.stateDir, "state.db"));
  assert.ok(!new TextDecoder().decode(storeBytes).includes(seed), "no seed in the store");

  await using other = await scratch();
  const again = await runHost(["enrol", "--token", "-"], { env: other.env, stdin: token });
  assert.equal(again.code, 69, again.stderr);
  assert.match(again.stderr, /refused the token's one-time key: the token was already used/);

  const twice = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken("node-a"),
  });
  assert.equal(twice.code, 69);
  assert.match(twice.stderr, /already enrolled as "node-a"/);

  const status = await runHost(["status", "--json"], { env: s.env });
  const json = JSON.parse(status.stdout);
  assert.equal(json.identity.node, "node-a");
  assert.equal(json.identity.publicKey, publicKey);
  assert.equal(json.link.state, "service not running");
});

/**
 * A loopback relay to `port` that, on its first connection, holds what the client sends
 * after its TLS Finished (the CONNECT) until `hold` returns. The client's last handshake
 * flight is ChangeCipherSpec (record type 20), then Finished, then CONNECT and PING
 * (seen with TLS 1.3 between Deno and nats-server 2.9.10). Returns whether it held one.
 */
function holdFirstConnect(port: number, hold: () => Promise<void>) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let held = false;
  const pipe = async (from: Deno.Conn, to: Deno.Conn, first: boolean) => {
    let buffer = new Uint8Array(0);
    let afterCcs = -1; // records forwarded since the ChangeCipherSpec
    for await (const chunk of from.readable) {
      if (!first || held) {
        await to.write(chunk);
        continue;
      }
      buffer = new Uint8Array([...buffer, ...chunk]);
      let at = 0;
      while (at + 5 <= buffer.length && !held) {
        const end = at + 5 + ((buffer[at + 3] << 8) | buffer[at + 4]);
        if (end > buffer.length) break;
        if (afterCcs >= 0) afterCcs++;
        if (buffer[at] === 20) afterCcs = 0;
        at = end;
        if (afterCcs === 1) held = true; // Finished is through; CONNECT waits
      }
      await to.write(buffer.subarray(0, at));
      buffer = buffer.subarray(at);
      if (held) {
        await hold();
        await to.write(buffer).catch(() => {});
      }
    }
  };
  let connections = 0;
  (async () => {
    for await (const client of listener) {
      const first = connections++ === 0;
      const server = await Deno.connect({ hostname: "127.0.0.1", port });
      // Each direction ends with a half-close (the broker's last words reach the node
      // before its end of file); both sockets close when both directions are done.
      const direction = (from: Deno.Conn, to: Deno.Conn, hold: boolean) =>
        pipe(from, to, hold).catch(() => {}).finally(() => to.closeWrite().catch(() => {}));
      Promise.all([direction(server, client, false), direction(client, server, first)])
        .finally(() => {
          for (const c of [client, server]) {
            try {
              c.close();
            } catch { /* closed */ }
          }
        });
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    held: () => held,
    [Symbol.dispose]: () => listener.close(),
  };
}

Deno.test("enrol: a join key refused because a reload fell in its handshake is tried again, and the token works", async () => {
  // nats-server (2.9.10) closes, on a reload, each connection that has not sent its
  // CONNECT yet ("Authorization Violation"), although its key is admitted. The relay
  // holds the node's CONNECT while the control plane reloads the broker (a token for
  // another node); main took that refusal as final: "the token was already used".
  await using mesh = await startMesh();
  await using s = await scratch();
  const token = decodeToken(await mesh.control.mintToken("node-a"));
  using relay = holdFirstConnect(mesh.broker.port, async () => {
    await mesh.control.mintToken("node-b");
  });
  const through = encodeToken({
    ...token,
    brokers: [`tls://127.0.0.1:${relay.port}`],
  });
  const run = await runHost(["enrol", "--token", "-"], { env: s.env, stdin: through });
  assert.ok(relay.held(), "the relay held the first CONNECT");
  // The broker did refuse the first attempt, before its CONNECT (no key named).
  assert.match(
    await Deno.readTextFile(posix.join(mesh.dir, "nats.log")),
    /authentication error - Nkey ""/,
  );
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stderr, /refused the token's one-time key \(a broker refuses connections/);
  assert.match(run.stdout, /^enrolled as node-a/);
  const state = await mesh.control.state();
  assert.ok(state.nodes["node-a"]);
});

Deno.test("enrol failures say which side and why: wrong CA, DNS, TCP", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const token = decodeToken(await mesh.control.mintToken("node-a"));
  const broker = (p: { url: string }) => ({ ...token, brokers: [p.url] });
  const otherCa = await Deno.makeTempDir({ prefix: "noxln-ca-" });
  try {
    const { makeCertificates } = await import("../lab/lib/certs.ts");
    const certs = await makeCertificates(otherCa);
    const wrongCa = await runHost(["enrol", "--token", "-"], {
      env: s.env,
      stdin: encodeToken({ ...token, ca: certs.caPem }),
    });
    assert.equal(wrongCa.code, 69);
    assert.match(
      wrongCa.stderr,
      /TLS: the broker at .* presented a certificate \(CN=localhost\) issued by "CN=nox-mesh stand-in CA" \(a CA of that name, but not the one this node trusts: another key\), a CA this node does not trust; it trusts "CN=nox-mesh stand-in CA" \(until .*\); refused before sending any credential/,
    );
  } finally {
    await Deno.remove(otherCa, { recursive: true });
  }
  const dns = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: encodeToken(broker({ url: "tls://no-such-broker.invalid:4222" })),
  });
  assert.equal(dns.code, 69);
  assert.match(
    dns.stderr,
    /DNS: this node cannot resolve the broker's name "no-such-broker\.invalid"/,
  );
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const closedPort = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const tcp = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: encodeToken(broker({ url: `tls://127.0.0.1:${closedPort}` })),
  });
  assert.equal(tcp.code, 69);
  assert.match(tcp.stderr, new RegExp(`TCP: 127\\.0\\.0\\.1:${closedPort} refused the connection`));
  const bad = await runHost(["enrol", "--token", "-"], { env: s.env, stdin: "garbage!" });
  assert.equal(bad.code, 64);
  assert.match(bad.stderr, /the enrolment token is not a token/);
});

Deno.test("the broker confines a node: A cannot read B's declarations nor report as B", async () => {
  await using mesh = await startMesh();
  await using a = await scratch();
  await using b = await scratch();
  for (const [node, s] of [["node-a", a], ["node-b", b]] as const) {
    const run = await runHost(["enrol", "--token", "-"], {
      env: s.env,
      stdin: await mesh.control.mintToken(node),
    });
    assert.equal(run.code, 0, run.stderr);
  }
  await mesh.control.declare("node-b", { version: 1, resources: [] });
  const state = await mesh.control.state();
  const seedA = new TextEncoder().encode(
    (await Deno.readTextFile(posix.join(a.stateDir, "node.nk"))).trim(),
  );
  const nc = await connect({
    servers: state.url,
    authenticator: nkeyAuthenticator(seedA),
    inboxPrefix: subjectsOf("node-a").inboxPrefix,
    tls: brokerTls({ url: state.url, trust: caTrust(state.caPem) }),
    reconnect: false,
  });
  try {
    const errors: string[] = [];
    (async () => {
      for await (const s of nc.status()) {
        if (s.type === "error") errors.push(String(s.error.message));
      }
    })();
    // Its own declaration: allowed (a 404, there is none yet).
    const own = await nc.request(subjectsOf("node-a").directGet, new Uint8Array(0), {
      timeout: 5000,
    });
    assert.equal(own.headers?.code, 404);
    // B's last declaration by direct get: refused by the broker.
    await assert.rejects(
      nc.request(subjectsOf("node-b").directGet, new Uint8Array(0), { timeout: 5000 }),
      /Permissions Violation for Publish to "\$JS\.API\.DIRECT\.GET\.MESH_DECL\.mesh\.decl\.node-b"/,
    );
    // The body form of direct get (any subject) is refused too.
    await assert.rejects(
      nc.request(
        "$JS.API.DIRECT.GET.MESH_DECL",
        JSON.stringify({ last_by_subj: "mesh.decl.node-b" }),
        { timeout: 5000 },
      ),
      /Permissions Violation/,
    );
    // B's live declarations: the subscriptions are refused (where B's consumer delivers,
    // and the stream's subject itself, which no node reads any more).
    for (const subject of [subjectsOf("node-b").push, subjectsOf("node-b").declaration]) {
      const sub = nc.subscribe(subject);
      const closed = await sub.closed;
      assert.match(
        String(closed),
        new RegExp(`Permissions Violation for Subscription to "${subject.replaceAll(".", "\\.")}"`),
      );
    }
    // No consumer API: A can neither make a consumer (of its own subject or B's, with a
    // deliver subject of its choosing), nor read, page, pull from or delete one; nor
    // acknowledge or answer the flow control of B's.
    const b = subjectsOf("node-b");
    for (
      const subject of [
        "$JS.API.CONSUMER.CREATE.MESH_DECL",
        "$JS.API.CONSUMER.CREATE.MESH_DECL.evil.mesh.decl.node-a",
        "$JS.API.CONSUMER.CREATE.MESH_DECL.evil.mesh.decl.node-b",
        "$JS.API.CONSUMER.DURABLE.CREATE.MESH_DECL.node-a",
        "$JS.API.CONSUMER.INFO.MESH_DECL.node-a",
        "$JS.API.CONSUMER.INFO.MESH_DECL.node-b",
        "$JS.API.CONSUMER.DELETE.MESH_DECL.node-b",
        "$JS.API.CONSUMER.MSG.NEXT.MESH_DECL.node-b",
        "$JS.API.CONSUMER.NAMES.MESH_DECL",
        "$JS.API.CONSUMER.LIST.MESH_DECL",
        b.ack.replace(">", "1.1.1.1.0"),
        b.flowControl.replace(">", "x"),
      ]
    ) {
      await assert.rejects(
        nc.request(
          subject,
          JSON.stringify({
            stream_name: "MESH_DECL",
            config: { deliver_subject: "mesh.decl.node-b", filter_subject: "mesh.decl.node-b" },
          }),
          { timeout: 5000 },
        ),
        /Permissions Violation for Publish/,
        subject,
      );
    }
    // Reporting as B: refused, and B's report stream stays empty.
    nc.publish(subjectsOf("node-b").report, JSON.stringify({ kind: "apply", forged: true }));
    nc.publish(subjectsOf("node-b").heartbeat, JSON.stringify({ kind: "heartbeat", forged: true }));
    nc.publish(subjectsOf("node-b").inventory, JSON.stringify({ kind: "inventory", forged: true }));
    await nc.flush();
    await until(
      "the broker's refusal of the forged report",
      () =>
        errors.some((e) =>
            /Permissions Violation for Publish to "mesh\.node\.node-b\.report"/.test(e)
          )
          ? true
          : undefined,
      10_000,
    );
    assert.deepEqual(await mesh.control.reports("node-b"), []);
    assert.equal(await mesh.control.lastHeartbeat("node-b"), undefined);
    assert.equal(await mesh.control.lastInventory("node-b"), undefined);
    // Its own report is accepted, and JetStream's acknowledgement reaches its own inbox;
    // the same message id again is acknowledged as a duplicate and stored once.
    const h = headers();
    h.set("Nats-Msg-Id", "node-a.1.abc");
    for (const duplicate of [false, true]) {
      const ack = await nc.request(
        subjectsOf("node-a").report,
        JSON.stringify({ kind: "apply", mine: true }),
        { timeout: 5000, headers: h },
      );
      const answer = JSON.parse(ack.string());
      assert.equal(answer.stream, "MESH_REPORT");
      assert.equal(answer.duplicate ?? false, duplicate);
    }
    await mesh.control.waitReport("node-a", (r) => r.mine === true, 10_000);
    assert.equal((await mesh.control.reports("node-a")).length, 1);
  } finally {
    await nc.close();
  }
  const log = await Deno.readTextFile(posix.join(mesh.dir, "nats.log"));
  assert.match(log, /Publish Violation - Nkey "U[A-Z0-9]+", Subject "mesh\.node\.node-b\.report"/);
});

Deno.test("a pushed declaration is applied only when signed by the pinned key: unsigned, tampered or another key's are refused and reported", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const run = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken("node-a"),
  });
  assert.equal(run.code, 0, run.stderr);
  {
    using store = Store.open(s.stateDir);
    assert.equal(store.meta("link_signer"), (await mesh.control.state()).signer.publicKey);
  }
  const f = posix.join(s.root, "f");
  const body = (serial: number, content: string) =>
    new TextEncoder().encode(JSON.stringify({
      version: 1,
      node: "node-a",
      serial,
      resources: [fileResource("f", f, content)],
    }));
  // Published while the host is down: the catch-up (direct get) carries the header too.
  await mesh.control.declare("node-a", body(1, "unsigned\n"), { signWith: null });
  await using host = await spawnHost(["run"], s.env);
  const first = await mesh.control.waitReport("node-a", (r) => r.kind === "refused");
  assert.equal(first.reason, "unsigned");
  assert.equal(first.serial, 1);
  assert.match(String(first.message), /carries no Mesh-Signature header/);

  await mesh.control.declare("node-a", body(2, "stranger\n"), { signWith: createSigningKey() });
  // The control plane's signature of other bytes on a changed body.
  const key = signingKeyFromSeed((await mesh.control.state()).signer.seed);
  await mesh.control.declare("node-a", body(3, "tampered\n"), {
    signature: signDeclaration(key, "node-a", body(3, "tampere\n")),
  });
  const refused = await until("three refusals", async () => {
    const all = (await mesh.control.reports("node-a")).filter((r) => r.kind === "refused");
    return all.length >= 3 ? all : undefined;
  });
  assert.deepEqual(refused.map((r) => [r.reason, r.serial]), [
    ["unsigned", 1],
    ["bad-signature", 2],
    ["bad-signature", 3],
  ]);
  assert.match(String(refused[1].message), /signed by O\w+, not by the pinned signing key O/);
  assert.match(String(refused[2].message), /does not verify against the pinned signing key O/);
  await assert.rejects(Deno.readTextFile(f), Deno.errors.NotFound);

  // Signed by the control plane's key: applied.
  await mesh.control.declare("node-a", body(4, "signed\n"));
  const applied = await mesh.control.waitReport("node-a", (r) => r.kind === "apply");
  assert.equal(applied.serial, 4);
  assert.equal(applied.outcome, "converged");
  assert.equal(await Deno.readTextFile(f), "signed\n");
  assert.match(
    host.log(),
    /refused, nothing was applied: the declaration carries no Mesh-Signature/,
  );
});

Deno.test("broker accounts: a reply subject cannot reach another node's subject or the JetStream API", async () => {
  await using mesh = await startMesh();
  await using a = await scratch();
  await using b = await scratch();
  for (const [node, s] of [["node-a", a], ["node-b", b]] as const) {
    const run = await runHost(["enrol", "--token", "-"], {
      env: s.env,
      stdin: await mesh.control.mintToken(node),
    });
    assert.equal(run.code, 0, run.stderr);
  }
  await mesh.control.declare("node-a", { version: 1, resources: [] });
  const storedB = await mesh.control.declare("node-b", { version: 1, resources: [] });
  const lastOfB = async () => {
    const reply = await mesh.control.nc.request(
      subjectsOf("node-b").directGet,
      new Uint8Array(0),
      { timeout: 5000 },
    );
    return { seq: Number(reply.headers?.get("Nats-Sequence")), body: reply.string() };
  };
  const before = await lastOfB();
  assert.equal(before.seq, storedB.seq);

  const state = await mesh.control.state();
  const connectAs = async (stateDir: string, node: string) =>
    await connect({
      servers: state.url,
      authenticator: nkeyAuthenticator(
        new TextEncoder().encode(
          (await Deno.readTextFile(posix.join(stateDir, "node.nk"))).trim(),
        ),
      ),
      inboxPrefix: subjectsOf(node).inboxPrefix,
      tls: brokerTls({ url: state.url, trust: caTrust(state.caPem) }),
      reconnect: false,
    });
  const na = await connectAs(a.stateDir, "node-a");
  const nb = await connectAs(b.stateDir, "node-b");
  try {
    const heardByB: string[] = [];
    nb.subscribe(subjectsOf("node-b").push, {
      callback: (_e, m) => {
        // B's own consumer delivers B's declaration (and idle heartbeats); nothing else.
        if (m.headers?.code === 100) return;
        if (m.reply) m.respond("+ACK");
        if (m.string() !== before.body) heardByB.push(m.string());
      },
    });
    await nb.flush();
    // A's own consumer delivers A's declaration: its acknowledgement, answered into B's
    // subjects and the JetStream API, reaches none of them.
    const delivered = await until(
      "A's declaration delivered to A",
      () =>
        new Promise<string | undefined>((resolve) => {
          const sub = na.subscribe(subjectsOf("node-a").push, {
            callback: (_e, m) => {
              if (m.headers?.code !== 100 && m.reply) resolve(m.reply);
            },
          });
          setTimeout(() => {
            sub.unsubscribe();
            resolve(undefined);
          }, 2000);
        }),
    );
    assert.match(delivered, /^\$JS\.ACK\.MESH_DECL\.node-a\./);
    for (const reply of ["$JS.API.STREAM.PURGE.MESH_DECL", subjectsOf("node-b").push]) {
      for (const ack of ["+ACK", "+NXT", "-NAK", "+TERM"]) na.publish(delivered, ack, { reply });
    }
    // A's own direct get with B's declaration subject as the reply subject.
    na.publish(subjectsOf("node-a").directGet, new Uint8Array(0), {
      reply: subjectsOf("node-b").declaration,
    });
    // Reports, inventories and heartbeats (and its direct get) with a JetStream API reply
    // subject; reports and inventories are acknowledged by JetStream (the outbox needs it),
    // so their reply subjects are also aimed at B's declaration subject.
    const own = subjectsOf("node-a");
    for (const subject of [own.report, own.inventory, own.heartbeat]) {
      for (
        const reply of [
          "$JS.API.STREAM.PURGE.MESH_DECL",
          subjectsOf("node-b").declaration,
          subjectsOf("node-b").push,
        ]
      ) {
        na.publish(subject, JSON.stringify({ kind: "apply", abuse: true }), { reply });
      }
    }
    na.publish(subjectsOf("node-a").directGet, new Uint8Array(0), {
      reply: "$JS.API.STREAM.PURGE.MESH_DECL",
    });
    await na.flush();
    // Wait until A's report went through (so the abuses were processed), then look.
    await mesh.control.waitReport("node-a", (r) => r.abuse === true, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.deepEqual(await lastOfB(), before, "B's stored declaration is intact");
    assert.deepEqual(heardByB, [], "B heard nothing from A's reply subject");
    const info = JSON.parse(
      (await mesh.control.nc.request("$JS.API.STREAM.INFO.MESH_DECL", "", { timeout: 5000 }))
        .string(),
    );
    assert.equal(info.state.messages, 2, "MESH_DECL was not purged");
  } finally {
    await na.close();
    await nb.close();
  }
});

Deno.test("a join key has its own inbox: it cannot listen to the node's inbox", async () => {
  await using mesh = await startMesh();
  const token = decodeToken(await mesh.control.mintToken("node-a"));
  const join = fromSeed(new TextEncoder().encode(token.join));
  const nc = await connect({
    servers: token.brokers[0],
    authenticator: nkeyAuthenticator(join.getSeed()),
    inboxPrefix: joinInboxPrefix(join.getPublicKey()),
    tls: brokerTls({ url: token.brokers[0], trust: caTrust(token.ca) }),
    reconnect: false,
  });
  try {
    const sub = nc.subscribe(`${subjectsOf("node-a").inboxPrefix}.>`);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const closed = await Promise.race([
      sub.closed,
      new Promise((resolve) => timer = setTimeout(() => resolve("still subscribed"), 15_000)),
    ]);
    clearTimeout(timer);
    assert.match(
      String(closed),
      /Permissions Violation for Subscription to "_INBOX\.node-a\.>"/,
    );
  } finally {
    await nc.close().catch(() => {});
  }
});

Deno.test("enrol takes the token from stdin or a file; on the command line it is refused, unused, with how to give it", async () => {
  await using mesh = await startMesh();
  await using viaStdin = await scratch();
  await using viaFile = await scratch();
  await using viaArgv = await scratch();
  const warning = /warning: a token given on the command line can be read by any local user/;

  const stdin = await runHost(["enrol", "--token", "-"], {
    env: viaStdin.env,
    stdin: `${await mesh.control.mintToken("node-a")}\n`,
  });
  assert.equal(stdin.code, 0, stdin.stderr);
  assert.match(stdin.stdout, /^enrolled as node-a /);
  assert.doesNotMatch(stdin.stderr, warning);

  const file = posix.join(viaFile.dir, "token");
  await Deno.writeTextFile(file, await mesh.control.mintToken("node-b"), { mode: 0o600 });
  const fromFile = await runHost(["enrol", "--token-file", file], { env: viaFile.env });
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.match(fromFile.stdout, /^enrolled as node-b /);
  assert.doesNotMatch(fromFile.stderr, warning);

  const token = await mesh.control.mintToken("node-c");
  for (const args of [["--token", token], [`--token=${token}`]]) {
    const argv = await runHost(["enrol", ...args], { env: viaArgv.env });
    assert.equal(argv.code, 64, argv.stderr);
    assert.match(
      argv.stderr,
      /a token on the command line can be read by any local user \(ps, \/proc\/<pid>\/cmdline\).*not used/,
    );
    assert.match(argv.stderr, /--token - < token\.txt\).*--token-file token\.txt/);
    assert.doesNotMatch(argv.stderr, new RegExp(token.slice(0, 20)), "the token is not echoed");
  }
  assert.equal(await readOr(posix.join(viaArgv.stateDir, "node.nk")), undefined);
  // The refused token is still unused: given on stdin, it enrols.
  const later = await runHost(["enrol", "--token", "-"], { env: viaArgv.env, stdin: token });
  assert.equal(later.code, 0, later.stderr);

  const missing = await runHost(["enrol", "--token-file", posix.join(viaFile.dir, "nope")], {
    env: viaFile.env,
  });
  assert.equal(missing.code, 64);
  assert.match(missing.stderr, /cannot read the token file .*nope/);
  const both = await runHost(["enrol", "--token", "-", "--token-file", file], {
    env: viaFile.env,
  });
  assert.equal(both.code, 64);
  assert.match(both.stderr, /give the token once/);
});
