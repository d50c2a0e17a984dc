/**
 * The link's connection on Deno's own sockets (src/link/deno_transport.ts and
 * connection_deno.ts, issue 37 item 2; measured, not the link's transport: RESULTS.md
 * "Issue 37, item 2"), against a real nats-server 2.9.10 with openssl-made certificates:
 * it connects under the mesh's CA with the broker's name checked (a DNS name and an
 * address), carries messages both ways with the node's inbox prefix, says when the broker
 * goes, and refuses, before any credential, a certificate naming another broker, one of
 * another CA and an expired one, each said as the node layer's connection says it. The
 * last test shows why it is not the link's transport: Deno adds `caCerts` to the
 * runtime's own roots, so a CA the runtime trusts is trusted beside the mesh's.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { createUser } from "@nats-io/nkeys";
import { issueServerCertificate, makeCa, makeCertificates } from "../lab/lib/certs.ts";
import { type ConnectionAuth, openConnection } from "../src/link/connection_deno.ts";
import { LinkError } from "../src/link/errors.ts";
import { caTrust } from "../src/link/trust.ts";

const REPO = new URL("..", import.meta.url).pathname;

/** A free loopback port (listened on, then let go). */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** A nats-server on loopback presenting `certFile`, requiring TLS; stopped on dispose. */
async function broker(dir: string, certFile: string, keyFile: string) {
  const port = freePort();
  const conf = posix.join(dir, `nats-${port}.conf`);
  await Deno.writeTextFile(
    conf,
    `listen: 127.0.0.1:${port}\ntls { cert_file: "${certFile}", key_file: "${keyFile}" }\n`,
  );
  const child = new Deno.Command("nats-server", {
    args: ["-c", conf],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let log = "";
  const reading = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) log += decoder.decode(chunk, { stream: true });
  })();
  for (let i = 0; !log.includes("Server is ready"); i++) {
    if (i > 300) throw new Error(`nats-server did not start:\n${log}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    child.kill("SIGTERM");
    await child.status;
    await reading;
  };
  return { port, stop, [Symbol.asyncDispose]: stop };
}

/** A scratch directory holding the mesh's CA and a server certificate for localhost. */
/** A broker whose certificate (for localhost) is issued by a CA of its own, named `name`. */
async function foreignBroker(dir: string, name: string) {
  const otherCa = posix.join(dir, "other-ca.pem");
  await makeCa(otherCa, posix.join(dir, "other-ca.key"), { name });
  await issueServerCertificate({
    caFile: otherCa,
    caKeyFile: posix.join(dir, "other-ca.key"),
    certFile: posix.join(dir, "foreign.pem"),
    keyFile: posix.join(dir, "foreign.key"),
    names: ["localhost"],
    ips: ["127.0.0.1"],
  });
  return {
    otherCa,
    broker: await broker(dir, posix.join(dir, "foreign.pem"), posix.join(dir, "foreign.key")),
  };
}

async function pki() {
  const dir = await Deno.makeTempDir({ prefix: "noxdt-" });
  const certs = await makeCertificates(dir, { names: ["localhost"], ips: ["127.0.0.1"] });
  return {
    dir,
    certs,
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

/** A node's credentials (the broker here has no accounts: any user is let in). */
function auth(): ConnectionAuth {
  const user = createUser();
  return {
    seed: user.getSeed(),
    jwt: "not-checked-by-this-broker",
    publicKey: user.getPublicKey(),
    inboxPrefix: "_INBOX.node-a",
    name: "node-a",
  };
}

async function refusal(promise: Promise<unknown>): Promise<LinkError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof LinkError, String(error));
    return error;
  }
  throw new Error("the connection was not refused");
}

Deno.test("Deno transport: under the mesh's CA, by name and by address, messages both ways with the node's inbox prefix, and the broker's end noticed", async () => {
  await using p = await pki();
  await using b = await broker(p.dir, p.certs.certFile, p.certs.keyFile);
  const trust = caTrust(p.certs.caPem);
  for (const host of ["localhost", "127.0.0.1"]) {
    const nc = await openConnection({ url: `tls://${host}:${b.port}`, trust }, auth());
    const service = nc.subscribe("svc.echo", {
      callback: (_error, msg) => {
        msg.respond(`${msg.string()} (reply to ${msg.reply})`);
      },
    });
    const reply = await nc.request("svc.echo", "ping", { timeout: 5000 });
    assert.match(reply.string(), /^ping \(reply to _INBOX\.node-a\./);
    service.unsubscribe();
    await nc.close();
  }
  // The broker goes away: the connection ends (the link's loop then connects again).
  const nc = await openConnection({ url: `tls://localhost:${b.port}`, trust }, auth());
  await nc.flush();
  const closed = nc.closed();
  await b.stop();
  const ended = await Promise.race([
    closed.then(() => true),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), 20_000)),
  ]);
  assert.ok(ended, "the connection did not end when the broker stopped");
});

Deno.test("Deno transport: a certificate naming another broker, one of another CA and an expired one are refused, each said", async () => {
  await using p = await pki();
  const trust = caTrust(p.certs.caPem);
  const issue = (stem: string, how: { names: string[]; ips: string[]; at?: string }) =>
    issueServerCertificate({
      caFile: p.certs.caFile,
      caKeyFile: posix.join(p.dir, "ca.key"),
      certFile: posix.join(p.dir, `${stem}.pem`),
      keyFile: posix.join(p.dir, `${stem}.key`),
      ...how,
      ...(how.at ? { days: 1 } : {}),
    });

  await issue("other-name", { names: ["elsewhere.example"], ips: [] });
  {
    await using b = await broker(
      p.dir,
      posix.join(p.dir, "other-name.pem"),
      posix.join(p.dir, "other-name.key"),
    );
    const error = await refusal(
      openConnection({ url: `tls://localhost:${b.port}`, trust }, auth()),
    );
    assert.equal(error.code, "link.tls-name", error.message);
    assert.match(error.message, /does not name localhost/);
  }

  await issue("expired", { names: ["localhost"], ips: ["127.0.0.1"], at: "2020-01-01" });
  {
    await using b = await broker(
      p.dir,
      posix.join(p.dir, "expired.pem"),
      posix.join(p.dir, "expired.key"),
    );
    const error = await refusal(
      openConnection({ url: `tls://localhost:${b.port}`, trust }, auth()),
    );
    assert.equal(error.code, "link.tls-expired", error.message);
    assert.match(error.message, /expired at 2020-01-0\dT/);
  }

  {
    await using b = (await foreignBroker(p.dir, "another CA")).broker;
    const error = await refusal(
      openConnection({ url: `tls://localhost:${b.port}`, trust }, auth()),
    );
    assert.equal(error.code, "link.tls-ca", error.message);
    assert.match(error.message, /issued by "CN=another CA", a CA this node does not trust/);
  }
});

Deno.test("Deno transport (why it is not the link's): a CA in the runtime's own store is trusted beside the mesh's, where node:tls trusts the mesh's alone", async () => {
  await using p = await pki();
  const foreign = await foreignBroker(p.dir, "a CA the runtime trusts");
  const otherCa = foreign.otherCa;
  await using b = foreign.broker;
  // A process whose runtime trusts the other CA (DENO_CERT adds it to the root store, as
  // Mozilla's roots are in it by default), asked to trust only the mesh's CA.
  const script = posix.join(p.dir, "probe.ts");
  await Deno.writeTextFile(
    script,
    `import { openConnection as deno } from "${REPO}src/link/connection_deno.ts";\n` +
      `import { connect } from "@nats-io/transport-node";\n` +
      `import { brokerTls } from "${REPO}src/link/connection.ts";\n` +
      `import { caTrust } from "${REPO}src/link/trust.ts";\n` +
      `import { createUser } from "@nats-io/nkeys";\n` +
      `const url = "tls://localhost:${b.port}";\n` +
      `const trust = caTrust(${JSON.stringify(p.certs.caPem)});\n` +
      `const u = createUser();\n` +
      `const a = { seed: u.getSeed(), jwt: "x", publicKey: u.getPublicKey(), ` +
      `inboxPrefix: "_INBOX.n", name: "n" };\n` +
      `const said = (p) => p.then(async (nc) => { await nc.close(); return "accepted"; }, ` +
      `(e) => "refused: " + e.message);\n` +
      `console.log(JSON.stringify({ deno: await said(deno({ url, trust }, a)), ` +
      `node: await said(connect({ servers: url, reconnect: false, ` +
      `tls: brokerTls({ url, trust }) })) }));\n`,
  );
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", "--allow-all", "--config", posix.join(REPO, "deno.json"), script],
    env: { DENO_CERT: otherCa },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const seen = JSON.parse(text.trim().split("\n").at(-1)!);
  assert.equal(seen.deno, "accepted", text);
  assert.match(seen.node, /^refused/, text);
});
