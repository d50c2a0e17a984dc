/**
 * Enrolment and confinement against a real nats-server 2.9.10 on 127.0.0.1 (TLS,
 * JetStream, NATS operator mode: every node a user of one account, its JWT permitting
 * its own subjects only), with the host as a real process under its permission set.
 * Each abuse is performed as the node would (its own key and JWT) and shown refused.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { headers } from "@nats-io/transport-node";
import { decodeToken, encodeToken } from "../src/link/token.ts";
import { createSigningKey, signDeclaration, signingKeyFromSeed } from "../src/link/signature.ts";
import { declarationGet, joinInboxPrefix, subjectsOf } from "../src/link/subjects.ts";
import { signerOf } from "../src/link/_nkeys.ts";
import { Store } from "../src/store/store.ts";
import { readOr, runHost, scratch } from "./_helpers.ts";
import { connectAsNode, fileResource, spawnHost, startMesh, until } from "./_mesh.ts";

Deno.test("enrol: the node makes its own key (0600, never sent) and gets its JWT (0600), the token works once", async () => {
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
  // Its JWT beside it, 0600 too: issued for its key by the nodes' account, its own subjects.
  const jwtFile = posix.join(s.stateDir, "node.jwt");
  assert.equal((await Deno.stat(jwtFile)).mode! & 0o777, 0o600);
  const claims = JSON.parse(
    new TextDecoder().decode(
      Uint8Array.from(
        atob(
          (await Deno.readTextFile(jwtFile)).trim().split(".")[1].replace(/-/g, "+")
            .replace(/_/g, "/"),
        ),
        (c) => c.charCodeAt(0),
      ),
    ),
  );
  assert.equal(claims.sub, publicKey);
  assert.deepEqual(claims.nats.pub.allow, ["mesh.node.node-a.>"]);
  assert.deepEqual(claims.nats.sub.allow, ["mesh.push.node-a", "_INBOX.node-a.>"]);
  // The control plane learned only the public key; the seed is nowhere in its records.
  const state = await mesh.control.state();
  assert.equal(state.nodes["node-a"].publicKey, publicKey);
  assert.ok(!JSON.stringify(state).includes(seed));
  // Nothing of the node is in any server's configuration (operator mode).
  for (const file of ["operator.conf", "nats.conf"]) {
    const text = await Deno.readTextFile(posix.join(mesh.dir, file));
    assert.ok(!text.includes(seed) && !text.includes(publicKey) && !text.includes("node-a"));
  }
  // The store names the seed and JWT files, never holds a credential.
  {
    using store = Store.open(s.stateDir);
    assert.equal(store.meta("node_id"), "node-a");
    assert.equal(store.meta("link_seed_file"), seedFile);
    assert.equal(store.meta("link_jwt_file"), jwtFile);
    assert.equal(store.meta("link_public_key"), publicKey);
  }
  const storeBytes = await Deno.readFile(posix.join(s.stateDir, "state.db"));
  assert.ok(!new TextDecoder().decode(storeBytes).includes(seed), "no seed in the store");

  // Spent: its join user goes on the join account's revocation list, pushed to the server
  // once its answer surely arrived (JOIN_REVOCATION_DELAY_MS; the broker refuses it from
  // then on, and the control plane a second use before).
  const joinUser = decodeToken(token);
  await until("the broker refuses the spent join key", async () => {
    try {
      const nc = await connectAsNode(joinUser.brokers[0], joinUser.ca, "node-a", s.stateDir, {
        as: { seed: joinUser.join, jwt: joinUser.jwt },
        inboxPrefix: joinInboxPrefix(signerOf(joinUser.join).publicKey),
      });
      await nc.close();
      return undefined;
    } catch (error) {
      return /Authorization Violation|revoked/i.test(String(error)) || undefined;
    }
  }, 60_000);
  await using other = await scratch();
  const again = await runHost(["enrol", "--token", "-"], { env: other.env, stdin: token });
  assert.equal(again.code, 69, again.stderr);
  assert.match(again.stderr, /refused the token's one-time key: the token was already used/);
  assert.equal(await readOr(posix.join(other.stateDir, "node.jwt")), undefined);

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

Deno.test("the broker confines a node: A cannot read B's declarations, catch-up or objects, use the JetStream API, nor report as B", async () => {
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
  const nc = await connectAsNode(state.url, state.caPem, "node-a", a.stateDir);
  try {
    const errors: string[] = [];
    (async () => {
      for await (const s of nc.status()) {
        if (s.type === "error") errors.push(String(s.error.message));
      }
    })();
    // Its own catch-up: allowed (a 404, there is none yet).
    const own = await nc.request(subjectsOf("node-a").catchUp, new Uint8Array(0), {
      timeout: 5000,
    });
    assert.equal(own.headers?.code, 404);
    // B's catch-up, B's declaration by either form of direct get, the stream itself and
    // every JetStream API subject (consumers, purge, delete, info): refused by the broker.
    const b = subjectsOf("node-b");
    for (
      const subject of [
        b.catchUp,
        b.report,
        declarationGet("node-b"),
        declarationGet("node-a"),
        "$JS.API.DIRECT.GET.MESH_DECL",
        b.declaration,
        subjectsOf("node-a").declaration,
        "$JS.API.STREAM.PURGE.MESH_DECL",
        "$JS.API.STREAM.DELETE.MESH_DECL",
        "$JS.API.STREAM.INFO.MESH_DECL",
        "$JS.API.STREAM.MSG.GET.MESH_DECL",
        "$JS.API.CONSUMER.CREATE.MESH_DECL",
        "$JS.API.CONSUMER.CREATE.MESH_DECL.evil.mesh.decl.node-b",
        "$JS.API.CONSUMER.DURABLE.CREATE.MESH_DECL.node-a",
        "$JS.API.CONSUMER.LIST.MESH_DECL",
        "$JS.API.INFO",
        "mesh.obj.0000000000000000000000000000000000000000000000000000000000000000.meta",
        `mesh.node.node-b.obj.${"0".repeat(64)}.meta`,
      ]
    ) {
      await assert.rejects(
        nc.request(
          subject,
          JSON.stringify({
            last_by_subj: "mesh.decl.node-b",
            stream_name: "MESH_DECL",
            config: { deliver_subject: "mesh.push.node-a", filter_subject: "mesh.decl.node-b" },
          }),
          { timeout: 5000 },
        ),
        /Permissions Violation for Publish/,
        subject,
      );
    }
    // B's live declarations: where the stream republishes them, the stream's subject, and
    // every node's at once.
    for (const subject of [b.push, b.declaration, "mesh.push.*", "mesh.>", "_INBOX.node-b.>"]) {
      const sub = nc.subscribe(subject);
      const closed = await sub.closed;
      assert.match(
        String(closed),
        new RegExp(
          `Permissions Violation for Subscription to "${
            subject.replaceAll(".", "\\.").replaceAll("*", "\\*")
          }"`,
        ),
      );
    }
    // Reporting as B: refused, and B's report stream stays empty.
    nc.publish(b.report, JSON.stringify({ kind: "apply", forged: true }));
    nc.publish(b.heartbeat, JSON.stringify({ kind: "heartbeat", forged: true }));
    nc.publish(b.inventory, JSON.stringify({ kind: "inventory", forged: true }));
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
    // Its own heartbeat is a request the control plane answers.
    const beat = await nc.request(
      subjectsOf("node-a").heartbeat,
      JSON.stringify({ kind: "heartbeat" }),
      { timeout: 5000 },
    );
    assert.equal(JSON.parse(beat.string()).v, 1);
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

Deno.test("a reply subject reaches neither the stream nor the JetStream API; one A steers into B's push subject is dropped by B, which applies and reports nothing", async () => {
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
  // A's declaration (signed for A) names a file in B's managed root: were B to take it,
  // the file would appear.
  const planted = posix.join(b.root, "planted");
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [fileResource("planted", planted, "from a\n")],
  });
  const storedB = await mesh.control.declare("node-b", {
    version: 1,
    resources: [fileResource("own", posix.join(b.root, "own"), "b's own\n")],
  });
  // B runs, takes its own declaration and reports it.
  await using hostB = await spawnHost(["run", "--heartbeat-interval", "1"], b.env);
  await mesh.control.waitReport("node-b", (r) => r.kind === "apply" && r.serial === 1);
  const reportsBefore = (await mesh.control.reports("node-b")).length;
  const lastOfB = async () => {
    const reply = await mesh.control.nc.request(declarationGet("node-b"), new Uint8Array(0), {
      timeout: 5000,
    });
    return { seq: Number(reply.headers?.get("Nats-Sequence")), body: reply.string() };
  };
  const before = await lastOfB();
  assert.equal(before.seq, storedB.seq);

  const state = await mesh.control.state();
  const na = await connectAsNode(state.url, state.caPem, "node-a", a.stateDir);
  try {
    const own = subjectsOf("node-a");
    const targets = [
      "$JS.API.STREAM.PURGE.MESH_DECL",
      "$JS.API.STREAM.DELETE.MESH_DECL",
      subjectsOf("node-b").declaration,
      subjectsOf("node-b").push,
      subjectsOf("node-b").catchUp,
    ];
    // A's own catch-up, answered into each target: into B's push subject it arrives
    // (the broker routes a reply anywhere in the nodes' account), naming A's declaration.
    for (const reply of targets) na.publish(own.catchUp, new Uint8Array(0), { reply });
    // Its report, inventory, heartbeat and an object read, with each target as the reply
    // subject (JetStream and the control plane answer them).
    for (const subject of [own.report, own.inventory, own.heartbeat]) {
      for (const reply of targets) {
        na.publish(subject, JSON.stringify({ kind: "apply", abuse: true }), { reply });
      }
    }
    for (const reply of targets) {
      na.publish(`mesh.node.node-a.obj.${"0".repeat(64)}.meta`, new Uint8Array(0), { reply });
    }
    await na.flush();
    // Wait until A's report went through (so the abuses were processed), then look.
    await mesh.control.waitReport("node-a", (r) => r.abuse === true, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.deepEqual(await lastOfB(), before, "B's stored declaration is intact");
    const info = JSON.parse(
      (await mesh.control.nc.request("$JS.API.STREAM.INFO.MESH_DECL", "", { timeout: 5000 }))
        .string(),
    );
    assert.equal(info.state.messages, 2, "MESH_DECL was neither purged nor deleted");
    // B dropped what A steered into its push subject: nothing applied, nothing reported.
    await assert.rejects(Deno.readTextFile(planted), Deno.errors.NotFound);
    const after = await mesh.control.reports("node-b");
    assert.equal(after.length, reportsBefore, JSON.stringify(after.slice(reportsBefore)));
    assert.doesNotMatch(hostB.log(), /refused|node-a/);
  } finally {
    await na.close();
  }
});

Deno.test("a join key has its own inbox: it cannot listen to the node's inbox", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const token = decodeToken(await mesh.control.mintToken("node-a"));
  const nc = await connectAsNode(token.brokers[0], token.ca, "node-a", s.stateDir, {
    as: { seed: token.join, jwt: token.jwt },
    inboxPrefix: joinInboxPrefix(signerOf(token.join).publicKey),
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
