/**
 * Rescue (seed 001: "a node whose local state is discarded so the mesh re-derives it"):
 * the store forgets what it holds and removes nothing; the identity and the accepted
 * serial stay; the next declaration applied is reported as a rescue, adopts what it
 * names as found and leaves the rest on the machine, unmanaged. And the apply lock
 * race it shares with any change of the store: a reconcile that read the store's
 * declaration before another apply replaced it does not apply the old one.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { applyDeclaration } from "../src/engine/apply.ts";
import { parseDeclaration } from "../src/engine/parse.ts";
import { acquireApplyLock } from "../src/lock.ts";
import { Store } from "../src/store/store.ts";
import { bundledMachine, file, readOr, runHost, scratch } from "./_helpers.ts";
import { fileResource, spawnHost, startMesh, until } from "./_mesh.ts";

type Report = Record<string, unknown>;

Deno.test("rescue: the store forgets, the machine keeps; the next apply adopts what it names and is reported as a rescue", async () => {
  await using s = await scratch();
  const env = { ...s.env, SUDO_USER: "dave" };
  const [a, b] = [`${s.root}/a`, `${s.root}/b`];
  const both = await s.declaration([file("a", a, "A\n"), file("b", b, "B\n")]);
  assert.equal((await runHost(["apply", both], { env })).code, 0);

  const rescued = await runHost(["rescue"], { env });
  assert.equal(rescued.code, 0, rescued.stderr);
  assert.match(rescued.stdout, /rescued by dave: the store forgot 2 held resource\(s\)/);
  assert.match(rescued.stdout, /nothing was removed from the machine/);
  assert.match(rescued.stdout, /when it starts it asks the bundle again/);
  let status = JSON.parse((await runHost(["status", "--json"], { env })).stdout);
  assert.equal(status.held, 0);
  assert.equal(status.declaration, null);
  assert.equal(status.rescue.pending.by, "dave");
  assert.equal(await Deno.readTextFile(a), "A\n");
  assert.equal(await Deno.readTextFile(b), "B\n");

  // The next declaration names a alone: adopted unchanged; b stays, unmanaged.
  const onlyA = await s.declaration([file("a", a, "A\n")]);
  const adopted = await runHost(["apply", "--json", onlyA], { env });
  assert.equal(adopted.code, 0, adopted.stderr);
  const report = JSON.parse(adopted.stdout);
  assert.deepEqual(report.results.map((r: Report) => `${r.id}:${r.outcome}`), ["a:unchanged"]);
  assert.equal(report.rescue.by, "dave");
  assert.equal(await Deno.readTextFile(b), "B\n");
  status = JSON.parse((await runHost(["status", "--json"], { env })).stdout);
  assert.equal(status.held, 1);
  assert.equal(status.rescue.pending, null);
  assert.equal(status.rescue.last.by, "dave");

  // Found, not made, since the rescue: dropped, it is forgotten and stays.
  const none = await runHost(["apply", "--json", await s.declaration([])], { env });
  assert.deepEqual(
    JSON.parse(none.stdout).results.map((r: Report) => `${r.id}:${r.outcome}`),
    ["a:forgotten"],
  );
  assert.equal(await Deno.readTextFile(a), "A\n");
});

Deno.test("rescue while the service runs: it starts again, holds nothing (no bundle) until the mesh answers, then the same declaration is adopted as a rescue; an older serial is still a replay", async () => {
  await using mesh = await startMesh();
  await using s = await bundledMachine();
  const enrolled = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken("node-a"),
  });
  assert.equal(enrolled.code, 0, enrolled.stderr);
  const [a, b] = [`${s.root}/a`, `${s.root}/b`];
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [fileResource("a", a, "A\n"), fileResource("b", b, "B\n")],
  }, { serial: 5 });
  {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
    await host.waitLog(/apply \(start, link serial 5\): converged: 2 changed/);
    const rescued = await runHost(["rescue"], { env: { ...s.env, SUDO_USER: "erin" } });
    assert.equal(rescued.code, 0, rescued.stderr);
    assert.match(rescued.stdout, /the service starts again and asks the mesh/);
    assert.equal(await host.exited, 10, host.log());
    assert.match(host.log(), /run: rescued by erin: the store forgot what it held; exiting 10/);
  }

  // With the mesh away, the rescued node holds nothing: the bundle is not applied.
  await Deno.writeTextFile(
    s.bundle,
    JSON.stringify({ version: 1, resources: [fileResource("x", `${s.root}/x`, "bundle\n")] }),
  );
  await mesh.stopBroker();
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/run: rescued: holding nothing until the mesh declares this node \(start\)/);
  assert.equal(await readOr(`${s.root}/x`), undefined);
  assert.equal(await Deno.readTextFile(a), "A\n");

  // The mesh answers: the same declaration (serial 5) is adopted, reported as a rescue.
  await mesh.startBroker();
  await host.waitLog(/apply \(rescue, link serial 5\): converged: 0 changed, 2 unchanged/, 90_000);
  // (The control plane's own connection comes back in its own time.)
  const report = await until("the rescue's report", async () => {
    const all = await mesh.control.reports("node-a").catch(() => []);
    return all.find((r) => r.kind === "apply" && r.trigger === "rescue");
  }, 90_000);
  assert.equal(report.serial, 5);
  assert.deepEqual(report.counts, {
    changed: 0,
    unchanged: 2,
    removed: 0,
    forgotten: 0,
    failed: 0,
  });

  // The replay guard survived the rescue.
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [fileResource("a", a, "replayed\n")],
  }, { serial: 4 });
  const refused = await mesh.control.waitReport("node-a", (r) => r.kind === "refused");
  assert.equal(refused.reason, "replay");
  assert.equal(await Deno.readTextFile(a), "A\n");
  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.held, 2);
  assert.equal(status.rescue.last.by, "erin");
  assert.equal(await host.stop("SIGTERM"), 0);
});

Deno.test("a reconcile that waited for the lock while another apply replaced the store's declaration applies the new one, never the old", async () => {
  await using s = await scratch();
  const [f, g] = [`${s.root}/f`, `${s.root}/g`];
  assert.equal(
    (await runHost(["apply", await s.declaration([file("f", f, "F\n")])], {
      env: s.env,
    })).code,
    0,
  );
  await using host = await spawnHost(["run", "--drift-interval", "1"], s.env);
  await host.waitLog(/apply \(start, file\): converged/);
  {
    // Another apply holds the lock while the drift reconcile (every second) waits for it,
    // and replaces the declaration: g instead of f.
    using _lock = await acquireApplyLock(s.stateDir);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    using store = Store.open(s.stateDir);
    const roots = [s.root];
    const text = JSON.stringify({ version: 1, resources: [file("g", g, "G\n")] });
    const declaration = await parseDeclaration(text, {
      managedRoots: roots,
      own: { paths: [], services: [] },
    });
    const report = await applyDeclaration(
      { store, providers: { fs: posixFileSystem() }, config: { managedRoots: roots } },
      declaration,
      { source: "file", origin: posix.join(s.dir, "by-hand.json") },
    );
    assert.equal(report.outcome, "converged", report.error);
  }
  await host.waitLog(/changed while this apply waited[^]*apply \(drift, file\): converged/);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  assert.equal(await Deno.readTextFile(g), "G\n", "the newer declaration's file stays");
  assert.equal(await readOr(f), undefined, "the older declaration is not applied again");
  assert.doesNotMatch(host.log(), /converged: 1 changed, 0 unchanged, 1 removed/);
  assert.equal(await host.stop("SIGTERM"), 0);
});
