// The stand-in control plane's state (lab/mesh/state.ts): a node name reaches the broker's
// configuration as an account name and as subject tokens, so a hostile one is refused
// before anything is rendered or written.
import assert from "node:assert/strict";
import { join } from "node:path";
import { createUser } from "@nats-io/nkeys";
import { checkNodeName, type MeshState, renderAuth, withState } from "../lab/mesh/state.ts";

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
