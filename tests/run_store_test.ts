/**
 * `run` and what it trusts (DESIGN.md §8, §18), as a real process under the
 * development permission set: only the configured bundle is read again with the
 * trusted parse; known-good and the cleared failure counter on the same event, a
 * reconcile that ran to its end (a failed resource included), never a refusal before
 * applying; a declaration admitted
 * while another apply holds the lock is applied once the lock is free.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { bundledMachine, readOr, runHost } from "./_helpers.ts";
import { fileResource, spawnHost, startMesh } from "./_mesh.ts";
import { VERSION } from "../src/version.ts";

const REPO = new URL("..", import.meta.url).pathname;

Deno.test("run holds `apply --bundle OTHER` to the body stored then: a later edit of OTHER (an action) is never read", async () => {
  await using s = await bundledMachine();
  const kept = `${s.root}/kept`;
  const other = posix.join(s.dir, "other.lock");
  const resources: unknown[] = [fileResource("kept", kept, "bundle\n")];
  await Deno.writeTextFile(other, JSON.stringify({ version: 1, resources }));
  const applied = await runHost(["apply", "--bundle", other], { env: s.env });
  assert.equal(applied.code, 0, applied.stderr);

  // Someone who can write OTHER (it is not the package's file) adds an action.
  const marker = `${s.root}/action-ran`;
  resources.push({
    type: "action",
    id: "planted",
    run: ["/usr/bin/touch", marker],
    verify: ["/usr/bin/test", "-f", marker],
  });
  await Deno.writeTextFile(other, JSON.stringify({ version: 1, resources }));

  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  const line = await host.waitLog(/apply \(start, bundle\): \w+: [^\n]*/);
  assert.match(line[0], /converged: 0 changed, 1 unchanged, 0 removed, 0 failed/);
  assert.equal(await host.stop("SIGTERM"), 0);
  assert.doesNotMatch(host.log(), /planted/);
  assert.equal(await readOr(marker), undefined);
  const status = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(status.declaration.origin, other);
});

Deno.test("run: a reconcile whose one resource always fails confirms the version: known-good written, the counter cleared (a failing resource is the machine's problem, not the program's)", async () => {
  await using s = await bundledMachine();
  // The parent of the declared file is a regular file: the apply fails every time.
  await Deno.writeTextFile(`${s.root}/plain`, "not a directory\n");
  const declaration = await s.declaration([fileResource("f", `${s.root}/plain/f`, "x\n")]);
  const first = await runHost(["apply", declaration], { env: s.env });
  assert.equal(first.code, 1, first.stderr + first.stdout);
  await Deno.writeTextFile(posix.join(s.stateDir, "failures"), "2\n");

  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/apply \(start, file\): failed: /);
  // The heartbeat timer writes the status record after the apply: the apply's
  // follow-up (known-good or not) is done by then.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  assert.equal(await host.stop("SIGTERM"), 0);
  assert.match(host.log(), /completed a reconcile: recorded as known-good/);
  assert.equal(await readOr(posix.join(s.stateDir, "known-good")), `${VERSION}\n`);
  assert.equal(await readOr(posix.join(s.stateDir, "failures")), undefined);
});

Deno.test("run: a bundle refused before applying confirms nothing: known-good and the failure counter are left as they were", async () => {
  await using s = await bundledMachine();
  await Deno.writeTextFile(s.bundle, `{"version": 1, "resources": [{"type": "nonsense"}]}`);
  await Deno.mkdir(s.stateDir, { recursive: true });
  await Deno.writeTextFile(posix.join(s.stateDir, "failures"), "1\n");
  await Deno.writeTextFile(posix.join(s.stateDir, "known-good"), "0.0.1\n");

  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/apply \(start\): .*refused, nothing was applied/);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  assert.equal(await host.stop("SIGTERM"), 0);
  assert.doesNotMatch(host.log(), /recorded as known-good/);
  assert.equal(await readOr(posix.join(s.stateDir, "known-good")), "0.0.1\n");
  assert.equal(await readOr(posix.join(s.stateDir, "failures")), "1\n");
});

/** Another process holding the apply lock (src/lock.ts) until `release()`. */
async function holdApplyLock(stateDir: string): Promise<{ release(): Promise<void> }> {
  const script = `
    import { acquireApplyLock } from ${JSON.stringify(posix.join(REPO, "src/lock.ts"))};
    using _lock = await acquireApplyLock(Deno.args[0], { waitMs: 60_000 });
    console.log("locked");
    await Deno.stdin.read(new Uint8Array(1));
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--quiet", script, stateDir],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  assert.match(new TextDecoder().decode(value), /locked/);
  reader.releaseLock();
  return {
    async release() {
      await child.stdin.close();
      await child.stdout.cancel();
      assert.equal((await child.status).code, 0);
    },
  };
}

Deno.test("a declaration pushed while another process holds the apply lock past the wait is applied once the lock is free", async () => {
  await using mesh = await startMesh();
  await using s = await bundledMachine();
  const token = await mesh.control.mintToken("node-a");
  const enrolled = await runHost(["enrol", "--token", "-"], { env: s.env, stdin: token });
  assert.equal(enrolled.code, 0, enrolled.stderr);
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/link: up to /);
  await host.waitLog(/run: \S+ completed a reconcile/);

  const lock = await holdApplyLock(s.stateDir);
  const f = `${s.root}/f`;
  await mesh.control.declare("node-a", { version: 1, resources: [fileResource("f", f, "one\n")] });
  await host.waitLog(/apply \(declaration\): another apply holds the lock; trying again/, 90_000);
  await lock.release();

  const report = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 1,
    90_000,
  );
  assert.equal(report.outcome, "converged");
  assert.equal(await Deno.readTextFile(f), "one\n");
  assert.equal(await host.stop("SIGTERM"), 0);
});
