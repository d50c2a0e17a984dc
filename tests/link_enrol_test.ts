/**
 * Enrolment abused (issue 21), against a real nats-server and the stand-in control
 * plane: a token holder who offers a key that is not a user key (an account key in
 * auth.conf made every later reload fail, so no token, enrolment or revocation took
 * effect again), and one who names another, unused token in the request. The control
 * plane takes the token from the subject the broker confined the join key to, and
 * admits user keys only.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { connect, type NatsConnection, nkeyAuthenticator } from "@nats-io/transport-node";
import { createAccount, createOperator, createUser, fromSeed, type KeyPair } from "@nats-io/nkeys";
import { brokerTls } from "../src/link/connection.ts";
import { caTrust } from "../src/link/trust.ts";
import { enrolStatement } from "../src/link/enrol.ts";
import { decodeToken, encodeToken } from "../src/link/token.ts";
import { enrolSubject, joinInboxPrefix } from "../src/link/subjects.ts";
import { base64url } from "../src/link/_base64url.ts";
import { runHost, scratch } from "./_helpers.ts";
import { startMesh } from "./_mesh.ts";

/** Connect as a token's one-time join key, as `enrol` does (its own inbox). */
async function connectAsJoin(token: string): Promise<{ nc: NatsConnection; key: string }> {
  const t = decodeToken(token);
  const join = fromSeed(new TextEncoder().encode(t.join));
  const nc = await connect({
    servers: t.brokers[0],
    authenticator: nkeyAuthenticator(new TextEncoder().encode(t.join)),
    inboxPrefix: joinInboxPrefix(join.getPublicKey()),
    tls: brokerTls({ url: t.brokers[0], trust: caTrust(t.ca) }),
    reconnect: false,
  });
  return { nc, key: join.getPublicKey() };
}

/** An enrolment request for `node` offering `pair`'s public key, signed by it. */
function requestFor(node: string, pair: KeyPair, extra: Record<string, unknown> = {}): string {
  const publicKey = pair.getPublicKey();
  const sig = base64url(pair.sign(new TextEncoder().encode(enrolStatement(node, publicKey))));
  return JSON.stringify({ v: 1, node, publicKey, sig, ...extra });
}

async function ask(nc: NatsConnection, subject: string, body: string) {
  const reply = await nc.request(subject, body, { timeout: 10_000 });
  return JSON.parse(reply.string()) as { ok?: boolean; error?: string };
}

/** `nox-mesh-host enrol` with `token` on stdin, in a fresh state directory. */
async function enrolHost(token: string) {
  const s = await scratch();
  const run = await runHost(["enrol", "--token", "-"], { env: s.env, stdin: token });
  return { s, run };
}

Deno.test("enrolment admits only NKey user keys: an account or operator key is refused, and tokens, enrolments and reloads keep working", async () => {
  await using mesh = await startMesh();
  const token = await mesh.control.mintToken("node-x");
  const { nc, key } = await connectAsJoin(token);
  try {
    for (const pair of [createAccount(), createOperator()]) {
      const answer = await ask(nc, enrolSubject("node-x", key), requestFor("node-x", pair));
      assert.equal(answer.ok, false, JSON.stringify(answer));
      assert.match(answer.error ?? "", /must be an NKey user public key \(U…\)/);
      const auth = await Deno.readTextFile(posix.join(mesh.dir, "auth.conf"));
      assert.ok(!auth.includes(pair.getPublicKey()), "the key reached auth.conf");
    }
  } finally {
    await nc.close();
  }
  const state = await mesh.control.state();
  assert.equal(state.nodes["node-x"], undefined);
  assert.equal(Object.values(state.tokens)[0].usedAt, undefined, "the token is still unused");

  // The broker still takes new configurations: the same token enrols the real host, a
  // new token another one, and a revocation takes effect.
  const x = await enrolHost(token);
  await using _x = x.s;
  assert.equal(x.run.code, 0, x.run.stderr);
  const y = await enrolHost(await mesh.control.mintToken("node-y"));
  await using _y = y.s;
  assert.equal(y.run.code, 0, y.run.stderr);
  await mesh.control.revoke("node-y");
  assert.doesNotMatch(
    await Deno.readTextFile(posix.join(mesh.dir, "auth.conf")),
    new RegExp((await mesh.control.state()).nodes["node-y"].publicKey),
  );
});

Deno.test("a token holder cannot spend another token: the join key is the one the broker confined the connection to, not a field of the request", async () => {
  await using mesh = await startMesh();
  const stolen = await mesh.control.mintToken("node-a");
  const victims = await mesh.control.mintToken("node-a");
  const victimKey = fromSeed(new TextEncoder().encode(decodeToken(victims).join)).getPublicKey();
  const { nc, key } = await connectAsJoin(stolen);
  const attacker = createUser();
  try {
    // The other token's subject: the broker refuses the publish.
    await assert.rejects(
      nc.request(enrolSubject("node-a", victimKey), requestFor("node-a", attacker), {
        timeout: 5000,
      }),
      /Permissions Violation for Publish to "mesh\.enrol\.node-a\.U/,
    );
    // Its own subject, naming the other token in the request: the subject's token is spent.
    const answer = await ask(
      nc,
      enrolSubject("node-a", key),
      requestFor("node-a", attacker, { join: victimKey }),
    );
    assert.equal(answer.ok, true, JSON.stringify(answer));
  } finally {
    await nc.close();
  }
  const state = await mesh.control.state();
  assert.ok(state.tokens[key].usedAt, "the attacker's own token is spent");
  assert.equal(state.tokens[victimKey].usedAt, undefined, "the other token is untouched");

  // The other token's holder enrols with it (replacing the key node-a had); the spent
  // one is refused by the broker.
  const victim = await enrolHost(victims);
  await using _v = victim.s;
  assert.equal(victim.run.code, 0, victim.run.stderr);
  const seed = (await Deno.readTextFile(posix.join(victim.s.stateDir, "node.nk"))).trim();
  assert.equal(
    (await mesh.control.state()).nodes["node-a"].publicKey,
    fromSeed(new TextEncoder().encode(seed)).getPublicKey(),
  );
  const again = await enrolHost(stolen);
  await using _a = again.s;
  assert.equal(again.run.code, 69, again.run.stderr);
  assert.match(again.run.stderr, /the token was already used/);
});

/**
 * A relay to the broker on 127.0.0.1 that drops the first connection it relays as soon
 * as the node's TLS handshake starts (what nats-server does to a connection in its
 * handshake when its configuration is reloaded), and relays every later one whole.
 */
function dropFirstHandshake(port: number) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let dropped = 0;
  let connections = 0;
  (async () => {
    for await (const client of listener) {
      const server = await Deno.connect({ hostname: "127.0.0.1", port });
      const first = connections++ === 0;
      const close = () => {
        for (const c of [client, server]) {
          try {
            c.close();
          } catch { /* closed */ }
        }
      };
      (async () => {
        for await (const chunk of server.readable) await client.write(chunk);
      })().catch(() => {}).finally(close);
      (async () => {
        for await (const chunk of client.readable) {
          if (first) {
            dropped++;
            return close(); // the ClientHello arrived: the broker "reloads" and drops it
          }
          await server.write(chunk);
        }
      })().catch(() => {}).finally(close);
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    dropped: () => dropped,
    [Symbol.dispose]: () => listener.close(),
  };
}

Deno.test("enrol: a join connection the broker drops in its handshake (a reload) is tried again, and the token works", async () => {
  await using mesh = await startMesh();
  const token = decodeToken(await mesh.control.mintToken("node-a"));
  using relay = dropFirstHandshake(mesh.broker.port);
  const { s, run } = await enrolHost(
    encodeToken({
      ...token,
      brokers: [`tls://127.0.0.1:${relay.port}`],
    }),
  );
  await using _s = s;
  assert.equal(relay.dropped(), 1, "the relay dropped the first handshake");
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stderr, /closed the connection in its handshake/);
  assert.ok((await mesh.control.state()).nodes["node-a"]);
});
