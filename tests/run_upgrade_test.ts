/**
 * Self-upgrade (ADR 0057) in the bundled form: the host runs from a bundle file
 * under the development permission set; it exits 0 after the apply in progress
 * when that file is replaced, and never while the file is untouched, however
 * many applies, drift ticks and reconnects happen.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { runHost, scratch } from "./_helpers.ts";
import { fileResource, type Mesh, spawnHost, startMesh, until } from "./_mesh.ts";

const REPO = new URL("..", import.meta.url).pathname;

async function bundle(dir: string): Promise<string> {
  const out = posix.join(dir, "nox-mesh-host.js");
  const made = await new Deno.Command(Deno.execPath(), {
    args: ["bundle", "--quiet", "--output", out, "mod.ts"],
    cwd: REPO,
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.ok(made.success, new TextDecoder().decode(made.stderr));
  return out;
}

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

/** Replace the file the way a package manager does: a new file renamed over the old one. */
async function replace(path: string): Promise<void> {
  await Deno.copyFile(path, `${path}.new`);
  await Deno.rename(`${path}.new`, path);
}

async function enrolled(mesh: Mesh, env: Record<string, string>): Promise<void> {
  const run = await runHost(["enrol", "--token", "-"], {
    env,
    stdin: await mesh.control.mintToken("node-a"),
  });
  assert.equal(run.code, 0, run.stderr);
}

Deno.test("self-upgrade: no exit while the program file is untouched; exit 0 after the apply once it is replaced", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  const program = await bundle(s.dir);
  await enrolled(mesh, s.env);
  await using host = await spawnHost(
    ["run", "--heartbeat-interval", "1", "--drift-interval", "1"],
    s.env,
    { bundle: program },
  );
  await host.waitLog(/watching .*nox-mesh-host\.js \(bundled\)/);
  await host.waitLog(/link: up to /);
  let exited: number | undefined;
  host.exited.then((code) => exited = code);

  // Many applies, drift ticks and a reconnect, with the file read but never changed.
  const f = `${s.root}/f`;
  for (let i = 1; i <= 12; i++) {
    await mesh.control.declare("node-a", {
      version: 1,
      resources: [fileResource("f", f, `${i}\n`)],
    });
    await mesh.control.waitReport("node-a", (r) => r.kind === "apply" && r.serial === i);
    await Deno.readFile(program);
  }
  await until("three drift reconciles", () => {
    const n = host.log().match(/apply \(drift, link serial 12\)/g)?.length ?? 0;
    return n >= 3 ? true : undefined;
  });
  await mesh.stopBroker();
  await host.waitLog(/link: down/);
  await mesh.startBroker();
  await host.waitLog(/\(reconnected\)[^]*apply \(reconnect, link serial 12\)/, 90_000);
  await new Promise((resolve) => setTimeout(resolve, 2500)); // a few more heartbeat ticks
  assert.equal(
    exited,
    undefined,
    `the host exited (${exited}) with its file untouched:\n${host.log()}`,
  );
  assert.doesNotMatch(host.log(), /self-upgrade/);

  assert.equal(await host.stop("SIGTERM"), 0);

  // A fresh process that only checks after applies (no ticks in the way): the file is
  // replaced while a large apply runs; that apply completes, is recorded and reported,
  // and only then does the host exit 0.
  await using second = await spawnHost(
    ["run", "--heartbeat-interval", "600", "--drift-interval", "600"],
    s.env,
    { bundle: program },
  );
  await second.waitLog(/apply \(start, link serial 12\): converged/);
  const many = Array.from(
    { length: 1500 },
    (_, i) => fileResource(`m${i}`, `${s.root}/m${i}`, `${i}\n`),
  );
  await mesh.control.declare("node-a", { version: 1, resources: many });
  // Replaced once that apply is under way (its first file is there): the start's apply has
  // long had its own look at the file by then. Replaced right after the declare, a loaded
  // machine let that look see it, and the host left before serial 13 came.
  for (const end = Date.now() + 60_000; !(await exists(`${s.root}/m0`));) {
    if (Date.now() > end) throw new Error(`serial 13's apply never began:\n${second.log()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.equal(await exists(`${s.root}/m1499`), false, "the apply was over before the replace");
  await replace(program);
  assert.equal(await second.exited, 0, second.log());
  const log = second.log();
  assert.match(
    log,
    /apply \(declaration, link serial 13\): converged: 1500 changed, 0 unchanged, 1 removed[^\n]*\nrun: self-upgrade: .*nox-mesh-host\.js was replaced/,
  );
  assert.match(log, /run: stopped \(upgrade: /);
  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.service.phase, "exited for an upgrade");
  assert.deepEqual([status.lastApply.serial, status.lastApply.outcome], [13, "converged"]);
  const report = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 13,
  );
  assert.equal(report.outcome, "converged");
});

Deno.test("self-upgrade while idle: the heartbeat tick notices the replaced file and exits 0", async () => {
  await using s = await scratch();
  const program = await bundle(s.dir);
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env, {
    bundle: program,
  });
  await host.waitLog(/nothing to hold yet/);
  await replace(program);
  assert.equal(await host.exited, 0, host.log());
  assert.match(host.log(), /self-upgrade: .* was replaced/);
});

Deno.test("SIGTERM stops the bundled service cleanly with exit 0", async () => {
  await using s = await scratch();
  const program = await bundle(s.dir);
  await using host = await spawnHost(["run"], s.env, { bundle: program });
  await host.waitLog(/nothing to hold yet/);
  assert.equal(await host.stop("SIGTERM"), 0);
  assert.match(host.log(), /run: stopped \(signal: SIGTERM\)/);
  assert.doesNotMatch(host.log(), /self-upgrade/);
});
