/**
 * The Prometheus text file (host.json metricsFile) as the ecosystem reads it: a real
 * node_exporter (Debian's prometheus-node-exporter) with only its textfile collector,
 * on a loopback port, parses the file the running service writes (Prometheus's own
 * text parser: node_textfile_scrape_error says whether it could) and serves its values,
 * which follow an apply, a hold and a failed apply. The write never goes through a
 * symlink, and the path is held to the permission set's rules.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { metricsFacts, metricsText } from "../src/run/metrics.ts";
import { Store } from "../src/store/store.ts";
import { bundledMachine, runHost, scratch } from "./_helpers.ts";
import { fileResource, spawnHost, startMesh, until } from "./_mesh.ts";
import { count, hostLog, launch, makeWorld, RunningLauncher, waitFor } from "./_launcher_world.ts";
import { LAUNCHER_METRICS_FILE } from "../src/launcher_files.ts";

const EXPORTER = "/usr/bin/prometheus-node-exporter";

/** A node_exporter serving the textfile collector of `dir` on 127.0.0.1. */
async function nodeExporter(dir: string) {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const child = new Deno.Command(EXPORTER, {
    args: [
      "--collector.disable-defaults",
      "--collector.textfile",
      `--collector.textfile.directory=${dir}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const scrape = async (): Promise<string> => {
    const r = await fetch(`http://127.0.0.1:${port}/metrics`);
    return await r.text();
  };
  await until("node_exporter to answer", () => scrape().then(() => true, () => undefined), 30_000);
  return {
    scrape,
    /** The value of one sample, by its name and labels as node_exporter prints them. */
    async value(series: string): Promise<string | undefined> {
      const text = await scrape();
      const line = text.split("\n").find((l) => l.startsWith(`${series} `));
      return line?.slice(series.length + 1);
    },
    async [Symbol.asyncDispose]() {
      child.kill("SIGTERM");
      await child.output().catch(() => {});
    },
  };
}

/** Wait until node_exporter serves `series` with `value`; fails on a scrape error. */
async function serves(
  exporter: Awaited<ReturnType<typeof nodeExporter>>,
  series: string,
  value: string,
): Promise<void> {
  await until(`node_exporter to serve ${series} ${value}`, async () => {
    const text = await exporter.scrape();
    assert.match(text, /^node_textfile_scrape_error 0$/m, text);
    return text.split("\n").includes(`${series} ${value}`) ? true : undefined;
  }, 60_000);
}

Deno.test("metrics: node_exporter parses the file the service writes; its values follow an apply, a hold, a failed apply and the link", async () => {
  await using mesh = await startMesh();
  await using s = await bundledMachine();
  const textfiles = posix.join(s.root, "node-exporter");
  await Deno.mkdir(textfiles);
  const file = posix.join(textfiles, "nox_mesh_host.prom");
  const config = JSON.parse(await Deno.readTextFile(s.configPath));
  await Deno.writeTextFile(s.configPath, JSON.stringify({ ...config, metricsFile: file }));
  const enrolled = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken("node-m"),
  });
  assert.equal(enrolled.code, 0, enrolled.stderr);
  await using exporter = await nodeExporter(textfiles);
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/link: up to /);
  await serves(exporter, "nox_mesh_host_link_up", "1");
  const info = await exporter.scrape();
  assert.match(info, /^nox_mesh_host_info\{node="node-m",runtime="[0-9.]+",version="[^"]+"\} 1$/m);
  // When the link's TLS expires, as node_exporter serves it: the broker's certificate the
  // link came up with (30 days, the stand-in's) and the mesh's CA, in days left.
  const tls = await until("the TLS expiry series", async () => {
    const text = await exporter.scrape();
    return /^nox_mesh_host_broker_certificate_days_left\{/m.test(text) ? text : undefined;
  });
  assert.match(
    tls,
    /^nox_mesh_host_broker_certificate_days_left\{issuer="CN=nox-mesh stand-in CA",url="tls:\/\/127\.0\.0\.1:\d+"\} (29|30)$/m,
  );
  assert.match(
    tls,
    /^nox_mesh_host_trusted_ca_days_left\{ca="CN=nox-mesh stand-in CA",fingerprint="[0-9A-F:]{95}"\} (29|30)$/m,
  );
  const expiry = Number(
    /^nox_mesh_host_broker_certificate_expiry_timestamp_seconds\{[^}]*\} (\S+)$/m.exec(tls)?.[1],
  );
  assert.ok(expiry > Date.now() / 1000 + 28 * 86_400, `expiry ${expiry}`);
  const st = await Deno.lstat(file);
  assert.ok(st.isFile);
  assert.equal(st.mode! & 0o777, 0o644);

  const f = `${s.root}/f`;
  await mesh.control.declare("node-m", { version: 1, resources: [fileResource("f", f, "one\n")] });
  await serves(exporter, "nox_mesh_host_last_apply_serial", "1");
  assert.equal(await exporter.value('nox_mesh_host_last_apply_outcome{outcome="converged"}'), "1");
  assert.equal(await exporter.value('nox_mesh_host_last_apply_resources{result="changed"}'), "1");
  assert.equal(await exporter.value("nox_mesh_host_serial"), "1");
  assert.equal(await exporter.value("nox_mesh_host_resources_held"), "1");
  assert.equal(await exporter.value("nox_mesh_host_hold"), "0");
  const at = Number(await exporter.value("nox_mesh_host_last_apply_timestamp_seconds"));
  assert.ok(Math.abs(at - Date.now() / 1000) < 300, `${at}`);

  const held = await runHost(["hold", 'moving "disks"\\today'], {
    env: { ...s.env, SUDO_USER: "frank" },
  });
  assert.equal(held.code, 0, held.stderr);
  await serves(exporter, "nox_mesh_host_hold", "1");
  assert.equal(
    await exporter.value(
      'nox_mesh_host_hold_info{by="frank",reason="moving \\"disks\\"\\\\today"}',
    ),
    "1",
  );
  assert.equal((await runHost(["unhold"], { env: s.env })).code, 0);

  // A file whose directory does not exist: the apply fails.
  await mesh.control.declare("node-m", {
    version: 1,
    resources: [fileResource("f", f, "one\n"), fileResource("g", `${s.root}/none/g`, "x\n")],
  });
  await serves(exporter, "nox_mesh_host_last_apply_serial", "2");
  assert.equal(await exporter.value('nox_mesh_host_last_apply_outcome{outcome="failed"}'), "1");
  assert.equal(await exporter.value('nox_mesh_host_last_apply_outcome{outcome="converged"}'), "0");
  assert.equal(await exporter.value('nox_mesh_host_last_apply_resources{result="failed"}'), "1");
  assert.equal(await exporter.value("nox_mesh_host_hold"), "0");

  assert.equal(await host.stop("SIGTERM"), 0);
  await serves(exporter, "nox_mesh_host_link_up", "0");
});

Deno.test("metrics: node_exporter refuses a malformed file (the check above can fail)", async () => {
  await using s = await scratch();
  await using exporter = await nodeExporter(s.root);
  const good = metricsText({
    node: "n",
    version: "0.1.0",
    runtime: "2.9.6",
    lastApply: null,
    serial: null,
    linkUp: false,
    hold: { by: "a", reason: 'quote " and \\ and \n line', since: new Date().toISOString() },
    managedResources: 0,
  });
  await Deno.writeTextFile(posix.join(s.root, "good.prom"), good);
  await serves(exporter, "nox_mesh_host_hold", "1");
  // The same text with a label value's quote left unescaped.
  await Deno.writeTextFile(posix.join(s.root, "bad.prom"), good.replace('\\"', '"'));
  await until("a scrape error", async () => {
    const text = await exporter.scrape();
    return /^node_textfile_scrape_error 1$/m.test(text) ? true : undefined;
  });
});

Deno.test("metrics: a symlink put at the file's path is replaced, never written through", async () => {
  await using s = await scratch();
  const file = posix.join(s.root, "nox_mesh_host.prom");
  const victim = posix.join(s.dir, "victim");
  await Deno.writeTextFile(victim, "not the host's\n");
  await Deno.symlink(victim, file);
  await Deno.writeTextFile(
    s.configPath,
    JSON.stringify({ managedRoots: [s.root], metricsFile: file }),
  );
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await until("a regular file at the metrics path", async () => {
    const st = await Deno.lstat(file);
    return st.isFile ? true : undefined;
  });
  assert.equal(await Deno.readTextFile(victim), "not the host's\n");
  assert.match(await Deno.readTextFile(file), /^nox_mesh_host_link_up 0$/m);
  assert.equal(await host.stop("SIGTERM"), 0);
});

Deno.test("metrics: below a directory a user owns (node_exporter's, as Debian makes it), the file is written as that user; a directory of root's there is not written, and the log says why", async () => {
  const NOBODY = 65534;
  await using s = await scratch();
  await Deno.chmod(s.dir, 0o755);
  await Deno.chmod(s.root, 0o755);
  // Debian: /var/lib/prometheus is prometheus's, its node-exporter directory root's.
  const theirs = posix.join(s.root, "prometheus");
  await Deno.mkdir(posix.join(theirs, "node-exporter"), { recursive: true });
  await Deno.chown(theirs, NOBODY, NOBODY);
  const rootOwned = posix.join(theirs, "node-exporter", "nox_mesh_host.prom");
  await Deno.writeTextFile(
    s.configPath,
    JSON.stringify({ managedRoots: [s.root], metricsFile: rootOwned }),
  );
  {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
    await host.waitLog(
      /metrics: cannot write .*nox_mesh_host\.prom: .*the host acts there as nobody \(uid 65534\), who alone can change .*prometheus/,
    );
    assert.equal(await host.stop("SIGTERM"), 0);
  }
  assert.deepEqual([...Deno.readDirSync(posix.join(theirs, "node-exporter"))], []);
  // The directory made the user's: the file is written there, as that user.
  await Deno.chown(posix.join(theirs, "node-exporter"), NOBODY, NOBODY);
  await using exporter = await nodeExporter(posix.join(theirs, "node-exporter"));
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await serves(exporter, "nox_mesh_host_link_up", "0");
  const info = await Deno.lstat(rootOwned);
  assert.deepEqual([info.uid, info.gid, info.mode! & 0o777], [NOBODY, NOBODY, 0o644]);
  assert.equal(await host.stop("SIGTERM"), 0);
});

Deno.test("metrics: a metricsFile among the host's own files, outside the managed roots or not *.prom is refused (78)", async () => {
  await using s = await scratch();
  for (
    const [metricsFile, why] of [
      [posix.join(s.stateDir, "m.prom"), /lies among the host's own files/],
      [posix.join(s.dir, "elsewhere.prom"), /is outside the managed roots/],
      [posix.join(s.root, "m.txt"), /end the name with \.prom/],
      // The launcher's own file (it writes its state beside the metrics file).
      [posix.join(s.root, "nox_mesh_host_launcher.prom"), /lies among the host's own files/],
    ] as const
  ) {
    await Deno.writeTextFile(s.configPath, JSON.stringify({ managedRoots: [s.root], metricsFile }));
    const r = await runHost(["status"], { env: s.env });
    assert.equal(r.code, 78, r.stderr);
    assert.match(r.stderr, why);
  }
});

Deno.test("metrics: a declaration naming the launcher's file beside the metrics file is refused by name", async () => {
  await using s = await scratch();
  const metricsFile = posix.join(s.root, "textfiles", "nox_mesh_host.prom");
  await Deno.writeTextFile(s.configPath, JSON.stringify({ managedRoots: [s.root], metricsFile }));
  const launcher = posix.join(s.root, "textfiles", "nox_mesh_host_launcher.prom");
  const r = await runHost(["apply", "--json", "-"], {
    env: s.env,
    stdin: JSON.stringify({
      version: 1,
      resources: [{
        type: "file",
        id: "forged",
        path: launcher,
        content: 'nox_mesh_host_launcher_state{state="running"} 1\n',
        mode: "0644",
        owner: "root",
        group: "root",
      }],
    }),
  });
  assert.equal(r.code, 2, r.stdout + r.stderr);
  assert.match(r.stdout + r.stderr, /nox_mesh_host_launcher\.prom/);
  await assert.rejects(Deno.lstat(launcher), Deno.errors.NotFound);
});

Deno.test("metrics: an apply still running is not the last apply the file describes (it has no outcome yet)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-metrics-" });
  try {
    using store = Store.open(dir);
    const none = { changed: 1, unchanged: 0, removed: 0, forgotten: 0, failed: 0 };
    const first = store.beginApply("link", "x", 1, "sha256:1");
    store.finishApply(first, "converged", none);
    store.beginApply("link", "x", 2, "sha256:2"); // running: a heartbeat tick writes now
    const text = metricsText(metricsFacts(store, true));
    assert.match(text, /^nox_mesh_host_last_apply_serial 1$/m, text);
    assert.match(text, /^nox_mesh_host_last_apply_outcome\{outcome="converged"\} 1$/m, text);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ------------------------------------------------------------------ the launcher's file

/**
 * A launcher world (tests/_launcher_world.ts) whose host.json names a metricsFile in a
 * textfile directory only root can change (0755, the test runs as root), and a
 * node_exporter reading that directory.
 */
async function launcherWithExporter(steps: string[]) {
  const w = await makeWorld({ steps });
  const textfiles = posix.join(w.dir, "node-exporter");
  await Deno.mkdir(textfiles, { mode: 0o755 });
  await Deno.chmod(textfiles, 0o755);
  const config = posix.join(w.dir, "host.json");
  await Deno.writeTextFile(
    config,
    // As a person writes it: spread over lines, another key after it.
    `{\n  "metricsFile": "${textfiles}/nox_mesh_host.prom",\n  "driftIntervalSeconds": 60\n}\n`,
  );
  w.env.NOX_MESH_HOST_CONFIG = config;
  const exporter = await nodeExporter(textfiles);
  return {
    w,
    exporter,
    textfiles,
    file: posix.join(textfiles, LAUNCHER_METRICS_FILE),
    async [Symbol.asyncDispose]() {
      await exporter[Symbol.asyncDispose]();
      await Deno.remove(w.dir, { recursive: true });
    },
  };
}

const L = "nox_mesh_host_launcher";

Deno.test("metrics: node_exporter sees the launcher's state beside the host's: running with this incident's failures, then stopped", async () => {
  await using t = await launcherWithExporter(["exit 1", "exit 1", "wait"]);
  await Deno.writeTextFile(posix.join(t.w.state, "known-good"), "1.0\n");
  const l = new RunningLauncher(t.w);
  try {
    await waitFor(
      "the host to be ready",
      async () => (await hostLog(t.w)).some((x) => x.startsWith("ready")),
    );
    await serves(t.exporter, `${L}_state{state="running"}`, "1");
    assert.equal(await t.exporter.value(`${L}_state{state="restarting"}`), "0");
    assert.equal(await t.exporter.value(`${L}_halted`), "0");
    assert.equal(
      await t.exporter.value(`${L}_failures`),
      "2",
      "two failed starts in this incident",
    );
    assert.equal(await t.exporter.value(`${L}_rolled_back`), "0");
    assert.equal(await t.exporter.value(`${L}_started_info{version="1.0"}`), "1");
    const at = Number(await t.exporter.value(`${L}_updated_timestamp_seconds`));
    assert.ok(Math.abs(at - Date.now() / 1000) < 300, `${at}`);
    const st = await Deno.lstat(t.file);
    assert.ok(st.isFile);
    assert.equal(st.mode! & 0o777, 0o644);
  } finally {
    l.process.kill("SIGTERM");
    await l.exit();
  }
  await serves(t.exporter, `${L}_state{state="stopped"}`, "1");
  assert.equal(await t.exporter.value(`${L}_state{state="running"}`), "0");
});

Deno.test("metrics: node_exporter sees a halted node: halted, why, the version rolled back to and from", async () => {
  // Installed 2.0 fails 3 times (rolled back to the kept 1.0), 1.0 fails 3 more: halted.
  await using t = await launcherWithExporter(
    ["confirm exit 0", "exit 1", "exit 1", "exit 1", "exit 1", "exit 1", "exit 1"],
  );
  const upgrade = posix.join(t.w.dir, "upgrade");
  await Deno.writeTextFile(
    upgrade,
    `#!/bin/sh\nsed 's/^version=.*/version=2.0/' '${t.w.bin}' > '${t.w.bin}.new' && ` +
      `chmod 755 '${t.w.bin}.new' && mv '${t.w.bin}.new' '${t.w.bin}'\n`,
    { mode: 0o755 },
  );
  const plan = posix.join(t.w.plan, "steps");
  await Deno.writeTextFile(
    plan,
    (await Deno.readTextFile(plan)).replace("confirm exit 0", `confirm run ${upgrade} exit 0`),
  );
  const r = await launch(t.w);
  assert.equal(r.code, 78, r.stderr);
  await serves(t.exporter, `${L}_halted`, "1");
  const text = await t.exporter.scrape();
  assert.match(text, /^node_textfile_scrape_error 0$/m);
  assert.equal(await t.exporter.value(`${L}_state{state="halted"}`), "1");
  assert.equal(await t.exporter.value(`${L}_state{state="running"}`), "0");
  const reason = text.split("\n").find((l) => l.startsWith(`${L}_halted_info{reason="`));
  assert.ok(reason, text);
  assert.match(
    reason,
    /nox-mesh-host failed 3 more times after rolling back to 1\.0: the machine, not the version, needs a look \(consecutive failures: 6\)"\} 1$/,
  );
  assert.equal(await t.exporter.value(`${L}_failures`), "6");
  assert.equal(await t.exporter.value(`${L}_rolled_back{to="1.0"}`), "1");
  assert.equal(await t.exporter.value(`${L}_rolled_back_from{version="2.0"}`), "1");
  // The host's own metrics file in the same directory is not the launcher's business.
  await assert.rejects(Deno.lstat(posix.join(t.textfiles, "nox_mesh_host.prom")));

  // Started again while halted (a reboot): it refuses, and says so again, halted.
  await Deno.remove(t.file);
  const again = await launch(t.w);
  assert.equal(again.code, 78);
  await serves(t.exporter, `${L}_halted`, "1");
});

Deno.test("metrics: the launcher writes its file only in a directory only root can change, and never through a link", async () => {
  await using t = await launcherWithExporter(["wait"]);
  // A link at the file's name (to a file elsewhere) is replaced, not written through.
  const victim = posix.join(t.w.dir, "victim");
  await Deno.writeTextFile(victim, "# not the launcher's\n");
  await Deno.symlink(victim, t.file);
  const l = new RunningLauncher(t.w);
  try {
    await until("a regular file at the launcher's path", async () => {
      const st = await Deno.lstat(t.file);
      return st.isFile ? true : undefined;
    });
    await serves(t.exporter, `${L}_state{state="running"}`, "1");
    assert.equal(await Deno.readTextFile(victim), "# not the launcher's\n");
    // The launcher says "running" before it starts the host: stopped before the host has
    // set its traps, the host would die of the TERM without a word, and the count of
    // starts below would be one short (a loaded machine did that).
    await waitFor("the host to be ready", async () => (await hostLog(t.w)).includes("ready 1.0"));
  } finally {
    l.process.kill("SIGTERM");
    await l.exit();
  }
  // A directory others may write: nothing is written there, and the launcher says why once.
  await Deno.remove(t.file);
  await Deno.chmod(t.textfiles, 0o777);
  const again = new RunningLauncher(t.w);
  try {
    await waitFor(
      "the host to start again",
      async () => (await hostLog(t.w)).filter((x) => x.startsWith("start")).length === 2,
    );
  } finally {
    again.process.kill("SIGTERM");
  }
  const { stderr } = await again.exit();
  assert.equal(
    count(stderr, "not writing nox_mesh_host_launcher.prom in"),
    1,
    stderr,
  );
  await assert.rejects(Deno.lstat(t.file), Deno.errors.NotFound);
});

Deno.test("metrics: the launcher writes nothing where a user owns a directory above the textfile directory (Debian's /var/lib/prometheus is prometheus's)", async () => {
  await using t = await launcherWithExporter(["wait"]);
  // The textfile directory is root's and 0755, but the one above it is nobody's: nobody could
  // swap it for a link to any directory of root's between the launcher's look and its write.
  const owned = posix.join(t.w.dir, "prometheus");
  const textfiles = posix.join(owned, "node-exporter");
  await Deno.mkdir(textfiles, { recursive: true });
  await Deno.chmod(owned, 0o755);
  await Deno.chmod(textfiles, 0o755);
  await Deno.chown(owned, 65534, 65534);
  await Deno.writeTextFile(
    t.w.env.NOX_MESH_HOST_CONFIG,
    `{ "metricsFile": "${textfiles}/nox_mesh_host.prom" }\n`,
  );
  const l = new RunningLauncher(t.w);
  try {
    await waitFor(
      "the host to start",
      async () => (await hostLog(t.w)).some((x) => x.startsWith("start")),
    );
  } finally {
    l.process.kill("SIGTERM"); // also when the wait failed: no host left running
  }
  const { stderr } = await l.exit();
  assert.equal(count(stderr, `not writing nox_mesh_host_launcher.prom in ${textfiles}`), 1, stderr);
  await assert.rejects(
    Deno.lstat(posix.join(textfiles, LAUNCHER_METRICS_FILE)),
    Deno.errors.NotFound,
  );
});
