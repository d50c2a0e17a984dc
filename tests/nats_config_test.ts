/**
 * The one writer of nats-server configurations (lab/lib/nats_config.ts): every shape the
 * lab and the stand-in write (a single broker, a cluster member, a member that is a leaf
 * hub, a site's leaf server with its remotes) is loaded by nats-server itself
 * (`nats-server -t`), with real certificates, in NATS's operator mode with the operator
 * file the stand-in writes (lab/mesh/operator.ts) and each server's account resolver; a
 * value is one value however it is spelled; a size nats-server would misread is refused.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { makeCertificates } from "../lab/lib/certs.ts";
import { leafConfig, memberConfig, type ServerFacts } from "../lab/lib/cluster.ts";
import { LabError } from "../lab/lib/errors.ts";
import { labBrokerConfig } from "../lab/lib/lab_broker.ts";
import { type NatsSize, renderNatsConfig } from "../lab/lib/nats_config.ts";
import { newRouteCredentials } from "../lab/lib/routes.ts";
import {
  brokerConfig,
  clusterMemberConfig,
  LOCAL_DOMAIN,
  localLeafConfig,
  operatorLines,
} from "../lab/mesh/local_broker.ts";
import {
  newOperatorSeeds,
  operatorInclude,
  publicKeys,
  siteJoinCreds,
  siteLeafCreds,
} from "../lab/mesh/operator.ts";
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

/** A mesh directory's operator file (a new operator, its accounts preloaded). */
async function writeOperator(dir: string) {
  const seeds = newOperatorSeeds();
  await Deno.writeTextFile(meshFiles(dir).operator, await operatorInclude(seeds));
  return seeds;
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "noxln-natsconf-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("nats-server loads a single broker in operator mode as the lab and the stand-in write it", async () => {
  await withDir(async (dir) => {
    await writeOperator(dir);
    await makeCertificates(dir, { names: ["broker.lab"], ips: ["127.0.0.1"] });
    const extra = operatorLines(join(dir, "lab.conf"), dir, join(dir, "jwt-lab"));
    await assertLoads(join(dir, "lab.conf"), labBrokerConfig(dir, extra));
    // The check can fail: a certificate that is not there is refused.
    const missing = labBrokerConfig(join(dir, "nowhere"), extra);
    assert.equal((await natsTest(join(dir, "missing.conf"), missing)).ok, false);
    const certs = await makeCertificates(dir, { server: "standin" });
    const text = brokerConfig(dir, "127.0.0.1:4222", certs, "127.0.0.1:8222");
    assert.match(text, /\nresolver: \{ type: full, dir: ".*jwt", allow_delete: false/);
    assert.match(text, /\ninclude "operator\.conf"\n/);
    assert.doesNotMatch(text, /accounts|users|nkey|password/, "no account or user in it");
    await assertLoads(join(dir, "nats.conf"), text);
    // The check sees the operator: one that is not a JWT is refused.
    await Deno.writeTextFile(
      meshFiles(dir).operator,
      (await Deno.readTextFile(meshFiles(dir).operator)).replace(
        /operator: "[^"]+"/,
        'operator: "x"',
      ),
    );
    assert.equal((await natsTest(join(dir, "nats.conf"), text)).ok, false);
  });
});

Deno.test("nats-server loads a cluster member and a leaf hub as the lab and the stand-in write them", async () => {
  await withDir(async (dir) => {
    await writeOperator(dir);
    const routes = newRouteCredentials();
    const certs = await makeCertificates(dir, { server: "c1" });
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
    assert.match(plain, /jwt-c1/);
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
      memberConfig(
        facts,
        dir,
        ["127.0.0.2", "127.0.0.3"],
        operatorLines(facts.configFile, dir, join(facts.dir, "jwt")),
        routes,
      ),
    );
  });
});

Deno.test("nats-server loads a site's leaf server, with its two remotes, as the lab and the stand-in write it", async () => {
  await withDir(async (dir) => {
    const seeds = await writeOperator(dir);
    const keys = publicKeys(seeds);
    const certs = await makeCertificates(dir, { server: "leaf1" });
    const login = {
      nodes: join(dir, "site-leaf1.creds"),
      join: join(dir, "site-leaf1-join.creds"),
    };
    await Deno.writeTextFile(login.nodes, await siteLeafCreds(seeds, "leaf1"), { mode: 0o600 });
    await Deno.writeTextFile(login.join, await siteJoinCreds(seeds, "leaf1"), { mode: 0o600 });
    const configFile = join(dir, "leaf1.conf");
    const standIn = localLeafConfig(
      dir,
      {
        name: "leaf1",
        listen: "127.0.0.1:4223",
        pidFile: join(dir, "leaf1.pid"),
        hubs: ["127.0.0.1:7422", "127.0.0.1:7423"],
        login,
        keys,
      },
      certs,
      configFile,
    );
    assert.match(standIn, /"nats-leaf:\/\/127\.0\.0\.1:7422"/);
    assert.match(standIn, new RegExp(`\n {4}\\s*account: "${keys.nodes}"\n`));
    assert.match(standIn, new RegExp(`\n {4}\\s*account: "${keys.join}"\n`));
    assert.match(standIn, /\nresolver: MEMORY\n/);
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
        remotes: [
          { account: keys.nodes, credentials: login.nodes },
          { account: keys.join, credentials: login.join },
        ],
        extra: `resolver: MEMORY\ninclude "operator.conf"\n`,
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
