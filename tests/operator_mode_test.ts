/**
 * The broker in operator mode (issue 35, item 1; lab/mesh/operator.ts), held to what the
 * layout relies on, against nats-server 2.9.10 on loopback: every node a user of one
 * account whose JWT permits only its own subjects, minted after the server started and
 * taken at once; the catch-up direct get asked on the node's own subject; a declaration
 * stored is republished to the node's own push subject with the stream's headers; a
 * reply subject a node names reaches only subjects of the nodes' account (never the
 * stream or the JetStream API), and what it steers into another node's push subject
 * says it is not that node's declaration; a node revoked by an account JWT pushed
 * through the system account, with no reload; and a site's leaf whose permissions are
 * its scoped signing key's, changed live. Not yet the stand-in control plane's layout:
 * these are the facts it will be built on.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  connect,
  credsAuthenticator,
  headers,
  jwtAuthenticator,
  type Msg,
} from "@nats-io/transport-node";
import { createUser } from "@nats-io/nkeys";
import {
  accountJwts,
  CATCH_UP,
  DECLARATION_REPUBLISH,
  newOperatorSeeds,
  nodeUserJwt,
  operatorConfig,
  type OperatorSeeds,
  PUSH_SUBJECTS,
  serviceCreds,
  siteLeafCreds,
} from "../lab/mesh/operator.ts";
import { until } from "./_mesh.ts";

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** A nats-server on `conf`, stopped on dispose; its log. */
async function server(dir: string, name: string, conf: string, ready: string) {
  const file = join(dir, `${name}.conf`);
  const log = join(dir, `${name}.log`);
  await Deno.writeTextFile(file, conf);
  const child = new Deno.Command("nats-server", {
    args: ["-c", file, "-l", log],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const text = () => Deno.readTextFile(log).catch(() => "");
  await until(`${name} ready`, async () => (await text()).includes(ready) || undefined, 20_000);
  return {
    text,
    async [Symbol.asyncDispose]() {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await child.status;
    },
  };
}

/** The hub: operator mode, JetStream, a leaf port; the declaration stream with its republish. */
async function hub(dir: string, seeds: OperatorSeeds, leafPort?: number) {
  const port = freePort();
  const conf = `server_name: hub
listen: "127.0.0.1:${port}"
jetstream { store_dir: ${
    JSON.stringify(join(dir, "js"))
  }, max_memory_store: 16MB, max_file_store: 256MB }
${leafPort ? `leafnodes { listen: "127.0.0.1:${leafPort}" }` : ""}
${await operatorConfig(seeds, join(dir, "jwt"))}`;
  const s = await server(dir, "hub", conf, "Server is ready");
  const creds = await serviceCreds(seeds);
  const control = await connect({
    servers: `nats://127.0.0.1:${port}`,
    authenticator: credsAuthenticator(new TextEncoder().encode(creds.control)),
  });
  const api = async (subject: string, body: unknown) =>
    JSON.parse(
      (await control.request(subject, JSON.stringify(body), { timeout: 10_000 })).string(),
    );
  const made = await api("$JS.API.STREAM.CREATE.MESH_DECL", {
    name: "MESH_DECL",
    subjects: ["mesh.decl.*"],
    storage: "file",
    max_msgs_per_subject: 1,
    allow_direct: true,
    republish: DECLARATION_REPUBLISH,
  });
  assert.equal(made.error, undefined, JSON.stringify(made.error));
  await api("$JS.API.STREAM.CREATE.MESH_REPORT", {
    name: "MESH_REPORT",
    subjects: ["mesh.node.*.report"],
    storage: "file",
  });
  const declare = async (node: string, serial: number) => {
    const ack = await control.request(
      `mesh.decl.${node}`,
      JSON.stringify({ node, serial }),
      { timeout: 10_000 },
    );
    assert.equal(JSON.parse(ack.string()).error, undefined);
  };
  const messages = async (stream: string) =>
    (await api(`$JS.API.STREAM.INFO.${stream}`, {})).state.messages as number;
  /** Push the account JWTs of `state` through the system account (no reload). */
  const push = async (state: Parameters<typeof accountJwts>[1]) => {
    const sys = await connect({
      servers: `nats://127.0.0.1:${port}`,
      authenticator: credsAuthenticator(new TextEncoder().encode(creds.sys)),
    });
    try {
      for (const jwt of Object.values(await accountJwts(seeds, state))) {
        const r = await sys.request("$SYS.REQ.CLAIMS.UPDATE", jwt, { timeout: 10_000 });
        const answer = JSON.parse(r.string());
        assert.equal(answer.data?.code ?? answer.error?.code, 200, r.string());
      }
    } finally {
      await sys.close();
    }
  };
  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    control,
    declare,
    messages,
    push,
    log: s.text,
    async [Symbol.asyncDispose]() {
      await control.close().catch(() => {});
      await s[Symbol.asyncDispose]();
    },
  };
}

/** A node: its key, a user JWT minted now, a connection to `url` with its own inbox. */
async function node(seeds: OperatorSeeds, name: string, url: string, key = createUser()) {
  const jwt = await nodeUserJwt(seeds, name, key.getPublicKey());
  const errors: string[] = [];
  const nc = await connect({
    servers: url,
    authenticator: jwtAuthenticator(jwt, key.getSeed()),
    inboxPrefix: `_INBOX.${name}`,
    reconnect: false,
  });
  (async () => {
    for await (const s of nc.status()) if (s.type === "error") errors.push(String(s.error));
  })();
  const pushed: Msg[] = [];
  // Its end (the connection revoked, say) is noted, never left to reject unheard.
  nc.subscribe(PUSH_SUBJECTS.node(name), { callback: (_e, m) => void pushed.push(m) }).closed
    .catch((e) => errors.push(String(e)));
  await nc.flush();
  return { nc, key, jwt, errors, pushed, name };
}

const serialOf = (m: Msg) => JSON.parse(m.string()).serial as number;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("operator mode: nodes are users of one account confined to their own subjects; catch-up on their own subject, pushes republished; a reply cannot reach the stream; revoked live, no reload", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxln-op-" });
  await using _dir = {
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }).catch(() => {}),
  };
  const seeds = newOperatorSeeds();
  await using h = await hub(dir, seeds);
  await h.declare("a", 1);
  await h.declare("b", 1);

  // Users minted after the server started, in no configuration: they connect at once.
  const started = performance.now();
  const a = await node(seeds, "a", h.url);
  const b = await node(seeds, "b", h.url);
  const took = performance.now() - started;
  try {
    // The catch-up: asked on the node's own subject, answered by the stream's direct get.
    const caught = await a.nc.request(CATCH_UP.node("a"), "", { timeout: 5000 });
    assert.equal(serialOf(caught), 1);
    assert.equal(caught.headers?.get("Nats-Subject"), "mesh.decl.a");
    assert.ok(Number(caught.headers?.get("Nats-Sequence")) > 0);
    // A live push: the stored declaration republished, with the stream's headers.
    await h.declare("a", 2);
    await until("serial 2 pushed to a", () => a.pushed.some((m) => serialOf(m) === 2) || undefined);
    const live = a.pushed.find((m) => serialOf(m) === 2)!;
    assert.equal(live.headers?.get("Nats-Stream"), "MESH_DECL");
    assert.equal(live.headers?.get("Nats-Subject"), "mesh.decl.a");
    assert.ok(Number(live.headers?.get("Nats-Sequence")) > 0);
    assert.equal(b.pushed.length, 0, "b heard nothing of a's");

    // Another node's subjects, the stream itself and the JetStream API: refused.
    for (
      const subject of [
        CATCH_UP.node("b"),
        "mesh.node.b.report",
        "$JS.API.DIRECT.GET.MESH_DECL.mesh.decl.b",
        "$JS.API.DIRECT.GET.MESH_DECL.mesh.decl.a",
        "$JS.API.STREAM.PURGE.MESH_DECL",
        "$JS.API.CONSUMER.CREATE.MESH_DECL",
        "mesh.decl.a",
      ]
    ) {
      await assert.rejects(
        a.nc.request(subject, "{}", { timeout: 5000 }),
        /Permissions Violation for Publish/,
        subject,
      );
    }
    // Refused subscriptions end with the broker's error (their `closed` rejects): kept.
    for (const subject of [PUSH_SUBJECTS.node("b"), "mesh.>"]) {
      a.nc.subscribe(subject).closed.catch((e) => a.errors.push(String(e)));
    }
    await a.nc.flush();
    await until(
      "a's subscriptions to b's pushes refused",
      () =>
        a.errors.some((e) => /Permissions Violation for Subscription to "mesh\.push\.b"/.test(e)) ||
        undefined,
    );

    // A reply subject a names: a's catch-up answered into b's push subject reaches b, and
    // says it is a's stored declaration (a node takes only its own: Nats-Subject); a's
    // report with the stream's purge as reply reaches no JetStream API.
    a.nc.publish(CATCH_UP.node("a"), "", { reply: PUSH_SUBJECTS.node("b") });
    const h2 = headers();
    a.nc.publish("mesh.node.a.report", JSON.stringify({ kind: "apply" }), {
      reply: "$JS.API.STREAM.PURGE.MESH_DECL",
      headers: h2,
    });
    await until("the steered answer at b", () => b.pushed.length > 0 || undefined);
    assert.equal(b.pushed[0].headers?.get("Nats-Subject"), "mesh.decl.a");
    await sleep(500);
    assert.equal(await h.messages("MESH_DECL"), 2, "nothing purged");
    assert.equal(await h.messages("MESH_REPORT"), 1, "a's report stored once");

    // b revoked: the NODES account pushed again with b's key in its revocations. The
    // server closes b's connection; a reset arriving on its socket after the client let
    // go of it is thrown with no listener (Deno's node:net; the host's links are TLS,
    // whose form of it connection.ts guards): expected here, and only here.
    const dropReset = (event: ErrorEvent) => {
      if (/ECONNRESET/.test(String((event.error as Error | undefined)?.message))) {
        event.preventDefault();
      }
    };
    globalThis.addEventListener("error", dropReset);
    await using _guard = {
      [Symbol.asyncDispose]: async () => {
        await sleep(500);
        globalThis.removeEventListener("error", dropReset);
      },
    };
    const reloadsBefore = (await h.log()).split("Reloaded server configuration").length;
    const closed = b.nc.closed();
    await h.push({ revokedNodes: { [b.key.getPublicKey()]: Math.floor(Date.now() / 1000) } });
    const why = await Promise.race([closed, sleep(10_000).then(() => "still connected")]);
    assert.notEqual(why, "still connected");
    await assert.rejects(
      connect({
        servers: h.url,
        authenticator: jwtAuthenticator(b.jwt, b.key.getSeed()),
        reconnect: false,
      }),
      /Authorization Violation|revoked/i,
    );
    assert.equal(
      (await h.log()).split("Reloaded server configuration").length,
      reloadsBefore,
      "no reload",
    );
    // a is untouched.
    assert.equal(serialOf(await a.nc.request(CATCH_UP.node("a"), "", { timeout: 5000 })), 2);
  } finally {
    await a.nc.close().catch(() => {});
    await b.nc.close().catch(() => {});
  }
  console.log(`two users minted and connected in ${took.toFixed(0)} ms`);
});

Deno.test("operator mode: a site's leaf carries exactly its scope's nodes; the scope changed live closes its connection, which comes back with the new scope", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxln-op-leaf-" });
  await using _dir = {
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }).catch(() => {}),
  };
  const seeds = newOperatorSeeds();
  const leafPort = freePort();
  const site = await siteLeafCreds(seeds, "site1");
  await using h = await hub(dir, seeds, leafPort);
  await h.push({ sites: { site1: ["s1"] } });
  await Deno.writeTextFile(join(dir, "site1.creds"), site, { mode: 0o600 });
  const port = freePort();
  const nodesKey = (await import("../lab/mesh/operator.ts")).publicKeys(seeds).nodes;
  await using leaf = await server(
    dir,
    "leaf",
    `server_name: leaf1
listen: "127.0.0.1:${port}"
leafnodes {
  reconnect: 1
  remotes: [ { url: "nats-leaf://127.0.0.1:${leafPort}", account: ${
      JSON.stringify(nodesKey)
    }, credentials: ${JSON.stringify(join(dir, "site1.creds"))} } ]
}
${await operatorConfig(seeds, join(dir, "leaf-jwt"), { sites: { site1: ["s1"] } }, {
      resolver: "memory",
    })}`,
    "Leafnode connection created",
  );
  await h.declare("s1", 1);
  await h.declare("s2", 1);
  const url = `nats://127.0.0.1:${port}`;
  const s1 = await node(seeds, "s1", url);
  const s2 = await node(seeds, "s2", url);
  try {
    // s1, in the site's scope: its catch-up and its pushes cross the leaf.
    assert.equal(serialOf(await s1.nc.request(CATCH_UP.node("s1"), "", { timeout: 5000 })), 1);
    await h.declare("s1", 2);
    await until(
      "s1's push through the leaf",
      () => s1.pushed.some((m) => serialOf(m) === 2) || undefined,
    );
    // s2 is a user of the same account, but not of this site's scope: nothing crosses.
    await assert.rejects(
      s2.nc.request(CATCH_UP.node("s2"), "", { timeout: 2000 }),
      /timeout|no responders/i,
    );
    await h.declare("s2", 2);
    await sleep(1000);
    assert.equal(s2.pushed.length, 0, "no push of s2 crosses the leaf");

    // The scope now names s2: every server closes the leaf's connection (an altered
    // scope), the leaf connects again under it, and s2's traffic crosses.
    const before = (await leaf.text()).split("Leafnode connection created").length;
    await h.push({ sites: { site1: ["s1", "s2"] } });
    await until(
      "the leaf connected again",
      async () =>
        (await leaf.text()).split("Leafnode connection created").length > before || undefined,
      20_000,
    );
    await until("s2's catch-up through the leaf", async () => {
      try {
        return serialOf(await s2.nc.request(CATCH_UP.node("s2"), "", { timeout: 2000 })) === 2 ||
          undefined;
      } catch {
        return undefined;
      }
    }, 20_000);
    await h.declare("s2", 3);
    await until(
      "s2's push through the leaf",
      () => s2.pushed.some((m) => serialOf(m) === 3) || undefined,
    );
  } finally {
    await s1.nc.close().catch(() => {});
    await s2.nc.close().catch(() => {});
  }
});
