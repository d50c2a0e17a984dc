/**
 * The routes of a cluster are authenticated and encrypted: real nats-servers on
 * 127.0.0.1 (the stand-in's three-server cluster) and a rogue nats-server that
 * opens a route to one of them, without TLS, with a certificate of another CA,
 * and with a certificate of the mesh's own CA (as a site's leaf server holds one)
 * but no or a wrong route password. The cluster takes none of them while its three
 * routes stay up; the same rogue with the mesh's certificate and route password
 * joins (so the check would see a rogue that got in). And the configurations the
 * stand-in and the lab render carry the route TLS and authorisation, and the lab's
 * leaf port verifies a leaf's certificate.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { type ClusterMember, clusterMemberConfig } from "../lab/mesh/local_broker.ts";
import { meshFiles, readState } from "../lab/mesh/state.ts";
import {
  newOperatorSeeds,
  nodeUserJwt,
  operatorInclude,
  publicKeys,
  siteLeafCreds,
} from "../lab/mesh/operator.ts";
import { operatorLines } from "../lab/mesh/local_broker.ts";
import { createUser } from "@nats-io/nkeys";
import { fmtCreds } from "@nats-io/jwt";
import { makeCertificates } from "../lab/lib/certs.ts";
import { HTTP_PORT, leafConfig, memberConfig, type ServerFacts } from "../lab/lib/cluster.ts";
import { newRouteCredentials, type RouteCredentials } from "../lab/lib/routes.ts";
import { startClusterMesh, until } from "./_mesh.ts";
import { connect } from "@nats-io/transport-node";

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** A route as /routez shows it. */
interface Route {
  remote_id: string;
  remote_name?: string;
}

async function routesOf(member: ClusterMember): Promise<Route[]> {
  const routez = await member.monitor("routez");
  return (routez.routes as Route[] | null) ?? [];
}

/** What the rogue server does on its route. */
interface RogueSetup {
  name: string;
  /** Its certificate (absent: no TLS on its routes). */
  certs?: { certFile: string; keyFile: string };
  /** The CA it trusts for the member's certificate. */
  caFile?: string;
  /** The credentials in its route URL (absent: none). */
  credentials?: RouteCredentials;
  /** The account its spy is a user of: the cluster's control plane account (its public key). */
  account: string;
}

/** A nats-server of its own (not a member) that opens a route to `target`. */
async function startRogue(dir: string, target: ClusterMember, setup: RogueSetup) {
  const configFile = join(dir, `${setup.name}.conf`);
  const logFile = join(dir, `${setup.name}.log`);
  const clientPort = freePort();
  const who = setup.credentials ? `${setup.credentials.user}:${setup.credentials.password}@` : "";
  const tls = setup.certs
    ? `  tls {
    cert_file: "${setup.certs.certFile}"
    key_file: "${setup.certs.keyFile}"
    ca_file: "${setup.caFile}"
    timeout: 5
  }
`
    : "";
  // It names an account like the cluster's (in operator mode, its public key): across a
  // route, interest and messages of one account name flow between the servers.
  await Deno.writeTextFile(
    configFile,
    `server_name: ${setup.name}
listen: "127.0.0.1:${clientPort}"
accounts { ${JSON.stringify(setup.account)} { users: [ { user: spy, password: spy } ] } }
cluster {
  name: noxln
  listen: "127.0.0.1:${freePort()}"
${tls}  routes: [ "nats-route://${who}127.0.0.1:${target.routePort}" ]
}
`,
  );
  const child = new Deno.Command("nats-server", {
    args: ["-c", configFile, "-l", logFile],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const log = () => Deno.readTextFile(logFile).catch(() => "");
  const id = await until(`${setup.name} starts`, async () => {
    const text = await log();
    return text.includes("Server is ready") ? /ID:\s+(\w+)/.exec(text)?.[1] : undefined;
  }, 30_000);
  // A spy on the rogue listens to the cluster's CONTROL account.
  const spy = await connect({
    servers: `nats://127.0.0.1:${clientPort}`,
    user: "spy",
    pass: "spy",
  });
  const heard: string[] = [];
  const sub = spy.subscribe("spy.>", { callback: (_e, m) => void heard.push(m.subject) });
  await spy.flush();
  return {
    id,
    heard,
    log,
    async [Symbol.asyncDispose]() {
      sub.unsubscribe();
      await spy.close().catch(() => {});
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await child.status;
    },
  };
}

/** The number of lines of `text` that match `pattern`. */
function count(text: string, pattern: RegExp): number {
  return text.split("\n").filter((l) => pattern.test(l)).length;
}

Deno.test("a rogue server cannot join the cluster as a route without TLS, the mesh's CA and the route password", async () => {
  await using mesh = await startClusterMesh("noxln-routes-");
  const { dir, cluster, control } = mesh;
  const [target] = cluster.members;
  const state = await readState(dir);
  const account = publicKeys(state.operator).control;
  // The three routes are up: every member has a route to each of the two others.
  const memberIds = new Set<string>();
  for (const m of cluster.members) {
    const routes = await until(`${m.name} has its two routes`, async () => {
      const r = await routesOf(m);
      return r.length === 2 ? r : undefined;
    }, 60_000);
    for (const r of routes) memberIds.add(r.remote_id);
  }
  assert.equal(memberIds.size, 3);
  const assertOnlyMembers = async (rogue: string) => {
    for (const m of cluster.members) {
      const ids = (await routesOf(m)).map((r) => r.remote_id).sort();
      assert.ok(!ids.includes(rogue), `${m.name} took the rogue ${rogue} as a route`);
      assert.equal(ids.length, 2, `${m.name}: routes ${ids.join(", ")}`);
      assert.ok(ids.every((id) => memberIds.has(id)), `${m.name}: routes ${ids.join(", ")}`);
    }
  };

  // Certificates a rogue may hold: one of the mesh's CA (as a site's leaf server has),
  // and one of another CA that bears the very same name (so that the rogue's TLS does
  // present it: a client offers only a certificate whose issuer the server names).
  const meshCert = await makeCertificates(dir, { server: "leafish" });
  const forged = await makeCertificates(join(dir, "other-ca"));
  assert.notEqual(forged.caPem, meshCert.caPem);

  const refused: [string, RogueSetup, RegExp][] = [
    [
      "no TLS (with the right password)",
      { name: "rogue_plain", credentials: state.routes, account },
      /TLS route handshake error: tls: first record does not look like a TLS handshake/,
    ],
    [
      "another CA's certificate (with the right password)",
      {
        name: "rogue_forged",
        certs: forged,
        caFile: meshCert.caFile,
        credentials: state.routes,
        account,
      },
      /TLS route handshake error: .*certificate signed by unknown authority/,
    ],
    [
      "the mesh's CA, no route password",
      { name: "rogue_nopass", certs: meshCert, caFile: meshCert.caFile, account },
      /authentication error/,
    ],
    [
      "the mesh's CA, a wrong route password",
      {
        name: "rogue_wrongpass",
        certs: meshCert,
        caFile: meshCert.caFile,
        credentials: newRouteCredentials(),
        account,
      },
      /authentication error/,
    ],
  ];
  for (const [what, setup, refusal] of refused) {
    const before = (await Deno.readTextFile(target.logFile)).length;
    await using rogue = await startRogue(dir, target, setup);
    // The rogue tried (at least twice) and the target refused each time, for this reason.
    await until(`${what}: the target refuses two route attempts`, async () => {
      const theirs = count(await rogue.log(), /Router connection closed/);
      const ours = count((await Deno.readTextFile(target.logFile)).slice(before), refusal);
      return theirs >= 2 && ours >= 2 ? true : undefined;
    }, 60_000);
    await assertOnlyMembers(rogue.id);
    // Nothing published in the cluster reaches the rogue's spy.
    for (let i = 0; i < 10; i++) control.nc.publish(`spy.${setup.name}.${i}`, "secret");
    await control.nc.flush();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.deepEqual(rogue.heard, [], `${what}: the rogue heard the cluster`);
    await assertOnlyMembers(rogue.id);
  }

  // The same rogue with the mesh's certificate and the route password does join:
  // what the checks above look at would have seen a rogue that got in.
  {
    await using insider = await startRogue(dir, target, {
      name: "insider",
      certs: meshCert,
      caFile: meshCert.caFile,
      credentials: state.routes,
      account,
    });
    await until("the insider is a route of the target", async () => {
      const ids = (await routesOf(target)).map((r) => r.remote_id);
      return ids.includes(insider.id) ? true : undefined;
    }, 60_000);
    await until("the insider hears the cluster", async () => {
      control.nc.publish("spy.insider", "secret");
      await control.nc.flush();
      return insider.heard.length > 0 ? true : undefined;
    }, 60_000);
  }
});

Deno.test("the cluster configurations rendered by the stand-in and the lab carry route TLS and authorisation", () => {
  const credentials = newRouteCredentials();
  assert.match(credentials.password, /^[0-9a-f]{48}$/);
  assert.notEqual(newRouteCredentials().password, credentials.password);
  const tls = { certFile: "/m/c1.pem", keyFile: "/m/c1.key", caFile: "/m/ca.pem" };
  const standIn = clusterMemberConfig(
    "/m",
    {
      name: "c1",
      listen: "127.0.0.1:1",
      routeListen: "127.0.0.1:2",
      routes: ["127.0.0.1:3", "127.0.0.1:4"],
    },
    tls,
    "/m/c1.conf",
    credentials,
  );
  const facts: ServerFacts = {
    name: "nats1",
    url: "tls://10.0.0.3:4222",
    address: "10.0.0.3",
    pin: "AB",
    dir: "/l/nats1",
    configFile: "/l/nats1/nats.conf",
    pidFile: "/l/nats1/nats.pid",
    logFile: "/l/nats1/nats.log",
  };
  const lab = memberConfig(facts, "/l", ["10.0.0.4", "10.0.0.5"], "", credentials);
  for (
    const [who, text, cert, ca, peers] of [
      ["stand-in", standIn, "/m/c1.pem", "/m/ca.pem", ["127.0.0.1:3", "127.0.0.1:4"]],
      ["lab", lab, "/l/nats1.pem", "/l/ca.pem", ["10.0.0.4:6222", "10.0.0.5:6222"]],
    ] as const
  ) {
    const block = /\ncluster \{\n([\s\S]*?)\n\}\n/.exec(text)?.[1];
    assert.ok(block, `${who}: no cluster block in\n${text}`);
    const routeTls = /\n {2}tls \{\n([\s\S]*?)\n {2}\}/.exec(block)?.[1] ?? "";
    assert.match(routeTls, new RegExp(`cert_file: "${cert}"`), `${who} route tls`);
    assert.match(routeTls, new RegExp(`ca_file: "${ca}"`), `${who} route tls`);
    assert.match(routeTls, /verify: true/, `${who} route tls`);
    const auth = /\n {2}authorization \{\n([\s\S]*?)\n {2}\}/.exec(block)?.[1] ?? "";
    assert.match(auth, /user: "route"/, `${who} route authorization`);
    assert.ok(auth.includes(`password: "${credentials.password}"`), `${who} route authorization`);
    const urls = [...block.matchAll(/"(nats-route:\/\/[^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(
      urls,
      peers.map((p) => `nats-route://route:${credentials.password}@${p}`),
      `${who} route URLs`,
    );
  }
  // The lab's leaf port verifies the leaf's certificate; the leaf presents its own.
  const leafPort = /\nleafnodes \{\n([\s\S]*?)\n\}\n/.exec(lab)?.[1] ?? "";
  assert.match(leafPort, /tls \{[^}]*ca_file: "\/l\/ca\.pem"[^}]*verify: true/);
  // No leaf password of the cluster's: a leaf logs in as its site's users (their JWTs).
  assert.doesNotMatch(leafPort, /authorization \{|password:/);
  const leaf = leafConfig(
    { ...facts, name: "leaf1", address: "10.1.0.2" },
    "/l",
    ["10.0.0.3"],
    { remotes: [{ account: "ANODES", credentials: "/l/site-leaf1.creds" }], extra: "" },
  );
  assert.match(leaf, /tls: \{[^}]*cert_file: "\/l\/leaf1\.pem"[^}]*key_file: "\/l\/leaf1\.key"/);
  assert.match(leaf, /"nats-leaf:\/\/10\.0\.0\.3:7422"/);
  assert.match(leaf, /account: "ANODES"/);
  assert.match(leaf, /credentials: "\/l\/site-leaf1\.creds"/);
});

Deno.test("the lab's leaf port takes only a leaf with a certificate of the lab CA and its site's creds", async () => {
  // The lab's own renderings, run on loopback addresses of their own (127.0.83.x), since
  // the lab's ports are fixed.
  const dir = await Deno.makeTempDir({ prefix: "noxln-leafport-" });
  const servers: Deno.ChildProcess[] = [];
  await using _cleanup = {
    async [Symbol.asyncDispose]() {
      for (const child of servers) {
        try {
          child.kill("SIGKILL");
        } catch { /* gone */ }
        await child.status;
      }
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
  const facts = (name: string, address: string): ServerFacts => ({
    name,
    url: `tls://${address}:4222`,
    address,
    pin: "",
    dir: join(dir, name),
    configFile: join(dir, name, "nats.conf"),
    pidFile: join(dir, name, "nats.pid"),
    logFile: join(dir, name, "nats.log"),
  });
  const start = async (f: ServerFacts, config: string) => {
    await Deno.mkdir(join(f.dir, "jetstream"), { recursive: true });
    await Deno.writeTextFile(f.configFile, config);
    servers.push(
      new Deno.Command("nats-server", {
        args: ["-c", f.configFile, "-l", f.logFile],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn(),
    );
    await until(`${f.name} starts`, async () => {
      const text = await Deno.readTextFile(f.logFile).catch(() => "");
      return text.includes("Server is ready") ? true : undefined;
    }, 30_000).catch(async (e) => {
      throw new Error(`${e.message}:\n${await Deno.readTextFile(f.logFile).catch(() => "")}`);
    });
  };
  // The mesh's operator, with a site whose scoped key signs its leaf's user (operator.ts).
  const seeds = newOperatorSeeds();
  const creds = join(dir, "site-leaf1.creds");
  await Deno.writeTextFile(creds, await siteLeafCreds(seeds, "leaf1"), { mode: 0o600 });
  await Deno.writeTextFile(
    meshFiles(dir).operator,
    await operatorInclude(seeds, { sites: { leaf1: [] } }),
  );
  const nodes = publicKeys(seeds).nodes;
  const setup = {
    remotes: [{ account: nodes, credentials: creds }],
    extra: `resolver: MEMORY\ninclude "../operator.conf"\n`,
  };
  const hub = facts("nats1", "127.0.83.1");
  const leaf = facts("leaf1", "127.0.83.2");
  const rogue = facts("rogue1", "127.0.83.3");
  for (const f of [hub, leaf]) {
    await makeCertificates(dir, { names: [`${f.name}.lab`], ips: [f.address], server: f.name });
  }
  // Clustered JetStream wants a route: one to an address where nothing listens.
  await start(
    hub,
    memberConfig(
      hub,
      dir,
      ["127.0.83.9"],
      operatorLines(hub.configFile, dir, join(hub.dir, "jwt")),
      newRouteCredentials(),
    ),
  );
  const leafnodes = async () =>
    Number(
      ((await (await fetch(`http://${hub.address}:${HTTP_PORT}/leafz`)).json()) as {
        leafnodes?: number;
      }).leafnodes ?? 0,
    );

  // A leaf that holds the site's creds and trusts the CA, but shows no certificate:
  // refused. (It has no certificate at all: its client port goes without TLS.)
  const rogueConfig = leafConfig(rogue, dir, [hub.address], setup)
    .replace(/\ntls \{[^}]*\}\n/, "\n").replace(
      /\n\s*(cert|key)_file: "[^"]*rogue1\.(pem|key)"/g,
      "",
    );
  assert.doesNotMatch(rogueConfig, /rogue1\.(pem|key)/);
  await start(rogue, rogueConfig);
  await until("the hub refuses the certificate-less leaf twice", async () => {
    const text = await Deno.readTextFile(hub.logFile);
    return count(text, /TLS leafnode handshake error: .*certificate/) >= 2 ? true : undefined;
  }, 60_000);
  assert.equal(await leafnodes(), 0);

  // A node's user (a client's JWT, STANDARD connections only) is not a leaf's login.
  const wrong = facts("rogue2", "127.0.83.4");
  await makeCertificates(dir, { names: ["rogue2.lab"], ips: [wrong.address], server: "rogue2" });
  const user = createUser();
  const nodeCreds = join(dir, "node.creds");
  await Deno.writeTextFile(
    nodeCreds,
    new TextDecoder().decode(fmtCreds(await nodeUserJwt(seeds, "n1", user.getPublicKey()), user)),
  );
  const before = count(await Deno.readTextFile(hub.logFile), /authentication error|Authorization/i);
  await start(
    wrong,
    leafConfig(wrong, dir, [hub.address], {
      ...setup,
      remotes: [{ account: nodes, credentials: nodeCreds }],
    }),
  );
  await until("the hub refuses a client user as a leaf", async () => {
    const text = await Deno.readTextFile(hub.logFile);
    return count(text, /authentication error|Authorization/i) > before ? true : undefined;
  }, 60_000);
  assert.equal(await leafnodes(), 0);

  // The lab's leaf (its certificate, its site's creds) connects: the checks above would see one.
  await start(leaf, leafConfig(leaf, dir, [hub.address], setup));
  await until("the lab's leaf is connected", async () => (await leafnodes()) === 1 || undefined);
  assert.equal(await leafnodes(), 1, "only the lab's leaf, not the rogue");
});
