/**
 * The memory ceiling as a real process: a host whose resident memory is above
 * host.json `memoryCeilingMiB` finishes its work, tells the control plane why,
 * and exits 10 (a restart the launcher does not count), not 0 (an upgrade) and
 * not a failure. Below the ceiling it keeps running.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { runHost, scratch } from "./_helpers.ts";
import { fileResource, spawnHost, startMesh, until } from "./_mesh.ts";

Deno.test("above the memory ceiling the service reports why and exits 10 for an uncounted restart", async () => {
  await using mesh = await startMesh();
  const pkg = await Deno.makeTempDir({ prefix: "noxln-pkg-" });
  await using _pkg = {
    [Symbol.asyncDispose]: () => Deno.remove(pkg, { recursive: true }).catch(() => {}),
  };
  // 32 MiB is below what any Deno process holds: the ceiling is crossed at once.
  await using s = await scratch({
    bundle: posix.join(pkg, "substrate.lock"),
    memoryCeilingMiB: 32,
  });
  const enrolled = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken("node-m"),
  });
  assert.equal(enrolled.code, 0, enrolled.stderr);
  const f = `${s.root}/f`;
  await mesh.control.declare("node-m", { version: 1, resources: [fileResource("f", f, "m\n")] });

  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  const code = await host.exited;
  assert.equal(code, 10, host.log());
  // It finished its apply first, then said why, with the numbers.
  assert.match(host.log(), /apply \(start, link serial 1\): converged/);
  assert.match(
    host.log(),
    /run: resident memory \d+ MiB is above the ceiling of 32 MiB \(host\.json memoryCeilingMiB\); exiting 10/,
  );
  assert.equal(await Deno.readTextFile(f), "m\n");
  const restart = await until("the restart message", async () => {
    const all = await mesh.control.reports("node-m");
    return all.find((r) => r.kind === "restart");
  });
  assert.equal(restart.reason, "memory");
  assert.equal(restart.ceilingBytes, 32 * 1024 * 1024);
  assert.ok((restart.rssBytes as number) > 32 * 1024 * 1024);
  // The launcher contract: a converged reconcile still recorded the version as good.
  assert.ok(await Deno.stat(posix.join(s.stateDir, "known-good")));
  const status = await runHost(["status", "--json"], { env: s.env });
  assert.equal(JSON.parse(status.stdout).service.phase, "exited for a restart (memory ceiling)");
});

Deno.test("below the memory ceiling the service keeps running", async () => {
  const pkg = await Deno.makeTempDir({ prefix: "noxln-pkg-" });
  await using _pkg = {
    [Symbol.asyncDispose]: () => Deno.remove(pkg, { recursive: true }).catch(() => {}),
  };
  await using s = await scratch({
    bundle: posix.join(pkg, "substrate.lock"),
    memoryCeilingMiB: 4096,
  });
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/nothing to hold yet/);
  await new Promise((resolve) => setTimeout(resolve, 4000));
  assert.doesNotMatch(host.log(), /ceiling/);
  assert.equal(await host.stop(), 0);
});
