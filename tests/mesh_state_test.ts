// The stand-in control plane's state (lab/mesh/state.ts): a node name reaches the broker
// as subject tokens of a node's permissions and of a site's scope (in JWTs), so a hostile
// one is refused before anything is minted or written; what the account JWTs say
// (revocations, sites' scopes) follows the state; changes made at one moment are written
// together; a mesh of the stand-in from before operator mode is refused with what to do.
import assert from "node:assert/strict";
import { join } from "node:path";
import { createUser } from "@nats-io/nkeys";
import {
  accountState,
  checkNodeName,
  JOIN_REVOCATION_DELAY_MS,
  type MeshState,
  readState,
  withState,
} from "../lab/mesh/state.ts";
import { accountJwts, newOperatorSeeds, siteScope } from "../lab/mesh/operator.ts";
import { startMesh } from "./_mesh.ts";

const HOSTILE = [
  "*", // mesh.node.*.> : every node's subjects
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
    v: 2,
    operator: newOperatorSeeds(),
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

async function withMeshDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "noxms-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

for (const node of HOSTILE) {
  Deno.test(`mesh state: the node name ${JSON.stringify(node)} is refused before anything is minted or written`, async () => {
    assert.throws(() => checkNodeName(node), /refusing node name/);
    await withMeshDir(async (dir) => {
      await Deno.writeTextFile(join(dir, "mesh.json"), JSON.stringify(state(["good"])));
      const before = await Deno.readTextFile(join(dir, "mesh.json"));
      await assert.rejects(
        withState(dir, (s) => {
          Object.assign(s.tokens, state([node]).tokens);
        }),
        /refusing node name/,
      );
      assert.equal(await Deno.readTextFile(join(dir, "mesh.json")), before);
    });
  });
}

Deno.test("mesh state: a token for a hostile name is never minted, and nothing is written", async () => {
  await using mesh = await startMesh();
  const before = await Deno.readTextFile(join(mesh.dir, "mesh.json"));
  for (const node of ["*", "a.b", ">"]) {
    await assert.rejects(mesh.control.mintToken(node), /refusing node name/);
  }
  assert.equal(await Deno.readTextFile(join(mesh.dir, "mesh.json")), before);
});

Deno.test("mesh state: what the account JWTs say follows it: revoked and replaced keys, spent join keys from JOIN_REVOCATION_DELAY_MS after their answer until they expire, each site's nodes and live join keys", async () => {
  const s = state([]);
  const now = new Date();
  const later = new Date(now.getTime() + 3_600_000).toISOString();
  const earlier = new Date(now.getTime() - 1000).toISOString();
  const settled = new Date(now.getTime() - JOIN_REVOCATION_DELAY_MS).toISOString();
  const key = () => createUser().getPublicKey();
  const [a, b, old, spent, justSpent, expired, live, siteLive] = [
    key(),
    key(),
    key(),
    key(),
    key(),
    key(),
    key(),
    key(),
  ];
  s.leaves = { leaf1: { url: "tls://l:1", pin: "", pidFile: "", logFile: "" } };
  s.nodes = {
    "node-a": {
      publicKey: a,
      admittedAt: now.toISOString(),
      serial: 0,
      replaced: [{ publicKey: old, at: now.toISOString() }],
    },
    "node-b": {
      publicKey: b,
      admittedAt: now.toISOString(),
      serial: 0,
      revoked: true,
      revokedAt: now.toISOString(),
      site: "leaf1",
    },
  };
  s.tokens = {
    [spent]: { node: "node-a", expires: later, mintedAt: "", usedAt: settled },
    // Its answer may still be on its way to the node: revoked only once the delay passed.
    [justSpent]: { node: "node-a", expires: later, mintedAt: "", usedAt: now.toISOString() },
    [expired]: { node: "node-a", expires: earlier, mintedAt: "", usedAt: earlier },
    [live]: { node: "node-c", expires: later, mintedAt: "" },
    [siteLive]: { node: "s1", expires: later, mintedAt: "", via: "leaf1" },
  };
  const accounts = accountState(s, now);
  assert.deepEqual(Object.keys(accounts.revokedNodes!).sort(), [b, old].sort());
  assert.deepEqual(Object.keys(accounts.revokedJoins!), [spent]);
  // The site carries its nodes that are not revoked (s1, whose token names it) and its
  // live join keys; node-b, revoked, is out of its scope.
  assert.deepEqual(accounts.sites, {
    leaf1: { nodes: ["s1"], joins: [{ node: "s1", key: siteLive }] },
  });
  assert.deepEqual(siteScope(["s1"]).pub?.allow, ["mesh.node.s1.>"]);
  assert.deepEqual(siteScope(["s1"]).sub?.allow, ["mesh.push.s1", "_INBOX.s1.>"]);
  // An empty site carries nothing.
  assert.deepEqual(siteScope([]).pub?.allow, ["mesh.site.none"]);
  // The nodes' account JWT says it (and its size does not grow with the fleet: one set of
  // imports for every node).
  const jwts = await accountJwts(s.operator, accounts);
  const claims = JSON.parse(atob(jwts.nodes.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
  assert.deepEqual(Object.keys(claims.nats.revocations).sort(), [b, old].sort());
  assert.equal(claims.nats.imports.length, 6);
});

Deno.test("mesh state: changes made at one moment in one process are written together, each one taken", async () => {
  await withMeshDir(async (dir) => {
    await Deno.writeTextFile(join(dir, "mesh.json"), JSON.stringify(state([])));
    const keys = Array.from({ length: 300 }, () => createUser().getPublicKey());
    const results = await Promise.all(keys.map((k, i) =>
      withState(dir, (s) => {
        s.tokens[k] = { node: `node-${i}`, expires: "2999-01-01T00:00:00Z", mintedAt: "" };
        return s;
      })
    ));
    const written = await readState(dir);
    assert.equal(Object.keys(written.tokens).length, 300);
    // One read and one write for many: the changes of a moment share one state.
    const reads = new Set(results).size;
    assert.ok(reads <= 3, `${reads} reads and writes of mesh.json for 300 changes`);
    // A change that throws is refused alone; the others of its moment are written.
    const outcomes = await Promise.allSettled([
      withState(dir, (s) => void (s.nodes["x"] = { publicKey: "U", admittedAt: "", serial: 0 })),
      withState(dir, () => {
        throw new Error("refused alone");
      }),
      withState(dir, (s) => void (s.nodes["y"] = { publicKey: "U", admittedAt: "", serial: 0 })),
    ]);
    assert.deepEqual(outcomes.map((o) => o.status), ["fulfilled", "rejected", "fulfilled"]);
    assert.deepEqual(Object.keys((await readState(dir)).nodes).sort(), ["x", "y"]);
  });
});

Deno.test("mesh state: a mesh directory of the stand-in from before operator mode is refused with what to do", async () => {
  await withMeshDir(async (dir) => {
    await Deno.writeTextFile(
      join(dir, "mesh.json"),
      JSON.stringify({ v: 1, control: { seed: "", publicKey: "" }, nodes: {}, tokens: {} }),
    );
    await assert.rejects(
      readState(dir),
      /from before operator mode .*make a new mesh directory, and enrol its nodes again with new tokens/,
    );
  });
});
