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

Deno.test("a second after each apply the service signals itself SIGUSR2 (the runtime's malloc_trim under the launcher's DENO_USR2_MEMORY_TRIM=1), which ends it neither with that variable nor without", async () => {
  for (const trim of [false, true]) {
    const pkg = await Deno.makeTempDir({ prefix: "noxln-pkg-" });
    await using _pkg = {
      [Symbol.asyncDispose]: () => Deno.remove(pkg, { recursive: true }).catch(() => {}),
    };
    await using s = await scratch();
    const bundle = posix.join(pkg, "substrate.lock");
    await Deno.writeTextFile(s.configPath, JSON.stringify({ managedRoots: [s.root], bundle }));
    await Deno.writeTextFile(
      bundle,
      JSON.stringify({ version: 1, resources: [fileResource("f", `${s.root}/f`, "t\n")] }),
    );
    const trace = posix.join(pkg, "trace");
    // strace sees the kill calls only (seccomp: the rest runs untraced) and reports no signals.
    const strace = [
      "strace",
      "-f",
      "-qq",
      "--seccomp-bpf",
      "-e",
      "trace=kill",
      "-e",
      "signal=none",
    ];
    await using host = await spawnHost(
      ["run", "--drift-interval", "3"],
      { ...s.env, ...(trim ? { DENO_USR2_MEMORY_TRIM: "1" } : {}) },
      { source: true },
      [...strace, "-o", trace],
    );
    /** The host's own pid: the first process strace ran. */
    let pid: number | undefined;
    try {
      await host.waitLog(/apply \(start, bundle[^)]*\): converged/);
      // Two drift passes after the start's apply, each an apply too; each apply is followed by
      // a second without work (the drift timer fires 3 s after it), which trims.
      await host.waitLog(/apply \(drift[^]*apply \(drift/);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const text = await Deno.readTextFile(trace);
      pid = Number(/^(\d+) /.exec(text)?.[1]);
      const sent = [...text.matchAll(/^\d+ +kill\((\d+), SIGUSR2\)\s+= 0$/gm)];
      assert.ok(sent.length >= 3, `trim=${trim}: SIGUSR2 sent ${sent.length} times:\n${text}`);
      assert.ok(sent.every((m) => Number(m[1]) === pid), `not to itself:\n${text}`);
      // One from outside (the launcher, a person) does not end it either.
      Deno.kill(pid, "SIGUSR2");
      const drifts = host.log().split("apply (drift").length;
      await host.waitLog(new RegExp(`(apply \\(drift[^]*){${drifts}}`));
      assert.equal(await Deno.readTextFile(`${s.root}/f`), "t\n");
      Deno.kill(pid, "SIGTERM");
      assert.equal(await host.exited, 0, `trim=${trim}:\n${host.log()}`);
      pid = undefined;
    } finally {
      if (pid) Deno.kill(pid, "SIGKILL");
    }
  }
});
