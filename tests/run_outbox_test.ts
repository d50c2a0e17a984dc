/**
 * Reports kept while away (DESIGN.md §19) and inventory upward (§9), with the
 * host as a real process (development permission set) against a real
 * nats-server on 127.0.0.1: the outbox delivers in order, once each, after the
 * broker is back; a delivery repeated (the store still held reports the broker
 * had stored) is counted once; the inventory reaches the control plane and
 * follows changes.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { runHost, type Scratch, scratch } from "./_helpers.ts";
import { fileResource, type Mesh, spawnHost, startMesh, until } from "./_mesh.ts";
import { Store } from "../src/store/store.ts";
import { META } from "../src/store/meta.ts";
import { ensureOverlayKey, readOverlayKey } from "../src/overlay_key.ts";
import { VERSION } from "../src/version.ts";

const REPO = new URL("..", import.meta.url).pathname;

async function enrolled(mesh: Mesh, name: string): Promise<Scratch> {
  const s = await scratch();
  const run = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken(name),
  });
  assert.equal(run.code, 0, run.stderr);
  return s;
}

/** The node's reports as the broker keeps them (a request the control plane's
 * client sends while it is still reconnecting times out: asked again). */
function recordsOf(mesh: Mesh, node: string) {
  return until(`${node}'s reports`, async () => {
    try {
      return await mesh.control.reportRecords(node);
    } catch {
      return undefined;
    }
  });
}

function count(text: string, pattern: RegExp): number {
  return [...text.matchAll(new RegExp(pattern.source, "g"))].length;
}

/** Holds `f` through a file declaration; the broker is stopped; drift every second. */
async function awayWithDrift(mesh: Mesh, s: Scratch, f: string) {
  const declaration = await s.declaration([fileResource("f", f, "held\n")]);
  const applied = await runHost(["apply", declaration], { env: s.env });
  assert.equal(applied.code, 0, applied.stderr);
  await mesh.stopBroker();
  return await spawnHost(
    ["run", "--heartbeat-interval", "1", "--drift-interval", "1"],
    s.env,
  );
}

Deno.test("reports made while the broker is away are kept and delivered in order, once each, with the failed one", async () => {
  await using mesh = await startMesh();
  await using s = await enrolled(mesh, "node-a");
  const f = `${s.root}/f`;
  await using host = await awayWithDrift(mesh, s, f);
  await host.waitLog(/link: cannot connect \(attempt 1\)/);
  // The start's own reconcile first: an edit before it is repaired by it, not by a drift pass
  // (the link now says its first attempt before that reconcile ends).
  await host.waitLog(/apply \(start, file\): converged/);
  // Five drift repairs and one failing apply while away.
  for (let i = 1; i <= 5; i++) {
    const before = count(host.log(), /apply \(drift, file\): converged: 1 changed/);
    await Deno.writeTextFile(f, `edited ${i}\n`);
    await until(
      "a drift repair",
      () =>
        count(host.log(), /apply \(drift, file\): converged: 1 changed/) > before
          ? true
          : undefined,
    ).catch((error) => {
      // What the host said instead.
      throw new Error(
        `edit ${i}: ${error.message}; the host's log ends:\n${host.log().slice(-4000)}`,
      );
    });
  }
  await Deno.remove(f);
  await Deno.mkdir(f); // a directory where the file should be: the apply fails
  await host.waitLog(/apply \(drift, file\): failed: /);
  await Deno.remove(f);
  await host.waitLog(
    /apply \(drift, file\): failed: [^\n]*\n[^]*apply \(drift, file\): converged: 1 changed/,
  );

  await mesh.startBroker();
  await host.waitLog(/outbox: delivered \d+ kept report\(s\)/, 90_000);
  assert.equal(await host.stop("SIGTERM"), 0);

  using store = Store.open(s.stateDir);
  assert.equal(store.outbox.size(), 0, "every report was acknowledged and removed");
  const applies = store.applies(200).reverse().filter((a) => a.source === "file");
  const records = await recordsOf(mesh, "node-a");
  // The `apply` command's own apply (before run) made no report: run makes them.
  const fromRun = applies.slice(1);
  assert.equal(records.length, fromRun.length, "one report per apply of the run, each once");
  const ids = records.map((r) => r.body.id as string);
  assert.deepEqual(records.map((r) => r.msgId), ids, "Nats-Msg-Id is the report's id");
  assert.equal(new Set(ids).size, ids.length, "no report twice");
  const seqs = ids.map((id) => {
    const [node, seq, nonce] = id.split(".");
    assert.equal(node, "node-a");
    assert.match(nonce, /^[0-9a-f]{12}$/);
    return Number(seq);
  });
  assert.deepEqual(seqs, seqs.map((_, i) => seqs[0] + i), "in order, none missing");
  assert.deepEqual(
    records.map((r) => `${r.body.outcome}:${(r.body.counts as { changed: number }).changed}`),
    fromRun.map((a) => `${a.outcome}:${a.counts.changed}`),
    "the same applies, in the order they happened",
  );
  assert.equal(records.filter((r) => r.body.outcome === "failed").length, 1);
  assert.ok(
    records.filter((r) =>
      r.body.outcome === "converged" && (r.body.counts as { changed: number }).changed === 1
    ).length >= 6,
  );
  assert.ok(records.every((r) => !("dropped" in r.body)), "nothing was dropped");
});

Deno.test("a delivery repeated after a restart (the store still held reports the broker had) is counted once", async () => {
  await using mesh = await startMesh();
  await using s = await enrolled(mesh, "node-a");
  const f = `${s.root}/f`;
  {
    await using host = await awayWithDrift(mesh, s, f);
    await host.waitLog(/apply \(drift, file\): converged: 0 changed[^]*apply \(drift, file\)/);
    assert.equal(await host.stop("SIGTERM"), 0);
  }
  // The store as it was before the delivery: its reports "not yet acknowledged".
  const snapshot = posix.join(s.dir, "snapshot.db");
  await Deno.copyFile(posix.join(s.stateDir, "state.db"), snapshot);
  let kept: string[];
  {
    using store = Store.open(s.stateDir);
    kept = store.outbox.list().map((e) => `node-a.${e.key}`);
  }
  assert.ok(kept.length >= 3, `reports kept while away: ${kept.length}`);

  await mesh.startBroker();
  {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
    await host.waitLog(/outbox: delivered \d+ kept report\(s\)\n/, 90_000);
    assert.equal(await host.stop("SIGTERM"), 0);
  }
  const first = (await recordsOf(mesh, "node-a")).map((r) => r.msgId);
  assert.deepEqual(first.slice(0, kept.length), kept);

  // The same reports again: as after a crash between the broker's ack and the removal.
  for (const suffix of ["-wal", "-shm"]) {
    await Deno.remove(posix.join(s.stateDir, `state.db${suffix}`)).catch(() => {});
  }
  await Deno.copyFile(snapshot, posix.join(s.stateDir, "state.db"));
  {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
    const line = await host.waitLog(
      /outbox: delivered \d+ kept report\(s\) \((\d+) already held/,
      90_000,
    );
    assert.equal(Number(line[1]), kept.length);
    assert.equal(await host.stop("SIGTERM"), 0);
  }
  const ids = (await recordsOf(mesh, "node-a")).map((r) => r.msgId);
  for (const id of kept) assert.equal(ids.filter((x) => x === id).length, 1, `${id} once`);
  assert.equal(new Set(ids).size, ids.length, "the control plane holds no report twice");
});

Deno.test("the inventory goes upward on first link and when it changes; `mesh nodes --json` shows it", async () => {
  await using mesh = await startMesh();
  await using s = await enrolled(mesh, "node-a");
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  const first = await until("the first inventory", () => mesh.control.lastInventory("node-a"));
  using store = Store.open(s.stateDir);
  assert.equal(first.kind, "inventory");
  assert.equal(first.node, "node-a");
  assert.equal(first.publicKey, store.meta(META.publicKey));
  assert.equal(first.version, VERSION);
  assert.equal(first.deno, Deno.version.deno, "the runtime it runs on");
  assert.deepEqual(first.held, []);
  // Enrolment made the node's WireGuard key: its public half is in the inventory.
  assert.equal(first.overlayKey, (await readOverlayKey(s.stateDir))?.publicKey);
  assert.match(String(first.digest), /^sha256:[0-9a-f]{64}$/);
  const profile = first.profile as Record<string, unknown>;
  assert.equal(typeof (profile.os as { id: string }).id, "string");
  assert.equal(profile.architecture, Deno.build.arch);
  assert.ok(
    "init" in (profile.capabilities as object) && "packages" in (profile.capabilities as object),
  );
  assert.ok(!JSON.stringify(profile).includes("evidence"), "the evidence stays on the node");
  const size = new TextEncoder().encode(JSON.stringify(first)).length;
  assert.ok(size < 2048, `the inventory is small: ${size} bytes`);
  console.log(`inventory size with nothing held: ${size} bytes`);

  // A new overlay key and a held resource: both are in the next inventory.
  await Deno.remove(posix.join(s.stateDir, "wireguard.key"));
  const key = await ensureOverlayKey(s.stateDir);
  assert.notEqual(key.publicKey, first.overlayKey);
  const f = `${s.root}/f`;
  await mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, "x\n")] });
  const next = await until("an inventory with the held file", async () => {
    const inv = await mesh.control.lastInventory("node-a");
    return inv && (inv.held as unknown[]).length === 1 ? inv : undefined;
  });
  assert.equal(next.overlayKey, key.publicKey);
  assert.deepEqual((next.held as [string, string][]).map(([k]) => k), [`path:${f}`]);
  assert.notEqual(next.digest, first.digest);
  assert.equal(store.meta(META.inventoryDigest), next.digest);
  assert.equal(await host.stop("SIGTERM"), 0);

  const nodes = new Deno.Command(Deno.execPath(), {
    args: ["task", "-q", "mesh", "nodes", "--json", "--dir", mesh.dir],
    cwd: REPO,
    stdout: "piped",
    stderr: "piped",
  });
  const out = await nodes.output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const rows = JSON.parse(new TextDecoder().decode(out.stdout));
  assert.equal(rows[0].node, "node-a");
  assert.equal(rows[0].inventory.digest, next.digest);
});
