/**
 * `run` as a real process (development permission set, never -A) against a
 * real nats-server on 127.0.0.1: pushed declarations, refusals, reports,
 * heartbeats, known-good, reconnect catch-up, disconnected operation, SIGTERM.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { VERSION } from "../src/version.ts";
import { bundledMachine, readOr, runHost, type Scratch } from "./_helpers.ts";
import { fileResource, type Mesh, spawnHost, startMesh, until } from "./_mesh.ts";

type Report = Record<string, unknown>;

async function node(mesh: Mesh, name: string, s: Scratch): Promise<void> {
  const run = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken(name),
  });
  assert.equal(run.code, 0, run.stderr);
}

Deno.test("run applies pushed declarations, reports and heartbeats; refusals are reported and apply nothing", async () => {
  await using mesh = await startMesh();
  await using s = await bundledMachine();
  await node(mesh, "node-a", s);
  await Deno.writeTextFile(posix.join(s.stateDir, "failures"), "2\n");
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/link: up to tls:\/\/127\.0\.0\.1:\d+ as node-a/);

  // The first completed reconcile (nothing to hold yet) confirms the version to the launcher.
  // known-good is written first, then the launcher's counter removed: waited for both.
  await until(
    "known-good written and the failures cleared",
    async () =>
      await readOr(posix.join(s.stateDir, "known-good")) !== undefined &&
        await readOr(posix.join(s.stateDir, "failures")) === undefined
        ? true
        : undefined,
  );
  assert.equal(await readOr(posix.join(s.stateDir, "known-good")), `${VERSION}\n`);

  const f = `${s.root}/f`;
  await mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, "one\n")] });
  const applied = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 1,
  );
  assert.equal(applied.outcome, "converged");
  assert.equal(applied.trigger, "declaration");
  assert.equal(applied.source, "link");
  assert.deepEqual(applied.counts, {
    changed: 1,
    unchanged: 0,
    removed: 0,
    forgotten: 0,
    failed: 0,
  });
  assert.deepEqual((applied.results as Report[]).map((r) => [r.id, r.outcome]), [["f", "changed"]]);
  assert.equal(typeof applied.durationMs, "number");
  assert.equal(await Deno.readTextFile(f), "one\n");

  // Heartbeats: running version, last serial and outcome; small without the held list.
  const beat = await until("a heartbeat without the held list after the apply", async () => {
    const hb = await mesh.control.lastHeartbeat("node-a");
    return hb && (hb.last as Report | null)?.serial === 1 && !("heldList" in hb) ? hb : undefined;
  });
  assert.equal(beat.node, "node-a");
  assert.equal(beat.version, VERSION);
  assert.deepEqual(beat.held, { count: 1, digest: (beat.held as Report).digest });
  assert.equal(beat.serial, 1);
  assert.ok(typeof beat.uptimeS === "number" && typeof beat.rssBytes === "number");
  assert.ok(new TextEncoder().encode(JSON.stringify(beat)).length < 1024);

  // Refusals: each reported, nothing applied.
  const bytes = (d: unknown) => new TextEncoder().encode(JSON.stringify(d));
  const other = `${s.root}/other`;
  await mesh.control.declare(
    "node-a",
    bytes({ version: 1, node: "node-b", serial: 50, resources: [fileResource("o", other, "x")] }),
  );
  await mesh.control.declare(
    "node-a",
    { version: 1, resources: [fileResource("o", other, "replayed")] },
    { serial: 1 },
  );
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [{ type: "action", id: "a", run: ["/bin/true"], verify: ["/bin/true"] }],
  }, { serial: 51 });
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [{ type: "service", id: "me", name: "nox-mesh-host", enabled: true, running: true }],
  }, { serial: 52 });
  await mesh.control.declare(
    "node-a",
    bytes({ version: 1, node: "node-a", resources: [fileResource("o", other, "x")] }),
  );
  const refused = await until("five refusals", async () => {
    const all = (await mesh.control.reports("node-a")).filter((r) => r.kind === "refused");
    return all.length >= 5 ? all : undefined;
  });
  assert.deepEqual(refused.map((r) => [r.reason, r.serial]), [
    ["wrong-node", 50],
    ["replay", 1],
    ["invalid", 51],
    ["invalid", 52],
    ["unaddressed", null],
  ]);
  assert.match(String(refused[0].message), /addressed to "node-b", but this node is "node-a"/);
  assert.match(String(refused[1].message), /serial 1 is not newer than the last accepted serial 1/);
  assert.match(JSON.stringify(refused[2].problems), /action/);
  assert.match(JSON.stringify(refused[3].problems), /nox-mesh-host/);
  assert.equal(await readOr(other), undefined);
  assert.equal(await Deno.readTextFile(f), "one\n");
  const applies = (await mesh.control.reports("node-a")).filter((r) => r.kind === "apply");
  assert.deepEqual(applies.map((r) => r.serial), [1]);

  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.link.state, "up");
  assert.equal(status.service.running, true);
  assert.ok(Date.parse(status.service.nextDriftAt) > Date.now());
  assert.equal(status.declaration.serial, 1);
  const people = (await runHost(["status"], { env: s.env })).stdout;
  assert.match(people, /^link {9}up since /m);
  assert.match(people, /^next drift {3}\d{4}-/m);

  assert.equal(await host.stop("SIGTERM"), 0);
  assert.match(host.log(), /run: SIGTERM: stopping/);
  assert.match(host.log(), /run: stopped \(signal: SIGTERM\)\n$/);
  const after = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(after.service.running, false);
  assert.equal(after.link.state, "service not running");
});

Deno.test("declarations published while the node is away arrive on reconnect: the latest, not the older", async () => {
  await using mesh = await startMesh();
  await using s = await bundledMachine();
  await node(mesh, "node-a", s);
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/link: up to /);
  const f = `${s.root}/f`;
  await mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, "one\n")] });
  await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === 1);

  // The broker drops the node (its key is no longer admitted): the link says why and retries.
  await mesh.control.revoke("node-a");
  await host.waitLog(
    /link: cannot connect \(attempt \d+\): auth: the broker at 127\.0\.0\.1:\d+ refused this node's key U/,
  );
  const down = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.notEqual(down.link.state, "up");
  assert.equal(down.link.lastError.code, "link.auth");
  assert.equal(down.link.lastError.side, "broker");

  await mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, "two\n")] });
  await mesh.control.declare("node-a", {
    version: 1,
    resources: [fileResource("f", f, "three\n")],
  });
  await mesh.control.readmit("node-a");
  const latest = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 3,
    90_000,
  );
  assert.equal(latest.trigger, "reconnect");
  assert.equal(await Deno.readTextFile(f), "three\n");
  const serials = (await mesh.control.reports("node-a")).filter((r) => r.kind === "apply").map((
    r,
  ) => r.serial);
  assert.deepEqual(serials, [1, 3], "serial 2 was never applied");

  // The broker itself goes away and comes back: the connection is rebuilt, and the
  // reconnect reconciles from the store (the broker's last declaration is the one held).
  await mesh.stopBroker();
  await host.waitLog(/link: down: .*; reconnecting in/);
  await mesh.startBroker();
  await host.waitLog(
    /link: up to .* as node-a \(reconnected\)[^]*apply \(reconnect, link serial 3\): converged/,
    90_000,
  );
  assert.equal(await host.stop("SIGTERM"), 0);
});

Deno.test("without identity the bundle is applied; after enrol the running service takes declarations", async () => {
  await using mesh = await startMesh();
  await using s = await bundledMachine();
  const config = JSON.parse(await Deno.readTextFile(s.configPath));
  const kept = `${s.root}/substrate`;
  await Deno.writeTextFile(
    config.bundle,
    JSON.stringify({
      version: 1,
      resources: [fileResource("substrate", kept, "from the bundle\n")],
    }),
  );
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/apply \(start, bundle\): converged: 1 changed/);
  assert.equal(await Deno.readTextFile(kept), "from the bundle\n");
  assert.match(host.log(), /not enrolled: holding the machine/);

  await node(mesh, "node-a", s);
  await host.waitLog(/run: enrolled as node-a; starting the link[^]*link: up to /);
  const f = `${s.root}/f`;
  await mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, "mesh\n")] });
  const report = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 1,
  );
  assert.deepEqual(
    (report.results as Report[]).map((r) => [r.id, r.outcome]),
    [["f", "changed"], ["substrate", "removed"]],
  );
  assert.equal(await Deno.readTextFile(f), "mesh\n");
  assert.equal(await readOr(kept), undefined);
  assert.equal(await host.stop("SIGTERM"), 0);
});

Deno.test("with no broker reachable the node holds its machine from the store and repairs drift on the timer", async () => {
  await using mesh = await startMesh();
  await using s = await bundledMachine();
  await node(mesh, "node-a", s);
  const f = `${s.root}/f`;
  const declaration = await s.declaration([fileResource("f", f, "held\n")]);
  const applied = await runHost(["apply", declaration], { env: s.env });
  assert.equal(applied.code, 0, applied.stderr);
  await mesh.stopBroker();

  await using host = await spawnHost(
    ["run", "--heartbeat-interval", "1", "--drift-interval", "1"],
    s.env,
  );
  await host.waitLog(
    /link: cannot connect \(attempt 1\): TCP: 127\.0\.0\.1:\d+ refused the connection/,
  );
  await host.waitLog(/apply \(start, file\): converged: 0 changed, 1 unchanged/);
  await Deno.writeTextFile(f, "edited by a person\n");
  await host.waitLog(/apply \(drift, file\): converged: 1 changed/);
  assert.equal(await Deno.readTextFile(f), "held\n");
  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.link.lastError.code, "link.tcp");
  assert.equal(status.link.lastError.side, "network");
  assert.notEqual(status.link.state, "up");
  assert.equal(await host.stop("SIGINT"), 0);
});

Deno.test("after a reconcile that fails unexpectedly, the drift timer keeps running and the next one repairs", async () => {
  await using s = await bundledMachine();
  const f = `${s.root}/f`;
  const declaration = await s.declaration([fileResource("f", f, "held\n")]);
  const applied = await runHost(["apply", declaration], { env: s.env });
  assert.equal(applied.code, 0, applied.stderr);

  await using host = await spawnHost(["run", "--drift-interval", "1"], s.env);
  await host.waitLog(/apply \(start, file\): converged: 0 changed, 1 unchanged/);
  // A directory where the apply lock's file should be: the next reconcile cannot even
  // take the lock, an error no apply result describes.
  const lock = posix.join(s.stateDir, "apply.lock");
  await Deno.remove(lock);
  await Deno.mkdir(lock);
  await host.waitLog(/run: reconcile \(drift\) failed unexpectedly: /);
  await Deno.remove(lock);
  await Deno.writeTextFile(f, "edited by a person\n");
  await host.waitLog(/apply \(drift, file\): converged: 1 changed/, 30_000);
  assert.equal(await Deno.readTextFile(f), "held\n");
  assert.equal(await host.stop("SIGTERM"), 0);
});

Deno.test("a second run on the same state directory waits for the first, and takes over when it ends", async () => {
  await using s = await bundledMachine();
  await using first = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await first.waitLog(/run: \S+ completed a reconcile/);
  await using second = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await second.waitLog(/another run of this host holds .*run\.lock; waiting for it to end/);
  // While it waits it does nothing: no reconcile of its own.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  assert.doesNotMatch(second.log(), /run: \S+ starting/);
  assert.equal(await first.stop("SIGTERM"), 0);
  await second.waitLog(/run: \S+ starting/);
  await second.waitLog(/run: \S+ completed a reconcile/);
  assert.equal(await second.stop("SIGTERM"), 0);
});

Deno.test("a run still waiting for the service lock stops at once, with 0, on SIGTERM", async () => {
  await using s = await bundledMachine();
  await using first = await spawnHost(["run"], s.env);
  await first.waitLog(/run: \S+ completed a reconcile/);
  await using second = await spawnHost(["run"], s.env);
  await second.waitLog(/waiting for it to end/);
  assert.equal(await second.stop("SIGTERM"), 0);
  assert.equal(await first.stop("SIGTERM"), 0);
});
