/**
 * Signatures against a real nats-server and `run` as a real process (issue 21):
 * a broker's replay after the node was enrolled again under an earlier name, the
 * control plane's key rotation (followed without `enrol --replace`; the old key
 * refused after it; a rotation not signed by the current key refused), and a
 * declaration's expiry seen by a node whose clock is wrong (libfaketime), taken
 * once its clock is set right.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { createSigningKey, rotationHeader, signRotation } from "../src/link/signature.ts";
import { signingKeyFromSeed } from "../src/link/signature.ts";
import { Store } from "../src/store/store.ts";
import { readOr, runHost, type Scratch, scratch } from "./_helpers.ts";
import { fileResource, type Mesh, spawnHost, startMesh, until } from "./_mesh.ts";

type Report = Record<string, unknown>;

async function enrol(mesh: Mesh, node: string, s: Scratch, ...extra: string[]): Promise<void> {
  const run = await runHost(["enrol", "--token", "-", ...extra], {
    env: s.env,
    stdin: await mesh.control.mintToken(node),
  });
  assert.equal(run.code, 0, run.stderr);
}

async function refusals(mesh: Mesh, node: string, count: number): Promise<Report[]> {
  return await until(`${count} refusals from ${node}`, async () => {
    const all = (await mesh.control.reports(node)).filter((r) => r.kind === "refused");
    return all.length >= count ? all : undefined;
  });
}

Deno.test("a node enrolled again under a name it had before refuses the broker's replay of that name's old declaration", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const f = posix.join(s.root, "f");
  const declare = (content: string) =>
    mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, content)] });
  await enrol(mesh, "node-a", s);
  {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
    await host.waitLog(/link: up to /);
    await declare("one\n");
    await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 1);
    // What a broker keeps (or records in passing): serial 1, bytes and signature.
    const old = (await mesh.control.lastDeclaration("node-a"))!;
    assert.ok(old.signature);
    await declare("two\n");
    await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 2);
    assert.equal(await host.stop(), 0);

    // Enrolled as node-b, then as node-a again.
    await enrol(mesh, "node-b", s, "--replace");
    await enrol(mesh, "node-a", s, "--replace");
    await using again = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
    await again.waitLog(/link: up to /);
    await mesh.control.declare("node-a", new TextEncoder().encode(old.body), {
      signature: old.signature,
    });
    const [replay] = await refusals(mesh, "node-a", 1);
    assert.equal(replay.reason, "replay");
    assert.equal(replay.serial, 1);
    assert.match(String(replay.message), /serial 1 is not newer than the last accepted serial 2/);
    assert.equal(await readOr(f), "two\n");
    assert.equal(await again.stop(), 0);
  }
});

Deno.test("the control plane rotates its key: nodes follow without enrol --replace, refuse the old key after it and a rotation it did not sign", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const f = posix.join(s.root, "f");
  const file = (content: string) => ({ version: 1, resources: [fileResource("f", f, content)] });
  const pinned = () => {
    using store = Store.open(s.stateDir);
    return store.meta("link_signer");
  };
  await enrol(mesh, "node-a", s);
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/link: up to /);
  await mesh.control.declare("node-a", file("one\n"));
  await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 1);
  const before = await mesh.control.state();
  const oldKey = signingKeyFromSeed(before.signer.seed);

  // Rotated: node-a's last declaration is published again (serial 2) under the new key.
  const rotated = await mesh.control.rotateKey();
  assert.equal(rotated.from, before.signer.publicKey);
  assert.deepEqual([rotated.republished, rotated.skipped], [{ "node-a": 2 }, []]);
  const applied = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 2,
  );
  assert.equal(applied.outcome, "converged");
  await host.waitLog(/link: the control plane's signing key moved from O\w+ to O\w+/);
  assert.equal(pinned(), rotated.to);
  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.identity.signer, rotated.to);

  // A rotation to someone else's key, not signed by the current key: refused.
  const intruder = createSigningKey();
  await mesh.control.declare("node-a", file("intruder\n"), {
    signWith: intruder,
    rotation: rotationHeader([signRotation(oldKey, intruder.getPublicKey())]),
  });
  const [forged] = await refusals(mesh, "node-a", 1);
  assert.equal(forged.reason, "bad-rotation");
  assert.match(String(forged.message), /names no rotation from the pinned key O/);

  // The old key's new declaration: refused, nothing applied.
  await mesh.control.declare("node-a", file("old key\n"), { signWith: oldKey });
  const refused = await refusals(mesh, "node-a", 2);
  assert.equal(refused[1].reason, "bad-signature");
  assert.match(String(refused[1].message), /not by the pinned signing key O/);
  assert.equal(await readOr(f), "one\n");
  assert.equal(pinned(), rotated.to);

  // Rotated again: the stream's last declaration for node-a is not one the control
  // plane signed (the old key's), so it is not signed again.
  const second = await mesh.control.rotateKey();
  assert.deepEqual([second.republished, second.skipped], [{}, ["node-a"]]);
  // The next declaration carries both rotations; the node follows the one from its key.
  await mesh.control.declare("node-a", file("new key\n"));
  await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 5);
  assert.equal(await readOr(f), "new key\n");
  assert.equal(pinned(), second.to);
  // A token minted now pins the newest key.
  const token = JSON.parse(
    new TextDecoder().decode(
      Uint8Array.fromBase64(await mesh.control.mintToken("node-b"), { alphabet: "base64url" }),
    ),
  );
  assert.equal(token.signer, second.to);
  assert.equal(await host.stop(), 0);
});

const FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

Deno.test("an expired declaration is refused once; a node whose clock was wrong takes it when the clock is set right", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const f = posix.join(s.root, "f");
  await enrol(mesh, "node-a", s);
  // The node's clock runs two days ahead (libfaketime), until the file says otherwise.
  const clock = posix.join(s.dir, "faketime");
  await Deno.writeTextFile(clock, "+2d\n");
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], {
    ...s.env,
    LD_PRELOAD: FAKETIME,
    FAKETIME_TIMESTAMP_FILE: clock,
    FAKETIME_NO_CACHE: "1",
    DONT_FAKE_MONOTONIC: "1",
  });
  await host.waitLog(/link: up to /);
  // Valid for an hour by the control plane's clock: expired by the node's.
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [fileResource("f", f, "in time\n")],
  }, { notAfter: new Date(Date.now() + 3600_000) });
  const [expired] = await refusals(mesh, "node-a", 1);
  assert.equal(expired.reason, "expired");
  assert.match(String(expired.message), /this node's clock reads \d{4}-.*set it right/);
  // Asked for again at every tick (1 s), reported once.
  await new Promise((resolve) => setTimeout(resolve, 3500));
  assert.equal(
    (await mesh.control.reports("node-a")).filter((r) => r.kind === "refused").length,
    1,
  );
  assert.equal(await readOr(f), undefined);

  await Deno.writeTextFile(clock, "+0\n");
  const applied = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 1,
  );
  assert.equal(applied.outcome, "converged");
  assert.equal(await readOr(f), "in time\n");
  assert.equal(await host.stop(), 0);
});
