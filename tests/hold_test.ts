/**
 * A hold (Puppet's `agent --disable "reason"`): while held nothing is applied, by hand
 * or by the service; the service stores what the link pushes, only checks the machine
 * and reports what differs; the heartbeat and `status` say who held it and why;
 * `unhold` and the service applies the latest declaration. All as real processes (the
 * CLI and `run` under the development permission set) against a real nats-server.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { acquireApplyLock } from "../src/lock.ts";
import { clearHold, setHold } from "../src/engine/hold.ts";
import { HoldWatch } from "../src/run/hold_watch.ts";
import { Store } from "../src/store/store.ts";
import { bundledMachine, file, readOr, runHost, scratch } from "./_helpers.ts";
import { fileResource, spawnHost, startMesh, until } from "./_mesh.ts";

type Report = Record<string, unknown>;

Deno.test("hold: apply is refused (75) naming who and why, status shows it; unhold and apply works", async () => {
  await using s = await scratch();
  const env = { ...s.env, SUDO_USER: "alice" };
  const f = `${s.root}/f`;
  const declaration = await s.declaration([file("f", f, "declared\n")]);

  const held = await runHost(["hold", "kernel upgrade by hand"], { env });
  assert.equal(held.code, 0, held.stderr);
  assert.match(held.stdout, /^held by alice since \S+: kernel upgrade by hand$/m);

  const refused = await runHost(["apply", declaration], { env: s.env });
  assert.equal(refused.code, 75, refused.stderr);
  assert.match(refused.stderr, /the host is held by alice since \S+: kernel upgrade by hand/);
  assert.match(refused.stderr, /nox-mesh-host unhold/);
  assert.equal(await readOr(f), undefined);

  // A second hold does not replace the first one's reason.
  const again = await runHost(["hold", "something else"], { env: { ...s.env, SUDO_USER: "bob" } });
  assert.equal(again.code, 75);
  assert.match(again.stderr, /held by alice/);

  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.hold.by, "alice");
  assert.equal(status.hold.reason, "kernel upgrade by hand");
  const people = (await runHost(["status"], { env: s.env })).stdout;
  assert.match(people, /^hold {9}HELD by alice since \S+: kernel upgrade by hand/m);

  // A plan still answers: it changes nothing.
  const planned = await runHost(["plan", declaration], { env: s.env });
  assert.equal(planned.code, 0, planned.stderr);
  assert.match(planned.stdout, /create/);

  const lifted = await runHost(["unhold"], { env: s.env });
  assert.equal(lifted.code, 0, lifted.stderr);
  assert.match(lifted.stdout, /lifted the hold of alice/);
  assert.equal((await runHost(["unhold"], { env: s.env })).stdout, "not held: nothing to lift\n");
  const applied = await runHost(["apply", declaration], { env: s.env });
  assert.equal(applied.code, 0, applied.stderr);
  assert.equal(await Deno.readTextFile(f), "declared\n");
});

Deno.test("hold: put while an apply runs, it waits for it (busy after --wait), and the hold is already set", async () => {
  await using s = await scratch();
  {
    // Another apply holds the lock for the whole of the hold's wait.
    using _lock = await acquireApplyLock(s.stateDir);
    const held = await runHost(["hold", "--wait", "1", "maintenance"], { env: s.env });
    assert.equal(held.code, 75, held.stderr);
    assert.match(held.stderr, /an apply that started before the hold is still running/);
  }
  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.hold.reason, "maintenance");
  const usage = await runHost(["hold", "  "], { env: s.env });
  assert.equal(usage.code, 64);
});

Deno.test("hold while the service runs: pushes are stored, not applied; drift only reported; the heartbeat says held; unhold applies the latest", async () => {
  await using mesh = await startMesh();
  await using s = await bundledMachine();
  const enrolled = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken("node-a"),
  });
  assert.equal(enrolled.code, 0, enrolled.stderr);
  await using host = await spawnHost(
    ["run", "--heartbeat-interval", "1", "--drift-interval", "2"],
    s.env,
  );
  await host.waitLog(/link: up to .* as node-a/);
  const f = `${s.root}/f`;
  await mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, "one\n")] });
  await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 1);

  const held = await runHost(["hold", "moving disks"], { env: { ...s.env, SUDO_USER: "carol" } });
  assert.equal(held.code, 0, held.stderr);

  // A person's edit is found by the drift check, reported, and left alone.
  await Deno.writeTextFile(f, "edited while held\n");
  const drift = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "held" && (r.differ as Report[]).length === 1,
  );
  assert.deepEqual((drift.hold as Report).by, "carol");
  assert.equal((drift.hold as Report).reason, "moving disks");
  assert.equal(drift.serial, 1);
  assert.deepEqual((drift.differ as Report[]).map((e) => [e.id, e.status]), [["f", "change"]]);
  assert.equal(await Deno.readTextFile(f), "edited while held\n");

  const beat = await until("a heartbeat that says held", async () => {
    const hb = await mesh.control.lastHeartbeat("node-a");
    return hb?.hold ? hb : undefined;
  });
  assert.equal((beat.hold as Report).by, "carol");
  assert.equal((beat.hold as Report).reason, "moving disks");

  // A push while held: admitted (its serial accepted) and stored, nothing applied.
  const g = `${s.root}/g`;
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [fileResource("f", f, "two\n"), fileResource("g", g, "new\n")],
  });
  await host.waitLog(/apply \(declaration, link serial 2\): held by carol .*: stored, not applied/);
  await mesh.control.waitReport("node-a", (r) => r.kind === "held" && r.serial === 2);
  assert.equal(await readOr(g), undefined);
  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.declaration.serial, 2, "the latest declaration is stored");
  assert.equal(status.lastApply.serial, 1, "and not applied");
  const applies = (await mesh.control.reports("node-a")).filter((r) => r.kind === "apply");
  assert.deepEqual(applies.map((r) => r.serial), [1]);

  const lifted = await runHost(["unhold"], { env: s.env });
  assert.equal(lifted.code, 0, lifted.stderr);
  const report = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 2,
  );
  assert.equal(report.trigger, "unhold");
  assert.equal(report.outcome, "converged");
  assert.equal(await Deno.readTextFile(f), "two\n");
  assert.equal(await Deno.readTextFile(g), "new\n");
  const free = await until("a heartbeat without a hold", async () => {
    const hb = await mesh.control.lastHeartbeat("node-a");
    return hb && hb.hold === null && (hb.last as Report | null)?.serial === 2 ? hb : undefined;
  });
  assert.equal(free.serial, 2);
  assert.equal(await host.stop("SIGTERM"), 0);
  assert.equal(await readOr(posix.join(s.stateDir, "halted")), undefined);
});

Deno.test("hold watch: a hold that kept the service from applying is seen lifted, even when it came and went between two looks", async () => {
  await using s = await scratch();
  using store = Store.open(s.stateDir);
  const lifted: string[] = [];
  const watch = new HoldWatch(store, {
    lifted: (hold) => lifted.push(hold.by),
    rescued: () => {},
  });
  const hold = { by: "gina", reason: "short", since: new Date().toISOString() };
  // Put and lifted between two looks, with nothing withheld: nothing to do.
  setHold(store, hold);
  clearHold(store);
  watch.check();
  assert.deepEqual(lifted, []);
  // Put, an apply withheld by it, lifted, all before the next look: the end is seen.
  setHold(store, hold);
  watch.withheld(hold);
  clearHold(store);
  watch.check();
  assert.deepEqual(lifted, ["gina"]);
  watch.check();
  assert.deepEqual(lifted, ["gina"], "once");
});

Deno.test("hold watch: a reconcile that starts after the hold was lifted, before the watch looked, takes the lift (its report says unhold) and the watch does not report it again", async () => {
  await using s = await scratch();
  using store = Store.open(s.stateDir);
  const lifted: string[] = [];
  const watch = new HoldWatch(store, {
    lifted: (hold) => lifted.push(hold.by),
    rescued: () => {},
  });
  const hold = { by: "hana", reason: "disks", since: new Date().toISOString() };
  assert.equal(watch.takeLifted(), null, "no hold seen: nothing lifted");
  setHold(store, hold);
  watch.withheld(hold);
  assert.equal(watch.takeLifted(), null, "still held");
  clearHold(store);
  assert.deepEqual(watch.takeLifted(), hold);
  assert.equal(watch.takeLifted(), null, "taken once");
  watch.check();
  assert.deepEqual(lifted, [], "the watch does not report a lift a reconcile took");
});
