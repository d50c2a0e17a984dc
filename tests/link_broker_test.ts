/**
 * Enrolment and confinement against a real nats-server on 127.0.0.1 (TLS,
 * JetStream, nkeys), with the host as a real process under its permission set.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";
import { pinnedTls } from "../src/link/connection.ts";
import { decodeToken, encodeToken } from "../src/link/token.ts";
import { subjectsOf } from "../src/link/subjects.ts";
import { Store } from "../src/store/store.ts";
import { runHost, scratch } from "./_helpers.ts";
import { startMesh, until } from "./_mesh.ts";

Deno.test("enrol: the node makes its own key (0600, never sent), the token works once", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const token = await mesh.control.mintToken("node-a");
  const first = await runHost(["enrol", "--token", token], { env: s.env });
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
  const again = await runHost(["enrol", "--token", token], { env: other.env });
  assert.equal(again.code, 69, again.stderr);
  assert.match(again.stderr, /refused the token's one-time key: the token was already used/);

  const twice = await runHost(["enrol", "--token", await mesh.control.mintToken("node-a")], {
    env: s.env,
  });
  assert.equal(twice.code, 69);
  assert.match(twice.stderr, /already enrolled as "node-a"/);

  const status = await runHost(["status", "--json"], { env: s.env });
  const json = JSON.parse(status.stdout);
  assert.equal(json.identity.node, "node-a");
  assert.equal(json.identity.publicKey, publicKey);
  assert.equal(json.link.state, "service not running");
});

Deno.test("enrol refuses a broker whose certificate is not the pinned one, before any credential", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const token = decodeToken(await mesh.control.mintToken("node-a"));
  const wrongPin = token.pin.replace(/^../, token.pin.startsWith("00") ? "11" : "00");
  const run = await runHost(["enrol", "--token", encodeToken({ ...token, pin: wrongPin })], {
    env: s.env,
  });
  assert.equal(run.code, 69, run.stderr);
  assert.match(
    run.stderr,
    new RegExp(
      `TLS: the broker at 127\\.0\\.0\\.1:\\d+ presented a certificate with SHA-256 fingerprint ${token.pin}, but this node pins ${wrongPin}; refused before sending any credential`,
    ),
  );
  // The broker never saw an authentication attempt from it.
  assert.doesNotMatch(
    await Deno.readTextFile(posix.join(mesh.dir, "nats.log")),
    /Authorization Violation/,
  );
  // The token is still unused: the right one works afterwards.
  const ok = await runHost(["enrol", "--token", encodeToken(token)], { env: s.env });
  assert.equal(ok.code, 0, ok.stderr);
});

Deno.test("enrol failures say which side and why: wrong CA, DNS, TCP", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const token = decodeToken(await mesh.control.mintToken("node-a"));
  const otherCa = await Deno.makeTempDir({ prefix: "noxln-ca-" });
  try {
    const { makeCertificates } = await import("../lab/lib/certs.ts");
    const certs = await makeCertificates(otherCa);
    const wrongCa = await runHost(
      ["enrol", "--token", encodeToken({ ...token, ca: certs.caPem })],
      {
        env: s.env,
      },
    );
    assert.equal(wrongCa.code, 69);
    assert.match(
      wrongCa.stderr,
      /TLS: the broker at .* presented a certificate this node's enrolled CA does not vouch for/,
    );
  } finally {
    await Deno.remove(otherCa, { recursive: true });
  }
  const dns = await runHost(
    ["enrol", "--token", encodeToken({ ...token, url: "tls://no-such-broker.invalid:4222" })],
    { env: s.env },
  );
  assert.equal(dns.code, 69);
  assert.match(
    dns.stderr,
    /DNS: this node cannot resolve the broker's name "no-such-broker\.invalid"/,
  );
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const closedPort = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const tcp = await runHost(
    ["enrol", "--token", encodeToken({ ...token, url: `tls://127.0.0.1:${closedPort}` })],
    { env: s.env },
  );
  assert.equal(tcp.code, 69);
  assert.match(tcp.stderr, new RegExp(`TCP: 127\\.0\\.0\\.1:${closedPort} refused the connection`));
  const bad = await runHost(["enrol", "--token", "garbage!"], { env: s.env });
  assert.equal(bad.code, 64);
  assert.match(bad.stderr, /the enrolment token is not a token/);
});

Deno.test("the broker confines a node: A cannot read B's declarations nor report as B", async () => {
  await using mesh = await startMesh();
  await using a = await scratch();
  await using b = await scratch();
  for (const [node, s] of [["node-a", a], ["node-b", b]] as const) {
    const run = await runHost(["enrol", "--token", await mesh.control.mintToken(node)], {
      env: s.env,
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
    tls: pinnedTls({ url: state.url, ca: state.caPem, pin: state.pin }),
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
    // B's live declarations: the subscription is refused.
    const sub = nc.subscribe(subjectsOf("node-b").declaration);
    const closed = await sub.closed;
    assert.match(String(closed), /Permissions Violation for Subscription to "mesh\.decl\.node-b"/);
    // Reporting as B: refused, and B's report stream stays empty.
    nc.publish(subjectsOf("node-b").report, JSON.stringify({ kind: "apply", forged: true }));
    nc.publish(subjectsOf("node-b").heartbeat, JSON.stringify({ kind: "heartbeat", forged: true }));
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
    // Its own report is accepted.
    nc.publish(subjectsOf("node-a").report, JSON.stringify({ kind: "apply", mine: true }));
    await nc.flush();
    await mesh.control.waitReport("node-a", (r) => r.mine === true, 10_000);
  } finally {
    await nc.close();
  }
  const log = await Deno.readTextFile(posix.join(mesh.dir, "nats.log"));
  assert.match(log, /Publish Violation - Nkey "U[A-Z0-9]+", Subject "mesh\.node\.node-b\.report"/);
});
