// The launcher (launcher/nox-mesh-host-launch) tested as a program: a stand-in
// host whose every start the test scripts, real tar, and a real pacman for rollback.
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  count,
  fileSha256,
  hostLog,
  launch,
  LAUNCH_LIB,
  makeWorld,
  RunningLauncher,
  starts,
  stateFile,
  waitFor,
  type World,
  writeStandIn,
} from "./_launcher_world.ts";
import {
  APK_SPLIT,
  APK_VERSIONS,
  apkSnapshot,
  makeApkSplitWorld,
  originPackages,
  upgradeScript as apkUpgradeScript,
} from "./_apk_world.ts";
import { buildStandInPackage, installed, makePacmanRoot, publish, run, sha256 } from "./_pacman.ts";

async function cleanup(w: World): Promise<void> {
  await Deno.remove(w.dir, { recursive: true });
}

/** Starts the launcher, waits until the host is `ready`, stops it with TERM; returns the run. */
async function runUntilReady(w: World, readyCount = 1) {
  const l = new RunningLauncher(w);
  try {
    await waitFor(
      "the host to be ready",
      async () => (await hostLog(w)).filter((x) => x.startsWith("ready")).length >= readyCount,
    );
  } catch (e) {
    await l.stop();
    throw new Error(`${e}\nlauncher said:\n${l.stderr}`);
  }
  l.process.kill("SIGTERM");
  return await l.exit();
}

/** A script that rewrites the stand-in program as `version` (an upgrade), with `extra` appended. */
async function upgradeScript(w: World, version: string, extra = ""): Promise<string> {
  const script = join(w.dir, `upgrade-${version}-${crypto.randomUUID()}`);
  await Deno.writeTextFile(
    script,
    `#!/bin/sh\nset -eu\nsed 's/^version=.*/version=${version}/' '${w.bin}' > '${w.bin}.new'\n` +
      (extra ? `printf '%s\\n' '${extra}' >> '${w.bin}.new'\n` : "") +
      `chmod 755 '${w.bin}.new' && mv '${w.bin}.new' '${w.bin}'\n`,
    { mode: 0o755 },
  );
  return script;
}

Deno.test("launcher: exit 0 with nothing upgraded counts as a failure: three roll back", async () => {
  const w = await makeWorld({ steps: ["exit 0", "exit 0", "exit 0", "confirm wait"] });
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "1.0", "1.0", "1.0"]);
  assert.equal(count(r.stderr, "upgraded itself"), 0, r.stderr);
  assert.equal(count(r.stderr, "neither its version (1.0) nor its program changed"), 3, r.stderr);
  assert.match(r.stderr, /failed \(exit 0 with nothing upgraded\), 3 in a row/);
  assert.equal(count(r.stderr, "failed 3 times in a row: rolling back to known-good 1.0"), 1);
  assert.equal(await stateFile(w, "rolled-back"), "3 1.0");
  await cleanup(w);
});

Deno.test("launcher: three self-upgrades in a row (a new version, or the same version's program rebuilt) are not counted and do not roll back", async () => {
  const w = await makeWorld({ steps: [] });
  const steps = [
    `confirm run ${await upgradeScript(w, "2.0")} exit 0`,
    `confirm run ${await upgradeScript(w, "2.0", "# rebuilt")} exit 0`,
    `confirm run ${await upgradeScript(w, "3.0")} exit 0`,
    "wait",
  ];
  await Deno.writeTextFile(join(w.plan, "steps"), steps.join("\n") + "\n");
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "3.0"]);
  assert.equal(count(r.stderr, "upgraded itself"), 3, r.stderr);
  assert.equal(await stateFile(w, "failures"), "0", "only the host's confirm touched the count");
  assert.equal(count(r.stderr, "rolling back"), 0);
  await cleanup(w);
});

Deno.test("launcher: exit 10 (a restart the host asked for) is bounded: 3 short runs in a row roll back once, 3 more halt", async () => {
  const w = await makeWorld({
    steps: [
      "confirm exit 10",
      "confirm exit 10",
      "confirm exit 10",
      "exit 10",
      "exit 10",
      "exit 10",
    ],
  });
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  const r = await launch(w);
  assert.equal(r.code, 78, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "1.0", "1.0", "1.0", "1.0", "1.0"]);
  assert.equal(count(r.stderr, "asked for a restart (its memory ceiling"), 4, r.stderr);
  assert.equal(
    count(
      r.stderr,
      "asked for a restart (exit 10) 3 times in a row, each within 600s of its start: rolling back to known-good 1.0",
    ),
    1,
    r.stderr,
  );
  assert.match(
    (await stateFile(w, "halted"))!,
    /asked for a restart \(exit 10\) 3 times in a row, each within 600s of its start after rolling back to 1\.0: the machine, not the version, needs a look/,
  );
  await cleanup(w);
});

Deno.test("launcher: exit 10 after runs longer than the restart window is restarted uncounted, without end", async () => {
  const w = await makeWorld({ steps: ["exit 10", "exit 10", "exit 10", "exit 10", "wait"] });
  w.env.NOX_MESH_HOST_RESTART_WINDOW = "0"; // every run counts as a long one
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  await Deno.writeTextFile(join(w.state, "failures"), "1\n");
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "1.0", "1.0", "1.0", "1.0"]);
  assert.equal(await stateFile(w, "failures"), "1", "a restart request neither counts nor clears");
  assert.equal(await stateFile(w, "rolled-back"), undefined);
  assert.equal(count(r.stderr, "rolling back"), 0);
  assert.equal(count(r.stderr, "asked for a restart (its memory ceiling"), 4);
  await cleanup(w);
});

/**
 * Runs one launcher until it pauses after an exit 10 (NOX_MESH_HOST_BACKOFF=300), then stops it
 * with TERM as an init's restart of the service does; or until it ends by itself.
 */
async function launcherUntilRestartPause(w: World): Promise<{ code: number; stderr: string }> {
  const l = new RunningLauncher(w);
  let ended = false;
  l.process.status.then(() => ended = true);
  try {
    await waitFor(
      "the launcher to pause after an exit 10, or to end",
      () => ended || l.stderr.includes("starting it again in 300s"),
    );
  } catch (e) {
    await l.stop();
    throw new Error(`${e}\nlauncher said:\n${l.stderr}`);
  }
  if (!ended) l.process.kill("SIGTERM");
  return await l.exit();
}

Deno.test("launcher: the exit-10 streak outlives the launcher: a host over its ceiling at every start, the launcher restarted after each exit 10, is rolled back once, then halted", async () => {
  const w = await makeWorld({ steps: Array(8).fill("exit 10") }); // 6 used
  w.env.NOX_MESH_HOST_BACKOFF = "300"; // the pause after an exit 10, where the launcher is stopped
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  const said: string[] = [];
  let last = { code: -1, stderr: "" };
  // Each launcher sees one or two exit 10s; the in-memory streak never reached 3.
  while (said.length < 8) {
    last = await launcherUntilRestartPause(w);
    said.push(last.stderr);
    if (last.code !== 0) break;
  }
  const all = said.join("\n--- launcher started again ---\n");
  assert.equal(last.code, 78, all);
  assert.equal(said.length, 5, all);
  assert.deepEqual(await starts(w), Array(6).fill("1.0"), all);
  assert.equal(
    count(
      all,
      "asked for a restart (exit 10) 3 times in a row, each within 600s of its start: rolling back to known-good 1.0",
    ),
    1,
    all,
  );
  assert.match(
    (await stateFile(w, "halted"))!,
    /asked for a restart \(exit 10\) 3 times in a row, each within 600s of its start after rolling back to 1\.0/,
  );
  assert.equal(await stateFile(w, "restart-streak"), undefined, "a halt clears the streak too");
  await cleanup(w);
});

Deno.test("launcher: the exit-10 streak outlives a launcher killed (SIGKILL) while the host runs, its host killed with it", async () => {
  const w = await makeWorld({ steps: ["exit 10", "exit 10", "wait", "exit 10", "confirm wait"] });
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  const first = new RunningLauncher(w);
  try {
    await waitFor(
      "the third start to be ready",
      async () => (await hostLog(w)).includes("ready 1.0"),
    );
  } catch (e) {
    await first.stop();
    throw new Error(`${e}\nlauncher said:\n${first.stderr}`);
  }
  // As systemd's stop timeout ends the service: the launcher and its host, both with KILL.
  first.process.kill("SIGKILL");
  await first.process.status;
  const host = Number((await hostLog(w)).findLast((l) => l.startsWith("start "))!.split(" ")[2]);
  Deno.kill(host, "SIGKILL");
  assert.match((await stateFile(w, "restart-streak"))!, /^2 \d+$/);
  const r = await runUntilReady(w, 2);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), Array(5).fill("1.0"));
  assert.equal(
    count(r.stderr, "3 times in a row, each within 600s of its start: rolling back"),
    1,
    r.stderr,
  );
  assert.equal(await stateFile(w, "rolled-back"), "0 1.0");
  await cleanup(w);
});

Deno.test("launcher: a garbled exit-10 streak file is 0, said, and written anew (never read through a link, a FIFO or a directory)", async (t) => {
  const now = Math.floor(Date.now() / 1000);
  const cases: [string, (path: string, w: World) => Promise<void>][] = [
    ["words", (p) => Deno.writeTextFile(p, "garbage\n")],
    ["a count without its start", (p) => Deno.writeTextFile(p, "3\n")],
    ["a leading zero (octal to sh)", (p) => Deno.writeTextFile(p, `08 ${now}\n`)],
    ["a number too large for sh", (p) => Deno.writeTextFile(p, `99999999999999999999 ${now}\n`)],
    ["a negative start", (p) => Deno.writeTextFile(p, `5 -${now}\n`)],
    ["a second line", (p) => Deno.writeTextFile(p, `5 ${now}\n5 ${now}\n`)],
    ["a directory", (p) => Deno.mkdir(p)],
    ["a FIFO", async (p) => {
      const r = await new Deno.Command("mkfifo", { args: [p] }).output();
      assert.ok(r.success);
    }],
    ["a link to a file holding a streak", async (p, w) => {
      await Deno.writeTextFile(join(w.dir, "outside"), `5 ${now}\n`);
      await Deno.symlink(join(w.dir, "outside"), p);
    }],
  ];
  for (const [what, make] of cases) {
    await t.step(what, async () => {
      const w = await makeWorld({ steps: ["exit 10", "exit 10", "wait"] });
      await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
      const path = join(w.state, "restart-streak");
      await make(path, w);
      const r = await runUntilReady(w);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /ignoring a garbled .*restart-streak/);
      assert.deepEqual(await starts(w), ["1.0", "1.0", "1.0"], r.stderr);
      assert.equal(count(r.stderr, "rolling back"), 0, r.stderr);
      assert.ok((await Deno.lstat(path)).isFile, "a regular file again");
      assert.match((await stateFile(w, "restart-streak"))!, /^2 \d+$/, "counted from 0");
      if (what.startsWith("a link")) {
        assert.equal(await Deno.readTextFile(join(w.dir, "outside")), `5 ${now}\n`);
      }
      await cleanup(w);
    });
  }
});

Deno.test("launcher: a persisted exit-10 streak whose last run started a restart window ago or more is over (that run was long, or nothing ran)", async () => {
  const w = await makeWorld({ steps: ["exit 10", "exit 10", "wait"] });
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  await Deno.writeTextFile(
    join(w.state, "restart-streak"),
    `2 ${Math.floor(Date.now() / 1000) - 3600}\n`,
  );
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(count(r.stderr, "rolling back"), 0, r.stderr);
  assert.match((await stateFile(w, "restart-streak"))!, /^2 \d+$/);
  await cleanup(w);
});

Deno.test("launcher: a long run ends the exit-10 streak also when the launcher is stopped during it", async () => {
  const w = await makeWorld({ steps: ["exit 10", "exit 10", "wait"] });
  w.env.NOX_MESH_HOST_RESTART_WINDOW = "5";
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  const l = new RunningLauncher(w);
  try {
    await waitFor(
      "the third start to be ready",
      async () => (await hostLog(w)).includes("ready 1.0"),
    );
  } catch (e) {
    await l.stop();
    throw new Error(`${e}\nlauncher said:\n${l.stderr}`);
  }
  assert.match((await stateFile(w, "restart-streak"))!, /^2 \d+$/, l.stderr);
  await new Promise((r) => setTimeout(r, 6_000)); // the run outlasts the window (a lower bound)
  l.process.kill("SIGTERM");
  const r = await l.exit();
  assert.equal(r.code, 0, r.stderr);
  assert.match((await stateFile(w, "restart-streak"))!, /^0 \d+$/, r.stderr);
  await cleanup(w);
});

Deno.test("launcher: a new version that never confirms a reconcile is stopped at its start deadline (TERM; it exits 0, still counted) and rolled back", async () => {
  const w = await makeWorld({ steps: [] });
  w.env.NOX_MESH_HOST_START_DEADLINE = "1";
  const steps = [`confirm run ${await upgradeScript(w, "2.0")} exit 0`, "wait", "wait", "wait"];
  await Deno.writeTextFile(join(w.plan, "steps"), [...steps, "confirm wait"].join("\n") + "\n");
  const r = await runUntilReady(w, 4);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "2.0", "1.0"]);
  const log = await hostLog(w);
  assert.equal(log.filter((l) => l === "signal TERM 2.0").length, 3, log.join("\n"));
  assert.equal(count(r.stderr, "nox-mesh-host 2.0 has not confirmed a reconcile 1s after"), 3);
  assert.match(
    r.stderr,
    /did not confirm a reconcile within 1s of its start \(stopped; exit 0\), 3 in a row/,
  );
  assert.equal(count(r.stderr, "failed 3 times in a row: rolling back to known-good 1.0"), 1);
  assert.equal(await stateFile(w, "rolled-back-from"), "2.0");
  // The rolled-back version is the known-good one: no deadline, and it confirmed.
  assert.equal(log.filter((l) => l === "signal TERM 1.0").length, 1, "only the final stop");
  assert.equal(await stateFile(w, "failures"), "0");
  await cleanup(w);
});

Deno.test("launcher: a host that ignores TERM at its start deadline is killed after the grace and counted", async () => {
  const w = await makeWorld({ steps: ["hang", "confirm wait"] });
  w.env.NOX_MESH_HOST_START_DEADLINE = "2";
  w.env.NOX_MESH_HOST_STOP_GRACE = "1";
  await Deno.writeTextFile(join(w.state, "known-good"), "0.9\n");
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "1.0"]);
  assert.ok((await hostLog(w)).includes("ignored TERM 1.0"));
  assert.match(r.stderr, /did not stop within 1s of TERM: killing it/);
  assert.match(
    r.stderr,
    /did not confirm a reconcile within 2s of its start \(stopped; exit 137\), 1 in a row/,
  );
  assert.equal(await stateFile(w, "failures"), "0", "the second start confirmed in time");
  await cleanup(w);
});

Deno.test("launcher: the start deadline spares a host that confirmed in time, and the known-good version", async (t) => {
  for (
    const [what, good, step] of [
      ["a new version that confirmed", "0.9", "confirm wait"],
      ["the known-good version itself, slow to confirm", "1.0", "wait"],
    ]
  ) {
    await t.step(what, async () => {
      const w = await makeWorld({ steps: [step] });
      w.env.NOX_MESH_HOST_START_DEADLINE = "2";
      await Deno.writeTextFile(join(w.state, "known-good"), `${good}\n`);
      const l = new RunningLauncher(w);
      try {
        await waitFor("the host to be ready", async () => (await hostLog(w)).includes("ready 1.0"));
        // Twice the deadline and more: time for it to fire, if it were going to.
        await new Promise((resolve) => setTimeout(resolve, 5000));
        // Its watch ended with the confirmation: the host is the launcher's one child.
        const pid = l.process.pid;
        const children = (await Deno.readTextFile(`/proc/${pid}/task/${pid}/children`)).trim();
        const host = (await hostLog(w)).find((x) => x.startsWith("start "))!.split(" ")[2];
        assert.equal(children, host, "no watch left beside the host");
      } finally {
        l.process.kill("SIGTERM");
      }
      const r = await l.exit();
      assert.equal(r.code, 0, r.stderr);
      assert.equal(count(r.stderr, "has not confirmed a reconcile"), 0, r.stderr);
      assert.deepEqual(await starts(w), ["1.0"]);
      assert.equal(await stateFile(w, "failures"), step.startsWith("confirm") ? "0" : undefined);
      await cleanup(w);
    });
  }
});

Deno.test("launcher: the counter is cleared only by the host", async (t) => {
  await t.step("crashes count, the host's confirm clears", async () => {
    const w = await makeWorld({ steps: ["exit 1", "kill", "confirm wait"] });
    const r = await runUntilReady(w);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /failed \(exit 1\), 1 in a row/);
    assert.match(r.stderr, /failed \(exit 137\), 2 in a row/);
    assert.equal(await stateFile(w, "failures"), "0");
    assert.equal(await stateFile(w, "known-good"), "1.0");
    await cleanup(w);
  });
  await t.step(
    "an exit 0 with nothing upgraded keeps and adds to the count: crash, crash, exit 0 rolls back",
    async () => {
      const w = await makeWorld({ steps: ["exit 1", "exit 1", "exit 0", "wait"] });
      await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
      const r = await runUntilReady(w);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(count(r.stderr, "rolling back to known-good 1.0"), 1);
      assert.equal(await stateFile(w, "rolled-back"), "3 1.0");
      await cleanup(w);
    },
  );
});

Deno.test("launcher: halted refuses to start and names the file to remove", async () => {
  const w = await makeWorld({ steps: ["wait"] });
  await Deno.writeTextFile(join(w.state, "halted"), "a person put this here\n");
  const r = await launch(w);
  assert.equal(r.code, 78);
  assert.match(r.stderr, /HALTED: a person put this here/);
  assert.ok(r.stderr.includes(`remove ${w.state}/halted`), r.stderr);
  assert.deepEqual(await hostLog(w), [], "the host was never started");
  await cleanup(w);
});

Deno.test("launcher: it sources its package kind's include from lib/nox-mesh-host/launch/ beside the installation; an unknown or missing kind stops it (exit 64) naming what it has", async () => {
  const w = await makeWorld({ pkg: "tarball", steps: ["confirm wait"] });
  delete w.env.NOX_MESH_HOST_LAUNCH_LIB;
  const lib = join(w.prefix, "lib/nox-mesh-host/launch");
  await Deno.mkdir(lib, { recursive: true });
  await Deno.copyFile(join(LAUNCH_LIB, "tarball.sh"), join(lib, "tarball.sh"));
  const ok = await runUntilReady(w);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stderr, /kept the package file of nox-mesh-host 1\.0/, "its tarball path ran");
  for (
    const [pkg, said] of [
      ["apk", `NOX_MESH_HOST_PKG is 'apk', but ${lib}/ has no apk.sh (it has: tarball)`],
      ["../x", "NOX_MESH_HOST_PKG is '../x', expected a package kind (launcher/pkg/)"],
    ]
  ) {
    w.env.NOX_MESH_HOST_PKG = pkg;
    const r = await launch(w);
    assert.equal(r.code, 64, r.stderr);
    assert.ok(r.stderr.includes(said), r.stderr);
  }
  assert.deepEqual(await starts(w), ["1.0"], "the host was started by the first launcher only");
  await cleanup(w);
});

Deno.test("launcher: no known-good halts instead of guessing", async () => {
  const w = await makeWorld({ steps: ["exit 1", "exit 1", "exit 1", "wait"] });
  const r = await launch(w);
  assert.equal(r.code, 78, r.stderr);
  assert.match((await stateFile(w, "halted"))!, /names no version: refusing to guess/);
  assert.deepEqual(await starts(w), ["1.0", "1.0", "1.0"]);
  await cleanup(w);
});

Deno.test("launcher: a missing package file for known-good fails loudly (halts)", async () => {
  const w = await makeWorld({ steps: ["exit 1", "exit 1", "exit 1", "wait"] });
  await Deno.writeTextFile(join(w.state, "known-good"), "0.9\n");
  const r = await launch(w);
  assert.equal(r.code, 78, r.stderr);
  const halted = (await stateFile(w, "halted"))!;
  assert.match(halted, /package file of known-good version 0\.9 is missing/);
  assert.ok(halted.includes(join(w.state, "rollback/0.9")), halted);
  assert.match(r.stderr, /HALTED: the package file of known-good version 0\.9 is missing/);
  await cleanup(w);
});

for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  Deno.test(`launcher: ${sig} reaches the host as TERM and the launcher waits for it`, async () => {
    const w = await makeWorld({ steps: ["wait"] });
    const l = new RunningLauncher(w);
    await waitFor("the host to be ready", async () => (await hostLog(w)).includes("ready 1.0"))
      .catch(async (e) => {
        await l.stop();
        throw e;
      });
    const pid = Number((await hostLog(w))[0].split(" ")[2]);
    l.process.kill(sig);
    const r = await l.exit();
    const log = await hostLog(w);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      log.slice(-2),
      ["signal TERM 1.0", "stopped 1.0"],
      "stopped before the launcher exited",
    );
    assert.throws(() => Deno.kill(pid, "SIGCONT"), Deno.errors.NotFound, "no orphaned host");
    assert.match(r.stderr, new RegExp(`stopped on ${sig}`));
    assert.equal(await stateFile(w, "failures"), undefined, "a requested stop is no failure");
    await cleanup(w);
  });
}

Deno.test("launcher: a signal during the back-off stops without starting the host again", async () => {
  const w = await makeWorld({ steps: ["exit 1", "wait"] });
  w.env.NOX_MESH_HOST_BACKOFF = "600";
  w.env.NOX_MESH_HOST_BACKOFF_MAX = "600";
  const l = new RunningLauncher(w);
  await waitFor("the first failure", () => l.stderr.includes("starting again in 600s"))
    .catch(async (e) => {
      await l.stop();
      throw e;
    });
  l.process.kill("SIGTERM");
  const r = await l.exit();
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0"]);
  await cleanup(w);
});

Deno.test("launcher: tarball rollback unpacks the kept copy of known-good", async () => {
  const w = await makeWorld({
    steps: ["confirm run UPGRADE exit 0", "exit 1", "exit 1", "exit 1", "wait"],
  });
  const upgrade = join(w.dir, "upgrade");
  await Deno.writeTextFile(
    upgrade,
    `#!/bin/sh\nsed 's/^version=.*/version=2.0/' '${w.bin}' > '${w.bin}.new' && chmod 755 '${w.bin}.new' && mv '${w.bin}.new' '${w.bin}'\n`,
    { mode: 0o755 },
  );
  await Deno.writeTextFile(
    join(w.plan, "steps"),
    (await Deno.readTextFile(join(w.plan, "steps"))).replace("UPGRADE", upgrade),
  );
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "2.0", "1.0"]);
  assert.equal(count(r.stderr, "rolling back to known-good"), 1);
  assert.deepEqual([...Deno.readDirSync(join(w.state, "rollback"))].map((e) => e.name), ["1.0"]);
  assert.match(await Deno.readTextFile(w.bin), /^version=1\.0$/m);
  await cleanup(w);
});

Deno.test("launcher: tarball rollback restores the whole installation in the prefix (program, runtime, bundle, substrate.lock), not only the program", async () => {
  const w = await makeWorld({
    steps: ["confirm run UPGRADE exit 0", "exit 1", "exit 1", "exit 1", "wait"],
  });
  // The tarball's layout under the prefix (/usr/local): what version 1.0 laid there.
  const files = {
    "lib/nox-mesh-host/deno": "runtime 1.0\n",
    "lib/nox-mesh-host/nox-mesh-host.js": "bundle 1.0\n",
    "lib/nox-mesh-host/init/nox-mesh-host.service": "unit 1.0\n",
    "share/nox-mesh-host/substrate.lock": "substrate 1.0\n",
  };
  for (const [path, text] of Object.entries(files)) {
    await Deno.mkdir(join(w.prefix, path, ".."), { recursive: true });
    await Deno.writeTextFile(join(w.prefix, path), text);
  }
  // The upgrade unpacks version 2.0 over it, as `tar -xz -C PREFIX` of the next tarball does.
  const upgrade = join(w.dir, "upgrade");
  await Deno.writeTextFile(
    upgrade,
    `#!/bin/sh
set -eu
cd '${w.prefix}'
sed 's/^version=.*/version=2.0/' bin/nox-mesh-host > bin/nox-mesh-host.new
chmod 755 bin/nox-mesh-host.new && mv bin/nox-mesh-host.new bin/nox-mesh-host
for f in ${
      Object.keys(files).join(" ")
    }; do sed 's/1\.0/2.0/' "$f" > "$f.new" && mv "$f.new" "$f"; done
`,
    { mode: 0o755 },
  );
  await Deno.writeTextFile(
    join(w.plan, "steps"),
    (await Deno.readTextFile(join(w.plan, "steps"))).replace("UPGRADE", upgrade),
  );
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "2.0", "1.0"]);
  assert.equal(count(r.stderr, "rolling back to known-good 1.0"), 1, r.stderr);
  for (const [path, text] of Object.entries(files)) {
    assert.equal(await Deno.readTextFile(join(w.prefix, path)), text, `${path} rolled back`);
  }
  // The kept copy holds exactly the installation's files, relative to the prefix.
  const kept = join(w.state, "rollback", "1.0", "nox-mesh-host-1.0.tar.gz");
  const list = await new Deno.Command("tar", { args: ["-tzf", kept] }).output();
  assert.deepEqual(
    new TextDecoder().decode(list.stdout).trim().split("\n").filter((e) => !e.endsWith("/"))
      .sort(),
    ["bin/nox-mesh-host", ...Object.keys(files)].sort(),
  );
  await cleanup(w);
});

Deno.test("launcher: once the rolled-back version confirmed itself, a new incident may roll back again", async () => {
  const w = await makeWorld({
    steps: ["exit 1", "exit 1", "exit 1", "confirm exit 1", "exit 1", "exit 1", "wait"],
  });
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(count(r.stderr, "rolling back to known-good 1.0"), 2, r.stderr);
  assert.equal(await stateFile(w, "halted"), undefined);
  await cleanup(w);
});

Deno.test("launcher: a known-good that is not a version halts instead of being used as a path", async () => {
  const w = await makeWorld({ steps: ["exit 1", "exit 1", "exit 1", "wait"] });
  await Deno.writeTextFile(join(w.state, "known-good"), "../../etc\n");
  const r = await launch(w);
  assert.equal(r.code, 78, r.stderr);
  assert.match((await stateFile(w, "halted"))!, /holds '\.\.\/\.\.\/etc', which is not a version/);
  await cleanup(w);
});

Deno.test("launcher: rollback with a real pacman", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-pkgs-" });
  await Deno.chmod(dir, 0o755);
  const v1 = await buildStandInPackage(dir, "1.0");
  const v2 = await buildStandInPackage(dir, "2.0");

  /** A world whose host is the stand-in package 1.0 installed by pacman -S from a local repo. */
  async function pacmanWorld(steps: string[]) {
    const w = await makeWorld({ pkg: "pacman", steps });
    const r = await makePacmanRoot(w.dir, join(w.dir, "bin"));
    await publish(r, v1);
    await run(r.wrapper, ["-Sy", "--noconfirm", "nox-mesh-host"]);
    const upgrade = join(w.dir, "upgrade");
    await Deno.writeTextFile(
      upgrade,
      `#!/bin/sh\nset -e\ncp '${v2}' '${r.repo}/'\nrepo-add -q '${r.repo}/noxpk.db.tar.gz' '${r.repo}/${
        v2.split("/").pop()
      }'\n` +
        `pacman -Syy --noconfirm nox-mesh-host >&2\n`,
      { mode: 0o755 },
    );
    const plan = join(w.plan, "steps");
    await Deno.writeTextFile(plan, (await Deno.readTextFile(plan)).replaceAll("UPGRADE", upgrade));
    w.bin = join(r.root, "usr/bin/nox-mesh-host");
    w.env.NOX_MESH_HOST_BIN = w.bin;
    w.env.NOX_MESH_HOST_PKG_CACHE = r.cache;
    w.env.NOX_MESH_HOST_PKG_DB = join(r.root, "var/lib/pacman");
    return { w, r };
  }
  const upgradeThenCrash = ["confirm run UPGRADE exit 0", "exit 1", "exit 1", "exit 1"];

  await t.step("three crashes roll back exactly once, to exactly the kept 1.0 file", async () => {
    const { w, r } = await pacmanWorld([...upgradeThenCrash, "confirm wait"]);
    const run1 = await runUntilReady(w);
    assert.equal(run1.code, 0, run1.stderr);
    assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "2.0", "1.0"]);
    assert.equal(await installed(r), "nox-mesh-host 1.0-1");
    assert.equal(count(run1.stderr, "rolling back to known-good 1.0"), 1);
    const kept = join(w.state, "rollback/1.0/nox-mesh-host-1.0-1-any.pkg.tar.gz");
    assert.equal(await sha256(kept), await sha256(v1), "the kept file is the 1.0 package");
    assert.equal(
      await Deno.readTextFile(join(w.state, "rollback/1.0/checksum")),
      `${await sha256(v1)}\n`,
      "kept with the SHA-256 pacman's sync database recorded for it",
    );
    const pacLog = await Deno.readTextFile(join(r.root, "var/log/pacman.log"));
    assert.equal(count(pacLog, "downgraded nox-mesh-host (2.0-1 -> 1.0-1)"), 1);
    assert.equal(await stateFile(w, "failures"), "0", "1.0 confirmed itself after the rollback");
    assert.equal(await stateFile(w, "halted"), undefined);
    assert.equal(
      await stateFile(w, "rolled-back-from"),
      "2.0",
      "the version rolled back from is remembered, so the host refuses to install it again",
    );
    await cleanup(w);
  });

  await t.step(
    "a rolled-back version that crashes too halts, without a second rollback",
    async () => {
      const { w, r } = await pacmanWorld([
        ...upgradeThenCrash,
        "exit 1",
        "exit 1",
        "exit 1",
        "wait",
      ]);
      const res = await launch(w);
      assert.equal(res.code, 78, res.stderr);
      assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "2.0", "1.0", "1.0", "1.0"]);
      assert.equal(count(res.stderr, "rolling back to known-good"), 1);
      assert.match(
        (await stateFile(w, "halted"))!,
        /failed 3 more times after rolling back to 1\.0/,
      );
      assert.equal(await installed(r), "nox-mesh-host 1.0-1");
      assert.match((await stateFile(w, "halted"))!, /\(consecutive failures: 6\)$/);
      const again = await launch(w);
      assert.equal(again.code, 78, "still halted on the next start");
      assert.equal((await starts(w)).length, 7);
      // The counters went into the halted record: removing that one file is a fresh start.
      assert.equal(await stateFile(w, "failures"), undefined);
      assert.equal(await stateFile(w, "rolled-back"), undefined);
      await Deno.remove(join(w.state, "halted"));
      const fresh = await runUntilReady(w);
      assert.equal(fresh.code, 0, fresh.stderr);
      assert.equal(
        (await starts(w)).length,
        8,
        "it started the host again after a person cleared it",
      );
      await cleanup(w);
    },
  );

  await t.step("a kept copy swapped after it was kept is refused: the rollback halts", async () => {
    const { w, r } = await pacmanWorld([...upgradeThenCrash, "wait"]);
    const kept = join(w.state, "rollback/1.0/nox-mesh-host-1.0-1-any.pkg.tar.gz");
    // Whoever writes into rollback/ puts another (validly built) package there.
    await Deno.writeTextFile(
      join(w.dir, "upgrade"),
      (await Deno.readTextFile(join(w.dir, "upgrade"))) + `cp '${v2}' '${kept}'\n`,
    );
    const res = await launch(w);
    assert.equal(res.code, 78, res.stderr);
    assert.match(
      (await stateFile(w, "halted"))!,
      /kept package file .*nox-mesh-host-1\.0-1-any\.pkg\.tar\.gz does not match the checksum recorded when it was kept .*refusing to install it/,
    );
    assert.equal(await installed(r), "nox-mesh-host 2.0-1", "nothing was installed");
    assert.equal(count(res.stderr, "rolling back to known-good"), 0);
    await cleanup(w);
  });

  await t.step("a cached file that differs from pacman's record is never kept", async () => {
    const { w, r } = await pacmanWorld(["wait"]);
    await Deno.copyFile(v2, join(r.cache, "nox-mesh-host-1.0-1-any.pkg.tar.gz"));
    const res = await runUntilReady(w);
    assert.equal(res.code, 0, res.stderr);
    assert.match(
      res.stderr,
      /found no package file of nox-mesh-host 1\.0 with the checksum pacman recorded/,
    );
    assert.match(res.stderr, /WARNING: no package file of nox-mesh-host 1\.0 found to keep/);
    assert.equal(await stateFile(w, "rollback/1.0/checksum"), undefined);
    await cleanup(w);
  });

  await Deno.remove(dir, { recursive: true });
});

for (const apkVersion of APK_VERSIONS) {
  Deno.test(`launcher: rollback with apk (a stand-in replaying real apk-tools ${apkVersion} with the package split as abuild splits it)`, async (t) => {
    const pkgs = join(APK_SPLIT, "packages");
    const snapshot = (s: string, what: "installed" | "world") => apkSnapshot(apkVersion, s, what);
    const calls = async (w: { apk: string }) =>
      (await Deno.readTextFile(join(w.apk, "calls"))).trim().split("\n");
    /** An apk world whose UPGRADE step upgrades the host to 2.0-r0 as its adapter does. */
    async function apkWorld(steps: string[]) {
      const w = await makeApkSplitWorld({ steps, version: apkVersion });
      const plan = join(w.plan, "steps");
      await Deno.writeTextFile(
        plan,
        (await Deno.readTextFile(plan))
          .replaceAll("UPGRADE21", await apkUpgradeScript(w, "2.1-r0"))
          .replaceAll("UPGRADE", await apkUpgradeScript(w, "2.0-r0")),
      );
      return w;
    }
    const upgrade = "confirm run UPGRADE exit 0";
    const kept = (w: World, v: string, file: string) => join(w.state, "rollback", v, file);
    const same = async (a: string, b: string) =>
      assert.equal(await fileSha256(a), await fileSha256(b), `${a} is ${b}`);

    await t.step(
      "the build the host installed is kept from apk's --cache-dir, although a newer one is offered by then",
      async () => {
        const w = await apkWorld([upgrade, "confirm wait"]);
        const res = await runUntilReady(w);
        assert.equal(res.code, 0, res.stderr);
        assert.deepEqual(await starts(w), ["1.0", "2.0"]);
        // Kept at 2.0's first start, with 2.1 offered by then: `apk fetch nox-mesh-host`
        // would have brought 2.1 (fetch-a2-main), so only apk's own copy is the installed build.
        for (const p of ["nox-mesh-host-2.0-r0.apk", "nox-mesh-host-openrc-2.0-r0.apk"]) {
          await same(kept(w, "2.0", p), join(pkgs, p));
        }
        assert.equal(
          await stateFile(w, "rollback/2.0/checksum"),
          originPackages(snapshot("a2", "installed")).map((l) => {
            const [p, v, c] = l.split(" ");
            return `${c} ${p}-${v}.apk`;
          }).join("\n"),
        );
        const log = await calls(w);
        const upgraded = log.findIndex((c) => c.includes("nox-mesh-host=2.0-r0"));
        assert.ok(upgraded > 0, log.join("\n"));
        assert.ok(!log.slice(upgraded).some((c) => c.startsWith("fetch ")), log.join("\n"));
        assert.deepEqual([...Deno.readDirSync(join(w.state, "rollback/.apk-cache"))], []);
        await cleanup(w);
      },
    );

    await t.step(
      "three crashes roll back every package of the host's origin in one apk add: the init script stays, world pins only the host, and its next upgrade takes -openrc along",
      async () => {
        const w = await apkWorld([
          upgrade,
          "exit 1",
          "exit 1",
          "exit 1",
          "confirm run UPGRADE21 exit 0",
          "confirm wait",
        ]);
        const res = await runUntilReady(w);
        assert.equal(res.code, 0, res.stderr);
        assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "2.0", "1.0", "2.1"]);
        assert.equal(count(res.stderr, "rolling back to known-good 1.0"), 1);
        const log = await calls(w);
        const files = ["nox-mesh-host-1.0-r0.apk", "nox-mesh-host-openrc-1.0-r0.apk"]
          .map((f) => join(w.state, "rollback/1.0", f)).join(" ");
        assert.ok(log.includes(`verify ${files}`), log.join("\n"));
        assert.ok(log.includes(`add --no-progress ${files}`), log.join("\n"));
        assert.ok(!log.some((c) => c.includes("allow-untrusted")), "never --allow-untrusted");
        // What the real apk left after that add: -openrc 1.0 installed with its init script
        // (the main file alone purged it, rollback-a2-main), world pinned to both files.
        assert.match(snapshot("a3", "installed"), /^P:nox-mesh-host-openrc\nV:1\.0-r0$/m);
        assert.match(snapshot("a3", "installed"), /^F:etc\/init\.d\nR:nox-mesh-host$/m);
        assert.match(snapshot("a3", "world"), /^nox-mesh-host-openrc></m);
        // The launcher put -openrc's world entry back as it was (none): with its pin, apk
        // kept -openrc at 1.0 when the host next upgraded (upgrade-a3-kept).
        assert.doesNotMatch(snapshot("a3w", "world"), /openrc></);
        assert.match(snapshot("a3w", "world"), /^nox-mesh-host><Q1/m);
        // So the upgrade to 2.1 took -openrc along (the stand-in answered it from a3w).
        assert.deepEqual(
          originPackages(await Deno.readTextFile(w.db)),
          originPackages(snapshot("a4", "installed")),
        );
        assert.match(await Deno.readTextFile(w.db), /^P:nox-mesh-host-openrc\nV:2\.1-r0$/m);
        assert.equal(await stateFile(w, "rolled-back-from"), "2.0");
        await cleanup(w);
      },
    );

    await t.step(
      "a rollback apk stops part-way leaves world and the installed packages as they were, and halts saying so",
      async () => {
        const w = await apkWorld([upgrade, "run SQUATTER exit 1", "exit 1", "exit 1", "wait"]);
        const squatter = join(w.dir, "squatter");
        await Deno.writeTextFile(squatter, "#!/bin/sh\napk add --no-progress squatter >&2\n", {
          mode: 0o755,
        });
        const plan = join(w.plan, "steps");
        await Deno.writeTextFile(
          plan,
          (await Deno.readTextFile(plan)).replace("SQUATTER", squatter),
        );
        const res = await launch(w);
        assert.equal(res.code, 78, res.stderr);
        assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "2.0"]);
        const halted = (await stateFile(w, "halted"))!;
        assert.match(halted, /apk could not install the kept files of 1\.0/);
        assert.match(
          halted,
          /and the installed packages of nox-mesh-host are as before the rollback \(2\.0\)/,
        );
        // apk had downgraded both and pinned world to the 1.0 files (rollback-b1, then b2):
        assert.match(snapshot("b2", "world"), /^nox-mesh-host></m);
        // put back: world byte for byte, and the host's packages as they were before.
        assert.equal(await Deno.readTextFile(w.world), snapshot("b1", "world"));
        assert.deepEqual(
          originPackages(await Deno.readTextFile(w.db)),
          originPackages(snapshot("b1", "installed")),
        );
        assert.match(await Deno.readTextFile(w.bin), /^version=2\.0$/m);
        await cleanup(w);
      },
    );

    await t.step(
      "a kept copy that is missing is said to be missing (not a checksum mismatch): nothing changes, the launcher halts",
      async () => {
        const w = await apkWorld([upgrade, "exit 1", "exit 1", "exit 1", "wait"]);
        const plan = join(w.plan, "steps");
        const remove = join(w.dir, "remove");
        const file = kept(w, "1.0", "nox-mesh-host-1.0-r0.apk");
        await Deno.writeTextFile(remove, `#!/bin/sh\nrm '${file}'\n`, { mode: 0o755 });
        await Deno.writeTextFile(
          plan,
          (await Deno.readTextFile(plan)).replace("exit 1", `run ${remove} exit 1`),
        );
        const res = await launch(w);
        assert.equal(res.code, 78, res.stderr);
        const halted = (await stateFile(w, "halted"))!;
        assert.match(
          halted,
          /the kept package file .*\/rollback\/1\.0\/nox-mesh-host-1\.0-r0\.apk is missing \(its checksum list names it\)/,
        );
        assert.doesNotMatch(halted, /does not match the checksum/);
        assert.match(await Deno.readTextFile(w.bin), /^version=2\.0$/m, "2.0 is still installed");
        assert.equal(await Deno.readTextFile(w.world), snapshot("a2", "world"));
        assert.ok(!(await calls(w)).some((c) => c.startsWith("add --no-progress /")));
        await cleanup(w);
      },
    );

    for (
      const [file, reason] of [
        [
          "nox-mesh-host-2.0-r0.apk",
          /does not match the checksum recorded when it was kept \(Q1T\/pSyHYPLGAlJEgJZGmZfUS\/02Y=; now Q1m2egwQQayPD3kQgvfHUqX4aBcJk=\): refusing/,
        ],
        [
          "tampered-control.apk",
          /does not match the checksum recorded when it was kept \(Q1T\/pSyHYPLGAlJEgJZGmZfUS\/02Y=; now unreadable\): refusing/,
        ],
        // Altered data: apk 2.14 computes the same identity (the control segment is intact)
        // and apk verify refuses it; apk 3.0 cannot index it at all.
        [
          "tampered-data.apk",
          apkVersion === "2.14.10"
            ? /apk verify refused the kept package files of 1\.0 in .*: nothing was changed/
            : /\(Q1T\/pSyHYPLGAlJEgJZGmZfUS\/02Y=; now unreadable\): refusing/,
        ],
      ] as const
    ) {
      await t.step(
        `a kept copy replaced by ${file} is refused: nothing changes, the launcher halts`,
        async () => {
          const w = await apkWorld([upgrade, "exit 1", "exit 1", "exit 1", "wait"]);
          const plan = join(w.plan, "steps");
          const swap = join(w.dir, "swap");
          await Deno.writeTextFile(
            swap,
            `#!/bin/sh\ncp '${join(pkgs, file)}' '${kept(w, "1.0", "nox-mesh-host-1.0-r0.apk")}'\n`,
            { mode: 0o755 },
          );
          await Deno.writeTextFile(
            plan,
            (await Deno.readTextFile(plan)).replace("exit 1", `run ${swap} exit 1`),
          );
          const res = await launch(w);
          assert.equal(res.code, 78, res.stderr);
          assert.match((await stateFile(w, "halted"))!, reason);
          assert.deepEqual(await starts(w), ["1.0", "2.0", "2.0", "2.0"]);
          assert.match(await Deno.readTextFile(w.bin), /^version=2\.0$/m, "2.0 is still installed");
          assert.equal(await Deno.readTextFile(w.world), snapshot("a2", "world"));
          assert.equal(await Deno.readTextFile(w.db), snapshot("a2", "installed"));
          assert.ok(!(await calls(w)).some((c) => c.startsWith("add --no-progress /")));
          await cleanup(w);
        },
      );
    }
  });
}

/**
 * A tarball of `version` made with real GNU tar from a tree laid out as the release is
 * (bin/nox-mesh-host a stand-in answering `version`), plus `extra` (shell run in the
 * tree before packing) and `names` beyond the layout; returns its path.
 */
async function releaseTarball(
  w: World,
  version: string,
  { extra = "", names = [] as string[], flags = "" } = {},
): Promise<string> {
  const tree = await Deno.makeTempDir({ dir: w.dir, prefix: `tree-${version}-` });
  await Deno.mkdir(join(tree, "bin"));
  await Deno.mkdir(join(tree, "lib/nox-mesh-host"), { recursive: true });
  await writeStandIn(join(tree, "bin/nox-mesh-host"), version);
  await Deno.writeTextFile(join(tree, "lib/nox-mesh-host/VERSION"), `${version}\n`);
  const out = join(w.dir, `release-${version}-${crypto.randomUUID()}.tar.gz`);
  const r = await new Deno.Command("sh", {
    args: [
      "-c",
      `set -eu; cd "$1"; out=$2; shift 2; ${extra}
tar --format=gnu --no-recursion --owner=0 --group=0 --numeric-owner ${flags} -czf "$out" -- "$@"`,
      "sh",
      tree,
      out,
      "bin/nox-mesh-host",
      "lib/nox-mesh-host/VERSION",
      ...names,
    ],
  }).output();
  assert.ok(r.success, new TextDecoder().decode(r.stderr));
  return out;
}

/** What the host does when it stages (os/tarball-self): STATE/upgrade/{nox-mesh-host.tar.gz,staged}. */
async function stageScript(w: World, tarball: string, version: string, sha256?: string) {
  const sum = sha256 ?? await fileSha256(tarball);
  const script = join(w.dir, `stage-${crypto.randomUUID()}`);
  await Deno.writeTextFile(
    script,
    `#!/bin/sh\nset -eu\nmkdir -p '${w.state}/upgrade'\ncp '${tarball}' '${w.state}/upgrade/nox-mesh-host.tar.gz'\n` +
      `printf '%s %s\\n' '${sum}' '${version}' > '${w.state}/upgrade/staged'\n`,
    { mode: 0o755 },
  );
  return script;
}

Deno.test("launcher: an upgrade the host staged is unpacked beside the installation, switched by renames and started, after the installed version's copy was kept", async () => {
  const w = await makeWorld({ steps: ["confirm run STAGE exit 0", "confirm wait"] });
  const tarball = await releaseTarball(w, "2.0");
  const stage = await stageScript(w, tarball, "2.0");
  await Deno.writeTextFile(join(w.plan, "steps"), `confirm run ${stage} exit 0\nconfirm wait\n`);
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "2.0"], r.stderr);
  assert.equal(count(r.stderr, "applying the staged upgrade to nox-mesh-host 2.0"), 1, r.stderr);
  assert.match(await Deno.readTextFile(w.bin), /^version=2\.0$/m);
  assert.equal(
    await Deno.readTextFile(join(w.prefix, "lib/nox-mesh-host/VERSION")),
    "2.0\n",
  );
  assert.equal(await Deno.lstat(join(w.state, "upgrade")).catch(() => null), null, "stage removed");
  assert.equal(await stateFile(w, "upgrade-refused"), undefined);
  // Unpacked beside the installation and moved in by renames: nothing of that is left.
  for (const left of [".nox-mesh-host-upgrade", "lib/nox-mesh-host.old"]) {
    assert.equal(await Deno.lstat(join(w.prefix, left)).catch(() => null), null, left);
  }
  // The copy of 1.0 was made before 2.0 was unpacked: it holds the 1.0 program.
  const kept = join(w.state, "rollback", "1.0", "nox-mesh-host-1.0.tar.gz");
  const program = await new Deno.Command("tar", { args: ["-xzOf", kept, "bin/nox-mesh-host"] })
    .output();
  assert.match(new TextDecoder().decode(program.stdout), /^version=1\.0$/m);
  assert.ok(
    r.stderr.indexOf("kept the package file of nox-mesh-host 1.0") <
      r.stderr.indexOf("applying the staged upgrade"),
    r.stderr,
  );
  await cleanup(w);
});

Deno.test("launcher: a staged build that cannot even answer `version` crashes 3 times; the rollback records the version it came from, without asking that program", async () => {
  const w = await makeWorld({ steps: [] });
  // The installation as the tarball lays it down: its VERSION file beside the program.
  await Deno.mkdir(join(w.prefix, "lib/nox-mesh-host"), { recursive: true });
  await Deno.writeTextFile(join(w.prefix, "lib/nox-mesh-host/VERSION"), "1.0\n");
  const broken = await releaseTarball(w, "2.0", {
    extra: `printf '#!/bin/sh\\necho "broken: $*" >&2\\nexit 70\\n' > bin/nox-mesh-host`,
  });
  const stage = await stageScript(w, broken, "2.0");
  await Deno.writeTextFile(join(w.plan, "steps"), `confirm run ${stage} exit 0\nconfirm wait\n`);
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(count(r.stderr, "broken: run"), 3, r.stderr);
  assert.equal(count(r.stderr, "broken: version"), 0, "the broken program is never asked");
  assert.equal(count(r.stderr, "failed 3 times in a row: rolling back to known-good 1.0"), 1);
  assert.deepEqual(await starts(w), ["1.0", "1.0"]);
  assert.equal(
    await stateFile(w, "rolled-back-from"),
    "2.0",
    "the host will refuse to stage 2.0 again",
  );
  assert.equal(await Deno.readTextFile(join(w.prefix, "lib/nox-mesh-host/VERSION")), "1.0\n");
  await cleanup(w);
});

Deno.test("launcher: a host that stages what the launcher refuses and exits 0, start after start, is counted and rolled back, not restarted for ever", async () => {
  const w = await makeWorld({ steps: [] });
  await Deno.writeTextFile(join(w.state, "known-good"), "1.0\n");
  const stage = await stageScript(w, await releaseTarball(w, "2.0"), "2.0", "0".repeat(64));
  const steps = [`run ${stage} exit 0`, `run ${stage} exit 0`, `run ${stage} exit 0`];
  await Deno.writeTextFile(join(w.plan, "steps"), [...steps, "confirm wait"].join("\n") + "\n");
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "1.0", "1.0", "1.0"]);
  assert.equal(count(r.stderr, "REFUSED the staged upgrade"), 3, r.stderr);
  assert.equal(count(r.stderr, "upgraded itself"), 0, r.stderr);
  assert.equal(count(r.stderr, "failed 3 times in a row: rolling back to known-good 1.0"), 1);
  await cleanup(w);
});

/** A name holding a newline: busybox tar lists it raw, as two lines, the second one forged. */
const NEWLINE_NAME =
  "lib/nox-mesh-host/a\n-rw-r--r-- 0/0 1 2024-01-01 00:00:00 lib/nox-mesh-host/b";

const REFUSED_STAGES: [string, { extra?: string; names?: string[]; flags?: string }, RegExp][] = [
  [
    "a symbolic link",
    { extra: "ln -s /etc/shadow lib/nox-mesh-host/shadow", names: ["lib/nox-mesh-host/shadow"] },
    /is a link or a name with spaces/,
  ],
  [
    "a hard link",
    { extra: "ln bin/nox-mesh-host lib/nox-mesh-host/hard", names: ["lib/nox-mesh-host/hard"] },
    /is a link or a name with spaces/,
  ],
  [
    "a file outside the layout",
    {
      extra: "mkdir -p etc/cron.d && echo evil > etc/cron.d/evil",
      names: ["etc/cron.d/evil"],
    },
    /etc\/cron\.d\/evil is outside the tarball's layout/,
  ],
  [
    "a '..' component",
    { extra: "echo evil > x", names: ["lib/nox-mesh-host/../../x"], flags: "-P" },
    // GNU tar lists the name as stored; busybox lists (and would unpack) what follows the last '../'.
    /'\.\.' or '\.' component|x is outside the tarball's layout/,
  ],
  [
    "an absolute name",
    { names: ["/etc/passwd"], flags: "-P" },
    /etc\/passwd is outside the tarball's layout/,
  ],
  [
    "a './' prefix",
    { extra: "echo x > lib/nox-mesh-host/other", names: ["./lib/nox-mesh-host/other"] },
    /\.\/lib\/nox-mesh-host\/other is outside the tarball's layout/,
  ],
  [
    "a setuid program",
    {
      extra: "cp bin/nox-mesh-host lib/nox-mesh-host/su && chmod 4755 lib/nox-mesh-host/su",
      names: ["lib/nox-mesh-host/su"],
    },
    /has mode -rwsr-xr-x/,
  ],
  [
    "a name holding ' -> '",
    { extra: "echo x > 'lib/nox-mesh-host/y -> x'", names: ["lib/nox-mesh-host/y -> x"] },
    /is a link or a name with spaces/,
  ],
  [
    "a name holding a newline",
    {
      extra: `n=$(printf '%b' '${
        NEWLINE_NAME.replace("\n", "\\n")
      }'); mkdir -p "$(dirname "$n")"; echo x > "$n"`,
      names: [NEWLINE_NAME],
    },
    /a link or a name with spaces|names listed alone differ from its long listing/,
  ],
  [
    "a directory entry for bin/",
    { names: ["bin/"] },
    /directory bin\/ is outside the tarball's layout/,
  ],
  [
    "a second entry of one name, a symbolic link",
    {
      extra: "mkdir alt && ln -s /etc/shadow alt/VERSION",
      names: ["alt/VERSION"],
      flags: "--transform=s,^alt/,lib/nox-mesh-host/,",
    },
    /is a link or a name with spaces/,
  ],
];

/** The launcher's tar: GNU tar (Arch, Debian), or busybox tar (Alpine without GNU tar). */
const TARS = ["GNU tar", "busybox tar"] as const;

/** Puts busybox first on the world's PATH as `tar`, for `tar`. */
async function useTar(w: World, tar: typeof TARS[number]): Promise<void> {
  if (tar === "busybox tar") await Deno.symlink("/bin/busybox", join(w.dir, "bin", "tar"));
}

for (const tar of TARS) {
  for (
    const [what, how, reason] of [
      ["a checksum that does not match", {}, /its sha256 is [0-9a-f]{64}, not the recorded/],
      ...REFUSED_STAGES,
    ] as [string, { extra?: string; names?: string[]; flags?: string }, RegExp][]
  ) {
    Deno.test(`launcher (${tar}): a staged upgrade with ${what} is refused, removed and recorded; the installed version starts`, async () => {
      const w = await makeWorld({ steps: [] });
      await useTar(w, tar);
      const tarball = await releaseTarball(w, "2.0", how);
      const wrongSum = what.startsWith("a checksum") ? "0".repeat(64) : undefined;
      const stage = await stageScript(w, tarball, "2.0", wrongSum);
      await Deno.writeTextFile(join(w.plan, "steps"), `confirm run ${stage} exit 0\nwait\n`);
      const r = await runUntilReady(w);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(await starts(w), ["1.0", "1.0"], r.stderr);
      assert.match(await Deno.readTextFile(w.bin), /^version=1\.0$/m);
      assert.equal(
        await Deno.lstat(join(w.prefix, "lib")).catch(() => null),
        null,
        "nothing unpacked",
      );
      for (const other of ["etc", "x", "alt"]) {
        assert.equal(await Deno.lstat(join(w.prefix, other)).catch(() => null), null, other);
      }
      assert.equal(await Deno.lstat(join(w.state, "upgrade")).catch(() => null), null, "removed");
      const record = await stateFile(w, "upgrade-refused");
      const sum = wrongSum ?? await fileSha256(tarball);
      assert.ok(record?.startsWith(`${sum} 2.0: `), record);
      assert.match(record!, reason);
      assert.equal(count(r.stderr, "REFUSED the staged upgrade"), 1, r.stderr);
      assert.equal(await stateFile(w, "failures"), "1", "a refused stage is no upgrade: counted");
      await cleanup(w);
    });
  }
}

for (const tar of TARS) {
  Deno.test(`launcher (${tar}): a staged file the archive says another user owns is unpacked as root's`, async () => {
    const w = await makeWorld({ steps: [] });
    await useTar(w, tar);
    const tarball = await releaseTarball(w, "2.0", {
      flags: "--owner=4242 --group=4242",
      names: ["lib/nox-mesh-host/"],
    });
    const listed = await new Deno.Command("tar", { args: ["-tzvf", tarball] }).output();
    assert.match(new TextDecoder().decode(listed.stdout), /4242\/4242/);
    const stage = await stageScript(w, tarball, "2.0");
    await Deno.writeTextFile(join(w.plan, "steps"), `confirm run ${stage} exit 0\nconfirm wait\n`);
    const r = await runUntilReady(w);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(await starts(w), ["1.0", "2.0"], r.stderr);
    for (const f of ["bin/nox-mesh-host", "lib/nox-mesh-host/VERSION", "lib/nox-mesh-host"]) {
      const info = await Deno.lstat(join(w.prefix, f));
      assert.equal(`${info.uid}/${info.gid}`, "0/0", `${f} is owned by ${info.uid}/${info.gid}`);
    }
    await cleanup(w);
  });
}

Deno.test("launcher: links the host planted at the launcher's temporary and record files are never written through; a directory there is removed", async () => {
  const w = await makeWorld({ steps: [] });
  const outside = join(w.dir, "outside");
  await Deno.mkdir(outside);
  const victim = join(outside, "victim");
  await Deno.writeTextFile(victim, "untouched\n");
  const tarball = await releaseTarball(w, "2.0");
  const stage = await stageScript(w, tarball, "2.0", "0".repeat(64));
  // A buggy host may write the state directory (not upgrade-refused itself): it leaves a link
  // or a directory where the launcher writes its temporary, and a link to a directory where
  // the record goes.
  const plant = join(w.dir, "plant");
  await Deno.writeTextFile(
    plant,
    `#!/bin/sh\nset -eu\n'${stage}'\nmkdir '${w.state}/failures.tmp'\n` +
      `: >'${w.state}/failures.tmp/kept'\nln -s '${victim}' '${w.state}/restart-streak.tmp'\n` +
      `ln -s '${victim}' '${w.state}/upgrade-refused.tmp'\nln -s '${outside}' '${w.state}/upgrade-refused'\n`,
    { mode: 0o755 },
  );
  await Deno.writeTextFile(join(w.plan, "steps"), `run ${plant} exit 1\nwait\n`);
  const r = await runUntilReady(w);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await starts(w), ["1.0", "1.0"], r.stderr);
  assert.equal(await Deno.readTextFile(victim), "untouched\n", r.stderr);
  assert.deepEqual([...Deno.readDirSync(outside)].map((e) => e.name), ["victim"], r.stderr);
  for (
    const [file, text] of [["failures", /^1\n$/], ["upgrade-refused", /its sha256 is/]] as const
  ) {
    const info = await Deno.lstat(join(w.state, file));
    assert.ok(info.isFile, `${file} is a regular file`);
    assert.match(await Deno.readTextFile(join(w.state, file)), text);
  }
  await cleanup(w);
});
