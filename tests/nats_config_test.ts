/**
 * The one writer of nats-server configurations (lab/lib/nats_config.ts): every shape the
 * lab and the stand-in write (a single broker, a cluster member, a member that is a leaf
 * hub, a site's leaf server with its remote) is loaded by nats-server itself
 * (`nats-server -t`), with real certificates and the accounts they include; a value is
 * one value however it is spelled; a size nats-server would misread is refused. The
 * accounts (users, permissions, imports, exports, limits, mappings) are rendered the same
 * way and loaded by nats-server too.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { makeCertificates } from "../lab/lib/certs.ts";
import { leafConfig, memberConfig, type ServerFacts } from "../lab/lib/cluster.ts";
import { LabError } from "../lab/lib/errors.ts";
import { labBrokerConfig } from "../lab/lib/lab_broker.ts";
import { createUser } from "@nats-io/nkeys";
import { type NatsSize, renderNatsAccounts, renderNatsConfig } from "../lab/lib/nats_config.ts";
import { newRouteCredentials } from "../lab/lib/routes.ts";
import {
  brokerConfig,
  clusterMemberConfig,
  LOCAL_DOMAIN,
  localLeafConfig,
} from "../lab/mesh/local_broker.ts";
import { meshFiles } from "../lab/mesh/state.ts";

/** What `nats-server -t` says of `text` written at `file`: its exit and its words. */
async function natsTest(file: string, text: string): Promise<{ ok: boolean; said: string }> {
  await Deno.writeTextFile(file, text, { mode: 0o600 });
  const out = await new Deno.Command("nats-server", {
    args: ["-t", "-c", file],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { ok: out.success, said };
}

async function assertLoads(file: string, text: string): Promise<void> {
  const { ok, said } = await natsTest(file, text);
  assert.ok(ok, `nats-server -t refused ${file}:\n${said}\n${text}`);
}

const ACCOUNTS = `accounts {
  CONTROL { jetstream: enabled, users: [ { user: "c", password: "c" } ] }
  SITE_leaf1 { users: [ { user: "site-leaf1", password: "p", allowed_connection_types: ["LEAFNODE"] } ] }
}
`;
const LEAF_ACCOUNTS = `accounts {
  UPLINK { }
  NODE_a { users: [ { user: "a", password: "a" } ] }
}
`;

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "noxln-natsconf-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("nats-server loads a single broker as the lab and the stand-in write it", async () => {
  await withDir(async (dir) => {
    await makeCertificates(dir, { names: ["broker.lab"], ips: ["127.0.0.1"] });
    await assertLoads(join(dir, "lab.conf"), labBrokerConfig(dir, ACCOUNTS));
    // The check can fail: a certificate that is not there is refused.
    const missing = labBrokerConfig(join(dir, "nowhere"), ACCOUNTS);
    assert.equal((await natsTest(join(dir, "missing.conf"), missing)).ok, false);
    const certs = await makeCertificates(dir, { server: "standin" });
    await Deno.writeTextFile(meshFiles(dir).auth, ACCOUNTS);
    const text = brokerConfig(dir, "127.0.0.1:4222", certs, "127.0.0.1:8222");
    assert.match(text, /\ninclude "auth\.conf"\n/);
    await assertLoads(join(dir, "nats.conf"), text);
  });
});

Deno.test("nats-server loads a cluster member and a leaf hub as the lab and the stand-in write them", async () => {
  await withDir(async (dir) => {
    const routes = newRouteCredentials();
    const certs = await makeCertificates(dir, { server: "c1" });
    await Deno.writeTextFile(meshFiles(dir).auth, ACCOUNTS);
    const member = {
      name: "c1",
      listen: "127.0.0.1:4222",
      routeListen: "127.0.0.1:6222",
      routes: ["127.0.0.1:6223", "127.0.0.1:6224"],
      http: "127.0.0.1:8222",
    };
    const configFile = join(dir, "c1.conf");
    const plain = clusterMemberConfig(dir, member, certs, configFile, routes);
    assert.doesNotMatch(plain, /leafnodes/);
    await assertLoads(configFile, plain);
    const hub = clusterMemberConfig(
      dir,
      {
        ...member,
        leafListen: "127.0.0.1:7422",
        leafAdvertise: "127.0.0.1:7522",
        domain: LOCAL_DOMAIN,
      },
      certs,
      configFile,
      routes,
    );
    assert.match(hub, /\nleafnodes \{\n {2}listen: "127\.0\.0\.1:7422"\n {2}advertise: /);
    await assertLoads(configFile, hub);

    const facts: ServerFacts = {
      name: "nats1",
      url: "tls://127.0.0.1:4222",
      address: "127.0.0.1",
      pin: "",
      dir: join(dir, "nats1"),
      configFile: join(dir, "nats1", "nats.conf"),
      pidFile: join(dir, "nats1", "nats.pid"),
      logFile: join(dir, "nats1", "nats.log"),
    };
    await makeCertificates(dir, { server: "nats1" });
    await Deno.mkdir(facts.dir);
    await assertLoads(
      facts.configFile,
      memberConfig(facts, dir, ["127.0.0.2", "127.0.0.3"], ACCOUNTS, routes),
    );
  });
});

Deno.test("nats-server loads a site's leaf server, with its remote, as the lab and the stand-in write it", async () => {
  await withDir(async (dir) => {
    const certs = await makeCertificates(dir, { server: "leaf1" });
    await Deno.writeTextFile(meshFiles(dir).leafAuth("leaf1"), LEAF_ACCOUNTS);
    const configFile = join(dir, "leaf1.conf");
    const standIn = localLeafConfig(
      dir,
      {
        name: "leaf1",
        listen: "127.0.0.1:4223",
        pidFile: join(dir, "leaf1.pid"),
        hubs: ["127.0.0.1:7422", "127.0.0.1:7423"],
        login: { user: "site-leaf1", password: "p@ss:word/" },
      },
      certs,
      configFile,
    );
    // The login is escaped for the URL: one user and one password.
    assert.match(standIn, /"nats-leaf:\/\/site-leaf1:p%40ss%3Aword%2F@127\.0\.0\.1:7422"/);
    assert.match(standIn, /\n {4}\s*account: "UPLINK"\n/);
    await assertLoads(configFile, standIn);

    const facts: ServerFacts = {
      name: "leaf1",
      url: "tls://127.0.0.1:4223",
      address: "127.0.0.1",
      pin: "",
      dir: join(dir, "lab-leaf1"),
      configFile: join(dir, "lab-leaf1.conf"),
      pidFile: join(dir, "lab-leaf1.pid"),
      logFile: join(dir, "lab-leaf1.log"),
    };
    await assertLoads(
      facts.configFile,
      leafConfig(facts, dir, ["127.0.0.2", "127.0.0.3"], {
        user: "site-leaf1",
        password: "p",
        account: "UPLINK",
        extra: LEAF_ACCOUNTS,
      }),
    );
  });
});

Deno.test("a value is written as one value: a quote, a brace or a newline in it adds no configuration", async () => {
  await withDir(async (dir) => {
    const certs = await makeCertificates(dir);
    const forged = 'x"\n}\nauthorization { user: "a", password: "b" }\nx {\n"';
    const text = renderNatsConfig({
      header: `a test\nwith two lines`,
      serverName: forged,
      listen: "127.0.0.1:4222",
      tls: certs,
      cluster: {
        name: "c",
        listen: "127.0.0.1:6222",
        routes: ["127.0.0.1:6223"],
        tls: { ...certs, verify: true },
        credentials: { user: "route", password: forged },
      },
    });
    assert.doesNotMatch(text, /^authorization/m, "no top-level block from a value");
    assert.match(text, /^# a test\n# with two lines\n/);
    await assertLoads(join(dir, "forged.conf"), text);
  });
});

Deno.test("a size nats-server would misread is refused before anything is written", () => {
  for (const bad of ["8 MB", "8mb", "", "-1MB", "8MB\nx: 1"]) {
    assert.throws(
      () =>
        renderNatsConfig({
          header: "t",
          serverName: "s",
          listen: "127.0.0.1:4222",
          maxPayload: bad as NatsSize,
        }),
      (e: unknown) =>
        e instanceof LabError && e.code === "usage" && e.message.includes("max_payload"),
      JSON.stringify(bad),
    );
  }
});

Deno.test("nats-server loads accounts as the builder writes them: users, permissions, imports, exports, limits, mappings", async () => {
  await withDir(async (dir) => {
    const certs = await makeCertificates(dir);
    const nkey = createUser().getPublicKey();
    const text = renderNatsAccounts("accounts of a test\nsecond line", [
      {
        name: "CONTROL",
        jetstream: true,
        users: [{ nkey: createUser().getPublicKey(), connectionTypes: ["STANDARD"] }],
        exports: [
          { kind: "service", subject: "svc.a", accounts: ["NODE_a"] },
          { kind: "stream", subject: "push.a", accounts: ["NODE_a"] },
        ],
      },
      {
        name: "NODE_a",
        note: "one node",
        users: [{
          nkey,
          connectionTypes: ["STANDARD"],
          permissions: { publish: ["svc.a"], subscribe: ["push.local.a", "_INBOX.a.>"] },
        }],
        imports: [
          { kind: "service", account: "CONTROL", subject: "svc.a" },
          { kind: "stream", account: "CONTROL", subject: "push.a", to: "push.local.a" },
        ],
        limits: { max_payload: 1048576, max_connections: 16 },
        mappings: { "_R_.>": "_R_.>" },
      },
      {
        name: "SITE_s",
        users: [{ user: "site-s", password: 'p"w\n}', connectionTypes: ["LEAFNODE"] }],
        imports: [],
      },
    ]);
    assert.match(text, /^# accounts of a test\n# second line\naccounts \{\n/);
    assert.match(
      text,
      /\n {6}\{ stream: \{ account: "CONTROL", subject: "push\.a" \}, to: "push\.local\.a" \}\n/,
    );
    await Deno.writeTextFile(join(dir, "accounts.conf"), text);
    await assertLoads(
      join(dir, "server.conf"),
      renderNatsConfig({
        header: "t",
        serverName: "s",
        listen: "127.0.0.1:4222",
        jetstream: { storeDir: join(dir, "js"), maxMemoryStore: "64MB", maxFileStore: "1GB" },
        tls: certs,
        include: ["accounts.conf"],
      }),
    );
    // The check sees the accounts: an import from an account that is not there is refused.
    await Deno.writeTextFile(
      join(dir, "accounts.conf"),
      renderNatsAccounts("t", [{
        name: "NODE_a",
        imports: [{ kind: "service", account: "NOWHERE", subject: "svc.a" }],
      }]),
    );
    const refused = await natsTest(
      join(dir, "server2.conf"),
      `listen: "127.0.0.1:4222"\ninclude "accounts.conf"\n`,
    );
    assert.equal(refused.ok, false);
    assert.match(refused.said, /"NOWHERE" account not defined/);
  });
});

Deno.test("two accounts of one name, or a limit nats-server has no word for, are refused", () => {
  const refused = (e: unknown) => e instanceof LabError && e.code === "usage";
  assert.throws(() => renderNatsAccounts("t", [{ name: "A" }, { name: "A" }]), refused);
  assert.throws(
    () => renderNatsAccounts("t", [{ name: "A", limits: { "max payload": 1 } }]),
    refused,
  );
  assert.throws(
    () => renderNatsAccounts("t", [{ name: "A", limits: { max_payload: -1 } }]),
    refused,
  );
});
