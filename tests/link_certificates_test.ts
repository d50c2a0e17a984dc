/**
 * Certificates that renew (issue 34, item 2; DESIGN.md §7), against a real nats-server
 * with openssl-made certificates: a node trusts the mesh's CA and checks the broker's
 * name, never pins the broker's own certificate. A renewed certificate is taken with
 * nothing done on the node (also by a node enrolled with a version 3 token, which pinned
 * the old one); the CA moves on by a signed trust update; and each refusal is performed:
 * an expired certificate, one that names another broker, one of an unknown CA, one of a
 * CA whose trust ended, a trust update signed by another key or replayed. Each is
 * refused before any credential is sent, saying what expired and when.
 */
import assert from "node:assert/strict";
import { join, posix } from "node:path";
import { createOperator } from "@nats-io/nkeys";
import { issueServerCertificate, makeCa } from "../lab/lib/certs.ts";
import { decodeToken, encodeToken } from "../src/link/token.ts";
import { readIdentity } from "../src/link/identity.ts";
import { META } from "../src/store/meta.ts";
import { Store } from "../src/store/store.ts";
import { signTrust, type TrustList, verifyTrust } from "../src/link/trust.ts";
import { hostOn, runHost, scratch } from "./_helpers.ts";
import { type Mesh, spawnHost, startMesh, until } from "./_mesh.ts";

/** Re-issue the loopback broker's certificate (`how`), then start the broker again on it. */
async function reissue(
  mesh: Mesh,
  how: { caFile?: string; caKeyFile?: string; names?: string[]; ips?: string[]; at?: string },
): Promise<void> {
  const state = await mesh.control.state();
  await issueServerCertificate({
    caFile: state.ca!.certFile,
    caKeyFile: state.ca!.keyFile,
    ...state.cert!,
    ...how,
  });
  await mesh.stopBroker();
  await mesh.startBroker();
}

/**
 * The test's control plane answering again after the broker presented certificates it
 * refuses (its client may give up reconnecting then): opened again when it closed.
 */
async function controlBack(mesh: Mesh): Promise<void> {
  const answers = await mesh.control.nc.flush().then(() => true, () => false);
  if (answers && !mesh.control.nc.isClosed()) return;
  await mesh.control.close();
  const { ControlPlane } = await import("../lab/mesh/control.ts");
  mesh.control = await ControlPlane.open(mesh.dir);
  mesh.control.serveEnrolments();
  mesh.control.serveObjects();
}

/** The broker's log since the last start. */
async function brokerLog(mesh: Mesh): Promise<string> {
  const text = await Deno.readTextFile(posix.join(mesh.dir, "nats.log"));
  return text.slice(text.lastIndexOf("Starting nats-server"));
}

Deno.test("a broker certificate renewed under the mesh's CA is taken with nothing done on the node, also by a node enrolled with a version 3 token", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const enrolled = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken("node-a"),
  });
  assert.equal(enrolled.code, 0, enrolled.stderr);
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/link: up to .* as node-a/);
  const seen = async () => {
    const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
    return status.tls as { broker: { notAfter: string; daysLeft: number } | null; cas: unknown[] };
  };
  const before = await until("status names the broker's certificate", async () => {
    const tls = await seen();
    return tls.broker ?? undefined;
  });
  assert.ok(before.daysLeft >= 28 && before.daysLeft <= 30, JSON.stringify(before));
  const first = (await mesh.control.state()).pin;

  // Renewed as an ACME client renews: same CA, same names, a new key and validity.
  const { renewed } = await mesh.control.renewCertificates();
  assert.equal(renewed.length, 1);
  await mesh.stopBroker();
  await mesh.startBroker();
  await host.waitLog(/link: up to .* as node-a \(reconnected\)/, 60_000);
  const heartbeat = await until("a heartbeat from the renewed connection", async () => {
    const beat = await mesh.control.lastHeartbeat("node-a").catch(() => undefined);
    const tls = beat?.tls as { broker?: { notAfter: string } } | undefined;
    return tls?.broker && tls.broker.notAfter !== before.notAfter ? tls : undefined;
  });
  assert.ok(heartbeat.broker, "the heartbeat says when the broker's certificate expires");
  assert.doesNotMatch(host.log(), /tls-|TLS:/, "no TLS refusal on the way");
  await host.stop();

  // A node enrolled with a version 3 token pinned the first certificate: it links to the
  // renewed one too (it chains to the CA and names the broker).
  const store = Store.open(s.stateDir);
  try {
    const identity = readIdentity(store)!;
    store.setMeta(
      META.brokers,
      JSON.stringify(identity.brokers.map((b) => ({ url: b.url, pin: first }))),
    );
  } finally {
    store.close();
  }
  await using again = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await again.waitLog(/link: up to .* as node-a/, 60_000);
});

Deno.test("refused before any credential, saying what and when: an expired certificate, one naming another broker, one of another CA", async () => {
  await using mesh = await startMesh();
  const token = await mesh.control.mintToken("node-a");
  const enrolWith = async () => {
    await using s = await scratch();
    return await runHost(["enrol", "--token", "-"], { env: s.env, stdin: token });
  };

  // Expired: issued by the mesh's CA, valid for a day in 2020 (openssl under faketime).
  await reissue(mesh, { at: "2020-01-01 00:00:00", names: ["localhost"], ips: ["127.0.0.1"] });
  const expired = await enrolWith();
  assert.equal(expired.code, 69, expired.stderr);
  assert.match(
    expired.stderr,
    /TLS: the broker at 127\.0\.0\.1:\d+ presented a certificate \(CN=localhost\) that expired at 2020-01-31T00:00:00\.000Z; this node's clock reads 20\d\d-.*; refused before sending any credential/,
  );
  assert.doesNotMatch(await brokerLog(mesh), /Authorization Violation|authentication error/);

  // Another name: a certificate of the mesh's CA for another broker.
  await reissue(mesh, { names: ["elsewhere.example"], ips: ["127.0.0.9"] });
  const named = await enrolWith();
  assert.equal(named.code, 69, named.stderr);
  assert.match(
    named.stderr,
    /TLS: the broker at 127\.0\.0\.1:\d+ presented a certificate of the mesh's CA that does not name 127\.0\.0\.1 .*; refused before sending any credential/,
  );
  assert.doesNotMatch(await brokerLog(mesh), /Authorization Violation|authentication error/);

  // Another CA: the broker's certificate is issued by a CA the token does not carry.
  const other = join(mesh.dir, "other-ca");
  await Deno.mkdir(other);
  await makeCa(join(other, "ca.pem"), join(other, "ca.key"), { name: "someone else's CA" });
  await reissue(mesh, {
    caFile: join(other, "ca.pem"),
    caKeyFile: join(other, "ca.key"),
    names: ["localhost"],
    ips: ["127.0.0.1"],
  });
  const unknown = await enrolWith();
  assert.equal(unknown.code, 69, unknown.stderr);
  assert.match(
    unknown.stderr,
    /presented a certificate \(CN=localhost\) issued by "CN=someone else's CA", a CA this node does not trust; it trusts "CN=nox-mesh stand-in CA" \(until .*\); refused before sending any credential/,
  );
  assert.doesNotMatch(await brokerLog(mesh), /Authorization Violation|authentication error/);

  // Back to a good certificate: the token was never spent.
  await reissue(mesh, { names: ["localhost"], ips: ["127.0.0.1"] });
  await controlBack(mesh);
  const good = await enrolWith();
  assert.equal(good.code, 0, good.stderr);
});

Deno.test("the mesh's CA rotates through the link: nodes follow a signed trust update, link under the new CA, and one away past the overlap says why not", async () => {
  await using mesh = await startMesh();
  await using a = await scratch();
  await using away = await scratch();
  for (const [node, s] of [["node-a", a], ["node-b", away]] as const) {
    const r = await runHost(["enrol", "--token", "-"], {
      env: s.env,
      stdin: await mesh.control.mintToken(node),
    });
    assert.equal(r.code, 0, r.stderr);
    await mesh.control.declare(node, { version: 1, resources: [] });
  }
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], a.env);
  await host.waitLog(/link: up to .* as node-a/);

  // The rotation starts: the new CA beside the old for an hour, sent with a declaration.
  const rotation = await mesh.control.rotateCa({ overlapSeconds: 3600 });
  assert.equal(rotation.trust, 1);
  await host.waitLog(
    /link: trust update 1 taken: .* "CN=nox-mesh stand-in CA" \(until .*\) or "CN=nox-mesh stand-in CA 1"/,
  );
  const status = JSON.parse((await runHost(["status", "--json"], { env: a.env })).stdout);
  assert.equal(status.tls.trustSerial, 1);
  assert.equal(status.tls.cas.length, 2);
  assert.equal(status.tls.cas[0].ends, rotation.until, "the old CA until the overlap's end");

  // It ends: every server gets a certificate of the new CA, the old one is dropped.
  const end = await mesh.control.withdrawOldCa();
  assert.equal(end.trust, 2);
  await host.waitLog(/link: trust update 2 taken/);
  await mesh.stopBroker();
  await mesh.startBroker();
  await host.waitLog(/link: up to .* as node-a \(reconnected\)/, 60_000);
  await until("a heartbeat under the new CA", async () => {
    const beat = await mesh.control.lastHeartbeat("node-a").catch(() => undefined);
    const tls = beat?.tls as { broker?: { issuer: string }; cas?: unknown[] } | undefined;
    return tls?.broker?.issuer === "CN=nox-mesh stand-in CA 1" && tls.cas?.length === 1
      ? true
      : undefined;
  });

  // A node away for the whole rotation trusts only the old CA: it says why it cannot link.
  await using late = await spawnHost(["run", "--heartbeat-interval", "1"], away.env);
  await late.waitLog(
    /presented a certificate \(CN=localhost\) issued by "CN=nox-mesh stand-in CA 1", a CA this node does not trust; it trusts "CN=nox-mesh stand-in CA" \(until .*\); refused before sending any credential/,
  );
  const lateStatus = JSON.parse((await runHost(["status", "--json"], { env: away.env })).stdout);
  assert.equal(lateStatus.link.lastError.code, "link.tls-ca");
  assert.match(lateStatus.link.lastError.message, /a CA this node does not trust/);
});

Deno.test("a trust update is taken only signed by the declaration's key, and never older than the one held", async () => {
  await using s = await scratch();
  using engine = await hostOn(s);
  const dir = await Deno.makeTempDir({ prefix: "noxln-trust-" });
  try {
    const ca = await makeCa(join(dir, "a.pem"), join(dir, "a.key"), { name: "A" });
    const key = createOperator();
    const list: TrustList = { serial: 3, cas: [{ pem: ca }] };
    const header = signTrust(key, list);
    assert.deepEqual(verifyTrust(header, key.getPublicKey()), list);
    // Another key signed it (a broker forging one): not taken.
    const thief = createOperator();
    assert.match(
      (verifyTrust(signTrust(thief, list), key.getPublicKey()) as { problem: string }).problem,
      /signed by .*, not by .*, the key that signed the declaration/,
    );
    // The body changed after signing: not taken.
    const [head] = header.split(" body=");
    const forged = `${head} body=${
      btoa(JSON.stringify({ ...list, serial: 9 })).replace(/=+$/, "").replace(/\+/g, "-")
        .replace(/\//g, "_")
    }`;
    assert.match(
      (verifyTrust(forged, key.getPublicKey()) as { problem: string }).problem,
      /does not verify/,
    );
    // A server certificate is no CA.
    const leaf = join(dir, "leaf.pem");
    await issueServerCertificate({
      caFile: join(dir, "a.pem"),
      caKeyFile: join(dir, "a.key"),
      certFile: leaf,
      keyFile: join(dir, "leaf.key"),
      names: ["x"],
      ips: [],
    });
    const notCa = signTrust(key, { serial: 4, cas: [{ pem: await Deno.readTextFile(leaf) }] });
    assert.match(
      (verifyTrust(notCa, key.getPublicKey()) as { problem: string }).problem,
      /not a CA certificate/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  assert.ok(engine);
});

Deno.test("an older trust update replayed by the broker is not taken: a dropped CA stays dropped", async () => {
  await using mesh = await startMesh();
  await using a = await scratch();
  const r = await runHost(["enrol", "--token", "-"], {
    env: a.env,
    stdin: await mesh.control.mintToken("node-a"),
  });
  assert.equal(r.code, 0, r.stderr);
  await mesh.control.declare("node-a", { version: 1, resources: [] });
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], a.env);
  await host.waitLog(/link: up to .* as node-a/);
  await mesh.control.rotateCa({ overlapSeconds: 3600 });
  await host.waitLog(/link: trust update 1 taken/);
  const first = (await mesh.control.state()).trust!;
  await mesh.control.withdrawOldCa();
  await host.waitLog(/link: trust update 2 taken/);
  // The broker (or whoever carries the messages) sends the first update again, signed
  // as it was, with a newer declaration: the declaration is taken, the update is not.
  const state = await mesh.control.state();
  const { signingKeyFromSeed } = await import("../src/link/signature.ts");
  const replayed = signTrust(signingKeyFromSeed(state.signer.seed), first);
  const sign = await mesh.control.declarationSigner();
  const body = new TextEncoder().encode(
    JSON.stringify({ version: 1, node: "node-a", serial: 50, resources: [] }),
  );
  const h = sign("node-a", body);
  h.set("Mesh-Trust", replayed);
  await mesh.control.nc.request("mesh.decl.node-a", body, { headers: h, timeout: 10_000 });
  await host.waitLog(/apply \(declaration, link serial 50\): converged/);
  const status = JSON.parse((await runHost(["status", "--json"], { env: a.env })).stdout);
  assert.equal(status.tls.trustSerial, 2, "the newer list stays");
  assert.equal(status.tls.cas.length, 1);
  assert.equal(decodeToken(await mesh.control.mintToken("node-x")).ca, state.caPem);
  assert.ok(encodeToken);
});
