/**
 * Scenario steps for the link: the stand-in control plane on the lab's broker.
 * Every NATS client of the control plane runs in the broker's namespace
 * (`deno task mesh …` via nsenter), never in the host's own; the mesh state lives
 * in the lab's temp dir and goes with it.
 */
import { join } from "node:path";
import type { Lab } from "../lib/lab.ts";
import { bundle, CHECKOUT } from "../lib/bundle.ts";
import { HOST_INSTALLS, HOST_PATH, hostCommand, hostInstall } from "../lib/host.ts";
import { MACHINE_DENO } from "../lib/machine.ts";
import { fail, type Step, type StepContext } from "../lib/scenario.ts";
import { includeAuth, initClusterState, initState } from "../mesh/local_broker.ts";
import { JS_DOMAIN } from "../lib/cluster.ts";
import { newRouteCredentials } from "../lib/routes.ts";
import { run } from "../lib/_process.ts";
import { fingerprintOf } from "../lib/certs.ts";

/**
 * The unit the link scenarios run the installed host with (placed before boot as an
 * override of the package's unit, started by a step); no launcher and Restart=no, so
 * an exit stays visible. The PATH is the packaged unit's.
 */
export function hostUnit(heartbeatSeconds = 2, driftSeconds?: number): string {
  return `[Unit]
Description=nox-mesh-host run (lab; no launcher, so its exit stays visible)
After=network.target

[Service]
Type=exec
Environment=PATH=${HOST_PATH}
ExecStart=${HOST_INSTALLS.systemd.command} run --heartbeat-interval ${heartbeatSeconds}${
    driftSeconds ? ` --drift-interval ${driftSeconds}` : ""
  }
Restart=no
TimeoutStopSec=60
`;
}

/** Files every link scenario machine gets. */
export const HOST_UNIT_FILES = { "/etc/systemd/system/nox-mesh-host.service": hostUnit() };

function meshDir(lab: Lab): string {
  return join(lab.dir, "mesh");
}

/**
 * The stand-in control plane's permissions (as the `mesh` task in deno.json): it
 * runs nats-server and openssl and signals the broker to reload (Deno.kill wants
 * unscoped --allow-run), reads and writes its state, connects to the broker.
 */
export const MESH_FLAGS = [
  "--allow-read",
  "--allow-write",
  "--allow-net",
  "--allow-env=NOX_MESH_DIR",
  "--allow-run",
  "--allow-sys=hostname",
];

/**
 * The network namespace the control plane's clients run in: the lab broker's, or with
 * a cluster the first server's (the namespace stays when its nats-server is killed; the
 * control plane connects to every server).
 */
export function controlNetns(lab: Lab): string {
  const netns = lab.runningBroker?.netns ?? lab.runningCluster?.servers[0].netns;
  if (!netns) fail("a running lab broker or cluster", "none (set broker: true or meshUp)");
  return netns;
}

/** Runs `deno task mesh ARGS` in the control plane's namespace; returns stdout (fails on exit ≠ 0). */
export async function mesh(ctx: StepContext, args: string[], timeoutMs = 60_000): Promise<string> {
  const r = await run(["/usr/bin/nsenter", ...meshArgs(ctx, args)], {
    cwd: CHECKOUT,
    timeoutMs,
    check: false,
  });
  if (r.code !== 0) fail(`mesh ${args[0]} to succeed`, `exit ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/**
 * The arguments of `nsenter` that run `deno task mesh ARGS` (with the mesh's
 * permission flags) inside the control plane's network namespace, on this lab's mesh.
 */
export function meshArgs(ctx: StepContext, args: readonly string[]): string[] {
  return [
    `--net=/run/netns/${controlNetns(ctx.lab)}`,
    "--",
    "deno",
    "run",
    ...MESH_FLAGS,
    "lab/mesh/cli.ts",
    ...args,
    "--dir",
    meshDir(ctx.lab),
  ];
}

/** The control plane comes up: mesh state, the broker loads its users, the streams exist. */
export function meshUp(): Step {
  return {
    title: "the control plane comes up on the broker (users, permissions, streams)",
    async run(ctx) {
      const broker = ctx.lab.runningBroker ?? await ctx.lab.broker();
      const dir = meshDir(ctx.lab);
      await initState(dir, {
        url: broker.url,
        controlUrl: broker.addressUrl,
        caPem: broker.caPem,
        pin: await fingerprintOf(join(broker.dir, "server.pem")),
        pidFile: join(dir, "nats.pid"),
        logFile: join(broker.dir, "nats.log"),
      });
      await broker.reload(
        `pid_file: "${join(dir, "nats.pid")}"\n${includeAuth(join(broker.dir, "nats.conf"), dir)}`,
      );
      await mesh(ctx, ["streams"]);
      await serveObjects(ctx);
    },
  };
}

/**
 * The control plane's object service (`mesh serve-objects`) in its namespace for the rest
 * of the lab run: it answers the nodes' reads of the object store (each only for what its
 * declaration names). Stopped at the lab's teardown.
 */
async function serveObjects(ctx: StepContext): Promise<void> {
  const child = new Deno.Command("nsenter", {
    args: meshArgs(ctx, ["serve-objects"]),
    cwd: CHECKOUT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch { /* ended */ }
    await child.status;
  };
  ctx.lab.onTeardown(stop);
  const errors = new Response(child.stderr).text();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  while (!seen.includes("answering object reads")) {
    const { value, done } = await reader.read();
    if (done) fail("the control plane's object service to start", seen + (await errors));
    seen += value;
  }
  // What it says from now on is drained, so that it never blocks on a full pipe.
  (async () => {
    while (!(await reader.read()).done) { /* drained */ }
  })().catch(() => {});
}

/**
 * The control plane comes up on a three-server cluster in the lab network: its mesh
 * state names every server (tokens list all three), the servers start with its
 * accounts included, the streams are made with 3 replicas.
 */
export function meshUpCluster(): Step {
  return {
    title: "a three-server NATS cluster comes up with the control plane's accounts " +
      "(routes, JetStream with 3 replicas)",
    timeoutS: 180,
    async run(ctx) {
      const dir = meshDir(ctx.lab);
      // The routes' password, random per mesh: kept in mesh.json (0600) with the rest.
      const routes = newRouteCredentials();
      await ctx.lab.cluster({
        routes,
        async prepare(servers) {
          // The stand-in holds the CA's key (lab/lib/cluster.ts made it), so it can renew
          // the servers' certificates and rotate the CA (scenario certificates).
          const certs = join(ctx.lab.dir, "cluster");
          await initClusterState(
            dir,
            servers.map((s) => ({
              ...s,
              cert: {
                certFile: join(certs, `${s.name}.pem`),
                keyFile: join(certs, `${s.name}.key`),
                names: [`${s.name}.lab`],
                ips: [s.address],
              },
            })),
            {
              caPem: await Deno.readTextFile(join(certs, "ca.pem")),
              ca: {
                certFile: join(certs, "ca.pem"),
                keyFile: join(certs, "ca.key"),
                bundleFile: join(certs, "ca.pem"),
              },
              routes,
              domain: JS_DOMAIN,
            },
          );
          // Every server's configuration lies at the same depth: one relative include.
          return includeAuth(servers[0].configFile, dir);
        },
      });
      await mesh(ctx, ["streams"], 120_000);
      await serveObjects(ctx);
    },
  };
}

/** Mints a token for `node`; `keep` receives it (for a later reuse attempt). */
export function mintToken(node: string, keep: (token: string) => void): Step {
  return {
    title: `the control plane mints a one-time token for ${node}`,
    async run(ctx) {
      keep((await mesh(ctx, ["token", node])).trim());
    },
  };
}

/**
 * `nox-mesh-host enrol` on a machine with a token (a fresh one for `node`, or
 * `token()`), while a one-shot enrolment service answers in the broker's namespace.
 */
export function enrol(machine: string, node: string, token?: () => string): Step {
  return {
    title: `${machine} enrols as ${node}`,
    timeoutS: 120,
    async run(ctx) {
      const text = token ? token() : (await mesh(ctx, ["token", node])).trim();
      const serve = new Deno.Command("nsenter", {
        args: meshArgs(ctx, ["serve", "--once", "--timeout", "90"]),
        cwd: CHECKOUT,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      try {
        const reader = serve.stdout.pipeThrough(new TextDecoderStream()).getReader();
        let seen = "";
        while (!seen.includes("answering enrolments")) {
          const { value, done } = await reader.read();
          if (done) fail("the enrolment service to start", seen);
          seen += value;
        }
        const m = ctx.machine(machine);
        const r = await m.exec([hostCommand(m), "enrol", "--token", "-"], { input: text });
        if (r.code !== 0) fail("enrol to exit 0", `exit ${r.code}: ${r.stderr.trim()}`);
        reader.releaseLock();
      } finally {
        try {
          serve.kill("SIGTERM");
        } catch { /* it finished */ }
        await serve.output().catch(() => {});
      }
    },
  };
}

/** Starts the host's unit (HOST_UNIT) on a machine. */
export function startHost(machine: string): Step {
  return {
    title: `start nox-mesh-host run on ${machine}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(["systemctl", "start", "nox-mesh-host"]);
      if (r.code !== 0) fail("the unit to start", `exit ${r.code}: ${r.stderr.trim()}`);
    },
  };
}

/** Publishes a declaration (JSON value; node and serial filled in by the control plane). */
export function declare(node: string, declaration: unknown, serial?: number): Step {
  return {
    title: `the control plane publishes a declaration to ${node}${
      serial ? ` (serial ${serial})` : ""
    }`,
    async run(ctx) {
      const file = join(meshDir(ctx.lab), `declaration-${node}-${crypto.randomUUID()}.json`);
      await Deno.writeTextFile(file, JSON.stringify(declaration));
      await mesh(ctx, ["declare", node, file, ...(serial ? ["--serial", String(serial)] : [])]);
    },
  };
}

/**
 * The control plane puts `bytes` into the mesh's object store (`deno task mesh put`) and
 * hands the digest it prints to `keep`; with `as`, under that name instead (a tampered
 * object: other bytes under a digest a declaration names).
 */
export function putContent(
  what: string,
  bytes: () => Uint8Array,
  keep: (sha256: string) => void = () => {},
  as?: () => string,
): Step {
  return {
    title: `the control plane puts ${what} into the mesh's object store`,
    async run(ctx) {
      const file = join(meshDir(ctx.lab), `content-${crypto.randomUUID()}`);
      await Deno.writeFile(file, bytes());
      const out = await mesh(ctx, ["put", file, ...(as ? ["--as", as()] : [])]);
      const sha256 = out.trim();
      if (!/^[0-9a-f]{64}$/.test(sha256)) fail("a SHA-256 from mesh put", JSON.stringify(out));
      keep(sha256);
    },
  };
}

/** `node`'s last heartbeat (the broker keeps one per node); fails when there is none or it
 * was sent before `since()` (when given). */
async function lastHeartbeat(
  ctx: StepContext,
  node: string,
  since?: () => number,
): Promise<Record<string, unknown>> {
  const beat = JSON.parse(await mesh(ctx, ["heartbeat", node])) as Record<string, unknown> | null;
  if (!beat) fail("a heartbeat", "none");
  if (since && Date.parse(String(beat.at)) < since()) {
    fail(`one sent after ${new Date(since()).toISOString()}`, String(beat.at));
  }
  return beat;
}

/**
 * Asserts `node`'s last heartbeat reports `version` as its running version, and was sent
 * after `since()` (when given).
 */
export function assertRunningVersion(node: string, version: string, since?: () => number): Step {
  return {
    title: `assert ${node} heartbeats running version ${version}`,
    async run(ctx) {
      const beat = await lastHeartbeat(ctx, node, since);
      if (beat.version !== version) fail(`version ${version}`, `version ${beat.version}`);
    },
  };
}

/** Asserts the apply reports `node` sent are exactly for `serials` (in order), the last converged. */
export function assertApplies(node: string, serials: number[]): Step {
  return {
    title: `assert ${node} reported applies of serials ${serials.join(", ")}`,
    async run(ctx) {
      const reports = JSON.parse(await mesh(ctx, ["reports", node])) as Record<string, unknown>[];
      const applies = reports.filter((r) => r.kind === "apply" && r.serial !== null);
      const seen = applies.map((r) => `${r.serial}:${r.outcome}`).join(", ") || "none";
      const got = [...new Set(applies.map((r) => r.serial))];
      if (JSON.stringify(got) !== JSON.stringify(serials)) fail(`serials ${serials}`, seen);
      if (applies.at(-1)?.outcome !== "converged") fail("the last one converged", seen);
    },
  };
}

/**
 * Asserts `node` reported an apply of `serial` with `outcome`, whose error includes
 * `errorIncludes` (when given), and that this was its last apply report.
 */
export function assertLastApply(
  node: string,
  serial: number,
  outcome: "converged" | "failed",
  errorIncludes?: string,
): Step {
  return {
    title: `assert ${node}'s last apply report: serial ${serial} ${outcome}` +
      (errorIncludes ? ` ("${errorIncludes}")` : ""),
    async run(ctx) {
      const reports = JSON.parse(await mesh(ctx, ["reports", node])) as Record<string, unknown>[];
      const last = reports.filter((r) => r.kind === "apply").at(-1);
      const seen = last ? `serial ${last.serial} ${last.outcome}: ${last.error ?? ""}` : "none";
      if (last?.serial !== serial || last.outcome !== outcome) {
        fail(`serial ${serial} ${outcome}`, seen);
      }
      if (errorIncludes && !String(last.error ?? "").includes(errorIncludes)) {
        fail(`an error that says "${errorIncludes}"`, seen);
      }
    },
  };
}

/** Asserts `node`'s last heartbeat names `serial`, and was sent after `since()` (when given). */
export function assertHeartbeat(node: string, serial: number, since?: () => number): Step {
  return {
    title: `assert ${node} heartbeats with serial ${serial}`,
    async run(ctx) {
      const beat = await lastHeartbeat(ctx, node, since);
      if (beat.serial !== serial) fail(`serial ${serial}`, JSON.stringify(beat));
    },
  };
}

/** Asserts `node` sent no reports at all (e.g. nothing forged in its name). */
export function assertNoReports(node: string): Step {
  return {
    title: `assert the broker holds no report from ${node}`,
    async run(ctx) {
      const reports = await mesh(ctx, ["reports", node]);
      if (reports.trim() !== "[]") fail("none", reports.trim().slice(0, 300));
    },
  };
}

/** Asserts the host's unit on a machine exited on its own with status 0. */
export function assertHostExited(machine: string, code: number): Step {
  return {
    title: `assert nox-mesh-host on ${machine} exited with ${code}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec([
        "systemctl",
        "show",
        "-p",
        "ActiveState",
        "-p",
        "ExecMainStatus",
        "nox-mesh-host",
      ]);
      const seen = r.stdout.trim().replace(/\n/g, ", ");
      if (!/ActiveState=(inactive|failed)/.test(r.stdout)) fail("the unit to have stopped", seen);
      if (!new RegExp(`ExecMainStatus=${code}\\b`).test(r.stdout)) {
        fail(`exit status ${code}`, seen);
      }
    },
  };
}

/**
 * Asserts the host's journal on a machine contains `text` (after the last line
 * that contains `after`, when given).
 */
export function assertJournal(machine: string, text: string, after?: string): Step {
  return {
    title: `assert the journal of nox-mesh-host on ${machine} says "${text}"` +
      (after ? ` after "${after}"` : ""),
    async run(ctx) {
      const r = await ctx.machine(machine).exec([
        "journalctl",
        "-u",
        "nox-mesh-host",
        "--no-pager",
        "-o",
        "cat",
      ]);
      const from = after === undefined ? 0 : r.stdout.lastIndexOf(after);
      if (from < 0) fail(`"${after}" in the journal`, r.stdout.slice(-800));
      if (!r.stdout.slice(from).includes(text)) {
        fail(`"${text}" in the journal`, r.stdout.slice(-800));
      }
    },
  };
}

/**
 * From `machine`, with its own node key, tries to read `other`'s declarations and
 * to report as `other`; every attempt must be refused by the broker.
 */
export function assertConfined(machine: string, own: string, other: string): Step {
  return {
    title:
      `assert ${machine} (${own}) cannot read ${other}'s declarations nor report as ${other}, ` +
      `nor use the consumer API, nor steer a reply into ${other}'s subject or the JetStream API`,
    async run(ctx) {
      const last = async () => JSON.parse(await mesh(ctx, ["last", other]));
      const before = await last();
      const probe = join(ctx.lab.shareDir, "isolation-probe.js");
      await bundle("lab/mesh_steps/clients/isolation_probe.ts", probe);
      const broker = ctx.lab.runningBroker!;
      const r = await ctx.machine(machine).exec([
        MACHINE_DENO,
        "run",
        "--allow-net",
        "--allow-read",
        "--allow-env",
        "/lab/isolation-probe.js",
        broker.url,
        "/lab/broker-ca.pem",
        "/var/lib/mesh-host/node.nk",
        own,
        other,
      ]);
      let seen: Record<string, string>;
      try {
        seen = JSON.parse(r.stdout.trim().split("\n").pop() ?? "");
      } catch {
        fail("one JSON line from the probe", `exit ${r.code}: ${r.stderr.trim()}`);
      }
      const shown = JSON.stringify(seen);
      if (seen.ownDirectGet !== "ok") fail("its own declaration readable", shown);
      for (
        const key of [
          "otherDirectGet",
          "bodyDirectGet",
          "otherSubscribe",
          "otherPushSubscribe",
          "otherPublish",
          "consumerApi",
        ]
      ) {
        if (!/Permissions Violation/.test(seen[key] ?? "")) {
          fail(`${key} refused by the broker`, shown);
        }
      }
      if (seen.replyAbuses !== "sent") fail("the reply-subject abuses sent", shown);
      // The probe's own report went through the broker (so its reply subject was seen by
      // JetStream) before the other node's declaration and the stream are looked at.
      const deadline = Date.now() + 30_000;
      while (!(await mesh(ctx, ["reports", own])).includes('"abuse":"purge"')) {
        if (Date.now() > deadline) fail(`the probe's own report from ${own} to arrive`, "");
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      const after = await last();
      if (JSON.stringify(after) !== JSON.stringify(before)) {
        fail(
          `${other}'s stored declaration intact and MESH_DECL not purged`,
          `before ${JSON.stringify(before).slice(0, 300)}, after ${
            JSON.stringify(after).slice(0, 300)
          }`,
        );
      }
    },
  };
}

/** Replaces the host's bundle file in a machine the way a package manager does (rename over). */
export function replaceHostProgram(machine: string): Step {
  return {
    title: `replace the host's bundle on ${machine} (a new file renamed over it)`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const file = hostInstall(m).bundle;
      const r = await m.exec([
        "sh",
        "-c",
        `cp "$1" "$1.new" && mv -f "$1.new" "$1"`,
        "sh",
        file,
      ]);
      if (r.code !== 0) fail("the file replaced", `exit ${r.code}: ${r.stderr.trim()}`);
    },
  };
}

/** Remembers the time (for "after this" assertions). */
export function mark(keep: (ms: number) => void, title = "note the time"): Step {
  return {
    title,
    run() {
      keep(Date.now());
      return Promise.resolve();
    },
  };
}

/**
 * A person edits `path` on `machine` `times` times; after each edit the step waits
 * until the host's drift reconcile put `content` back (a drift repair each time).
 */
export function driftRepairs(machine: string, path: string, content: string, times: number): Step {
  return {
    title: `edit ${path} on ${machine} ${times} times, each repaired by the drift reconcile`,
    timeoutS: 30 + times * 20,
    async run(ctx) {
      const m = ctx.machine(machine);
      for (let i = 1; i <= times; i++) {
        await m.writeFile(path, `edited ${i}\n`);
        const deadline = Date.now() + 15_000;
        for (;;) {
          const r = await m.exec(["cat", path]);
          if (r.stdout === content) break;
          if (Date.now() > deadline) fail(`edit ${i} repaired within 15 s`, r.stdout.slice(0, 80));
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
    },
  };
}

/** The host's apply outcome lines in its journal: [trigger, outcome, changed]. */
async function journalApplies(ctx: StepContext, machine: string): Promise<string[]> {
  const r = await ctx.machine(machine).exec(
    ["journalctl", "-u", "nox-mesh-host", "--no-pager", "-o", "cat"],
  );
  return [...r.stdout.matchAll(/^apply \((\w+), [^)]*\): (\w+): (\d+) changed/gm)]
    .map((m) => `${m[1]}:${m[2]}:${m[3]}`);
}

/**
 * Asserts the control plane holds one report per apply the host logged, once
 * each and in the same order (trigger, outcome, changed count), each under its
 * own message id; at least `repairs` drift repairs and `failed` failed applies
 * among them. Run it after the host stopped, so both lists are final.
 */
export function assertReportsMatchJournal(
  machine: string,
  node: string,
  { repairs, failed }: { repairs: number; failed: number },
): Step {
  return {
    title: `assert ${node}'s reports are its journal's applies, once each, in order ` +
      `(≥ ${repairs} drift repairs, ${failed} failed)`,
    async run(ctx) {
      const records = JSON.parse(await mesh(ctx, ["reports", node, "--records"])) as {
        msgId: string | null;
        body: Record<string, unknown>;
      }[];
      const reports = records.filter((r) => r.body.kind === "apply");
      const got = reports.map((r) =>
        `${r.body.trigger}:${r.body.outcome}:${(r.body.counts as { changed: number }).changed}`
      );
      const want = await journalApplies(ctx, machine);
      const show = (xs: string[]) => `${xs.length}: ${xs.join(" ").slice(0, 600)}`;
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        fail(`the journal's applies ${show(want)}`, `reports ${show(got)}`);
      }
      const ids = reports.map((r) => r.msgId);
      if (reports.some((r) => r.msgId === null || r.msgId !== r.body.id)) {
        fail("every report under its Nats-Msg-Id (= its id)", JSON.stringify(ids.slice(0, 5)));
      }
      if (new Set(ids).size !== ids.length) fail("no message id twice", show(ids as string[]));
      const seqs = ids.map((id) => Number(String(id).split(".")[1]));
      if (seqs.some((n, i) => i > 0 && n <= seqs[i - 1])) {
        fail("ids in outbox order", show(ids as string[]));
      }
      const repaired = got.filter((g) => g === "drift:converged:1").length;
      if (repaired < repairs) fail(`≥ ${repairs} drift repairs`, `${repaired}`);
      const failures = got.filter((g) => g.includes(":failed:")).length;
      if (failures < failed) fail(`≥ ${failed} failed applies`, `${failures}`);
    },
  };
}

/**
 * Asserts `journalctl -u nox-mesh-host -p PRIORITY` on a machine shows `text`
 * (the host's <N> prefixes reached the journal as priorities).
 */
export function assertJournalPriority(machine: string, priority: string, text: string): Step {
  return {
    title: `assert journalctl -u nox-mesh-host -p ${priority} on ${machine} shows "${text}"`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec([
        "journalctl",
        "-u",
        "nox-mesh-host",
        "-p",
        priority,
        "--no-pager",
        "-o",
        "cat",
      ]);
      if (!r.stdout.includes(text)) fail(`"${text}" at ${priority} or above`, r.stdout.slice(-600));
      if (/ starting; state /.test(r.stdout)) {
        fail("no info lines at this priority", r.stdout.slice(-600));
      }
    },
  };
}
