// The stand-in control plane's state (lab/mesh/state.ts): a node name reaches the broker's
// configuration as an account name and as subject tokens, so a hostile one is refused
// before anything is rendered or written.
import assert from "node:assert/strict";
import { join } from "node:path";
import { createAccount, createUser } from "@nats-io/nkeys";
import {
  checkNodeName,
  type MeshState,
  readState,
  reloadBroker,
  withState,
} from "../lab/mesh/state.ts";
import { runHost, scratch } from "./_helpers.ts";
import { startMesh, until } from "./_mesh.ts";
import { renderAuth } from "../lab/mesh/auth.ts";

const HOSTILE = [
  "*", // mesh.decl.* : every node's declarations
  ">",
  "a.b", // one more subject token
  'x" } ] }\n  EVIL { users: [ { user: "u", password: "p" } ] }\n  y {',
  "a\nb",
  "A", // not a node id (uppercase)
  "-a",
  "",
  "a".repeat(64),
];

function state(nodes: string[]): MeshState {
  const s = {
    v: 1,
    control: { seed: "", publicKey: createUser().getPublicKey() },
    nodes: {},
    tokens: {},
  } as unknown as MeshState;
  for (const node of nodes) {
    s.tokens[createUser().getPublicKey()] = {
      node,
      expires: new Date(Date.now() + 3_600_000).toISOString(),
      mintedAt: new Date().toISOString(),
    } as MeshState["tokens"][string];
  }
  return s;
}

Deno.test("mesh state: a node id renders an auth block nats-server accepts", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxms-" });
  try {
    checkNodeName("node-1");
    const conf = join(dir, "server.conf");
    await Deno.writeTextFile(conf, renderAuth(state(["node-1"])));
    const r = await new Deno.Command("nats-server", { args: ["-t", "-c", conf] }).output();
    const out = new TextDecoder().decode(r.stdout) + new TextDecoder().decode(r.stderr);
    assert.ok(r.success, out);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

for (const node of HOSTILE) {
  Deno.test(`mesh state: the node name ${JSON.stringify(node)} is refused before rendering or writing`, async () => {
    assert.throws(() => checkNodeName(node), /refusing node name/);
    assert.throws(() => renderAuth(state(["good", node])), /refusing node name/);
    // A mint goes through withState: nothing of the mesh directory changes.
    const dir = await Deno.makeTempDir({ prefix: "noxms-" });
    try {
      await Deno.writeTextFile(join(dir, "mesh.json"), JSON.stringify(state(["good"])));
      await withState(dir, () => {});
      const before = [
        await Deno.readTextFile(join(dir, "mesh.json")),
        await Deno.readTextFile(join(dir, "auth.conf")),
      ];
      await assert.rejects(
        withState(dir, (s) => {
          Object.assign(s.tokens, state([node]).tokens);
        }),
        /refusing node name/,
      );
      assert.deepEqual(
        [
          await Deno.readTextFile(join(dir, "mesh.json")),
          await Deno.readTextFile(join(dir, "auth.conf")),
        ],
        before,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("mesh state: a state the broker would not load (an account key as a node's key) is checked by nats-server -t and never written", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxms-" });
  try {
    await Deno.writeTextFile(join(dir, "mesh.json"), JSON.stringify(state(["node-1"])));
    await withState(dir, () => {});
    const files = ["mesh.json", "auth.conf"].map((f) => join(dir, f));
    const before = await Promise.all(files.map((f) => Deno.readTextFile(f)));
    const account = createAccount().getPublicKey();
    await assert.rejects(
      withState(dir, (s) => {
        s.nodes["node-1"] = { publicKey: account, admittedAt: "now", serial: 0 };
      }),
      /nats-server would not load the rendered .*auth\.conf, so it was not written: .*nkey/i,
    );
    assert.deepEqual(await Promise.all(files.map((f) => Deno.readTextFile(f))), before);
    assert.deepEqual(
      [...Deno.readDirSync(dir)].map((e) => e.name).sort(),
      ["auth.conf", "mesh.json", "mesh.lock"],
      "no candidate file is left behind",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mesh state: a reload the broker refuses puts back the configuration it last loaded, so a restart still starts", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const token = await mesh.control.mintToken("node-a");
  const auth = join(mesh.dir, "auth.conf");
  const loaded = await Deno.readTextFile(auth);
  assert.equal(await Deno.readTextFile(`${auth}.loaded`), loaded, "kept once every server took it");
  // A configuration that slipped through (nats-server takes it for `-t`, not for a reload,
  // or written by anything else): the reload fails, the file that loaded comes back.
  await Deno.writeTextFile(auth, `${loaded}\naccounts { BROKEN {\n`);
  await assert.rejects(
    reloadBroker(mesh.dir, await readState(mesh.dir)),
    /nats-server refused the new configuration: .*; the configuration every server loaded last is back in place/,
  );
  assert.equal(await Deno.readTextFile(auth), loaded);
  // The broker restarts with what is on disk, and the token minted before still enrols.
  await mesh.stopBroker();
  await mesh.startBroker();
  await until("the control plane is connected again", async () => {
    try {
      await mesh.control.nc.request("$JS.API.INFO", "", { timeout: 1000 });
      return true;
    } catch {
      return undefined;
    }
  });
  const run = await runHost(["enrol", "--token", "-"], { env: s.env, stdin: token });
  assert.equal(run.code, 0, run.stderr);
});
