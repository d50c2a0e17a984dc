/**
 * `deno task mesh …`: the stand-in control plane as a small CLI (tests and the
 * lab only; it is not part of the host).
 *
 *   up      --dir D [--listen HOST:PORT]   run a loopback broker + enrolment service (foreground)
 *   init    --dir D --url U [--control-url U] --ca FILE --cert FILE --pid-file F --log-file F
 *                                          state for a broker run elsewhere (the lab's)
 *   serve   --dir D [--once] [--timeout S] answer enrolments (foreground; --once: one, then exit)
 *   serve-objects --dir D                  answer the nodes' reads of the object store (each
 *                                          only for what its declaration names), until a signal
 *   streams --dir D                        make sure the streams and the nodes' consumers exist
 *   token   --dir D NODE [--ttl SECS]      mint a one-time enrolment token
 *   declare --dir D NODE FILE [--serial N] [--as-is] [--unsigned] [--valid-for SECS]
 *                                          publish a declaration to NODE, signed with the
 *                                          control plane's key (--unsigned: no signature;
 *                                          --valid-for: nodes refuse it SECS from now on)
 *   rotate-key --dir D [--no-republish]    a new signing key, the rotation to it signed by
 *                                          the current one; every node's last declaration
 *                                          published again under the new key (JSON)
 *   renew-cert --dir D                     every server's certificate issued again under the
 *                                          mesh's CA (a new key, same names), servers reloaded
 *   rotate-ca --dir D [--overlap SECS]     a new CA, trusted by the nodes beside the current
 *                                          one until SECS from now (3600): a signed trust
 *                                          update sent with every node's last declaration
 *   withdraw-ca --dir D                    the rotation's end: every server's certificate
 *                                          issued by the new CA, the old CA dropped (JSON)
 *   put     --dir D FILE [--as SHA256]     put FILE into the mesh's object store, named by its
 *                                          SHA-256, which it prints (--as: under another
 *                                          name, to put a tampered object in a test)
 *   nodes   --dir D [--json]               admitted nodes, their last heartbeat and inventory
 *   last    --dir D NODE                   NODE's stored declaration and MESH_DECL's size (JSON)
 *   reports --dir D NODE [--records]       NODE's reports kept by the broker (JSON array;
 *                                          --records: {seq, msgId, body} each)
 *   heartbeat --dir D NODE                 NODE's last heartbeat (JSON, or null)
 *   watch   --dir D [NODE]                 print reports and heartbeats as they arrive
 *   revoke  --dir D NODE                   stop admitting NODE's key
 *   tokens  --dir D NODE... [--via LEAF]   one-time tokens for several nodes (JSON: node → token);
 *                                          --via: the tokens name that site's leaf server
 *   serve   --dir D --count N [--timeout S] answer N enrolments, then exit
 *   rollout --dir D FILE --serial N NODE... [--timeout S] [--pause-after K --pause-ms MS]
 *                                          publish FILE ({{node}} replaced) to each node, wait
 *                                          for each apply report of serial N (JSON rows)
 *   rollout-host --dir D --version V [--running V] [--sha256 H --size N] [--upgrade full]
 *           [--canary K] [--batch B] [--silence S] [--timeout S] NODE...
 *                                          a staged rollout of the host's version: the first K
 *                                          nodes, then B at a time, each batch waiting for its
 *                                          nodes' heartbeats of the new running version; stops
 *                                          (exit 1) on silence, a rollback or a failed apply,
 *                                          naming the nodes (JSON result)
 *   tally   --dir D NODE...                each node's apply reports (serials, duplicate ids)
 *   placement --dir D                      each stream's leader and replicas (JSON)
 *   stepdown --dir D STREAM                the leader of STREAM steps down (another is elected)
 *
 * D defaults to $NOX_MESH_DIR.
 */
import { parseArgs } from "node:util";
import { initState, startLocalBroker } from "./local_broker.ts";
import { fingerprintOf } from "../lib/certs.ts";
import { ControlPlane } from "./control.ts";
import { readState } from "./state.ts";
import { placement, rollout, stepDown, tallyReports } from "./fleet.ts";
import { rolloutHost } from "./rollout.ts";

const { values, positionals } = parseArgs({
  args: Deno.args,
  allowPositionals: true,
  options: {
    dir: { type: "string" },
    listen: { type: "string" },
    url: { type: "string" },
    "control-url": { type: "string" },
    ca: { type: "string" },
    cert: { type: "string" },
    "pid-file": { type: "string" },
    "log-file": { type: "string" },
    ttl: { type: "string" },
    serial: { type: "string" },
    "as-is": { type: "boolean" },
    records: { type: "boolean" },
    unsigned: { type: "boolean" },
    "valid-for": { type: "string" },
    "no-republish": { type: "boolean" },
    overlap: { type: "string" },
    json: { type: "boolean" },
    once: { type: "boolean" },
    count: { type: "string" },
    via: { type: "string" },
    "pause-after": { type: "string" },
    "pause-ms": { type: "string" },
    timeout: { type: "string" },
    as: { type: "string" },
    version: { type: "string" },
    running: { type: "string" },
    sha256: { type: "string" },
    size: { type: "string" },
    upgrade: { type: "string" },
    canary: { type: "string" },
    batch: { type: "string" },
    silence: { type: "string" },
  },
});
const [command, ...args] = positionals;
const dir = values.dir ?? Deno.env.get("NOX_MESH_DIR");

function fail(message: string, code = 64): never {
  console.error(`mesh: ${message}`);
  Deno.exit(code);
}

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    for (const s of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(s, () => resolve());
  });
}

if (!command) {
  fail("usage: deno task mesh up|init|serve|token|declare|nodes|watch|revoke --dir D …");
}
if (!dir) fail("name the mesh directory: --dir D (or NOX_MESH_DIR)");

switch (command) {
  case "up": {
    const [host, port] = (values.listen ?? "127.0.0.1:4222").split(":");
    if (!host.startsWith("127.")) {
      fail("up listens on loopback only (127.x); the lab runs brokers in namespaces");
    }
    const broker = await startLocalBroker(dir, { host, port: Number(port) });
    const control = await ControlPlane.open(dir);
    control.serveEnrolments((line) => console.log(line));
    control.serveObjects((line) => console.log(line));
    console.log(`broker ${broker.url} (pid ${broker.pid}); state in ${dir}; Ctrl-C stops it`);
    await untilSignal();
    await control.close();
    await broker.stop();
    break;
  }
  case "init": {
    if (!values.url || !values.ca || !values.cert || !values["pid-file"] || !values["log-file"]) {
      fail("init needs --url, --ca, --cert, --pid-file and --log-file");
    }
    await initState(dir, {
      url: values.url,
      controlUrl: values["control-url"] ?? values.url,
      caPem: await Deno.readTextFile(values.ca),
      pin: await fingerprintOf(values.cert),
      pidFile: values["pid-file"],
      logFile: values["log-file"],
    });
    console.log(`mesh state in ${dir}; include ${dir}/auth.conf in the broker's configuration`);
    break;
  }
  case "serve": {
    const control = await ControlPlane.open(dir);
    let answered: () => void = () => {};
    const one = new Promise<void>((resolve) => answered = resolve);
    let left = values.once ? 1 : Number(values.count ?? 0);
    control.serveEnrolments((line) => {
      console.log(line);
      // --once: after the first answer; --count N: after N admitted nodes.
      if ((values.once || line.startsWith("enrolled ")) && --left <= 0) answered();
    });
    console.log("answering enrolments");
    const limit = values.timeout === undefined ? undefined : Number(values.timeout) * 1000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<"expired">((resolve) => {
      if (limit !== undefined) timer = setTimeout(() => resolve("expired"), limit);
    });
    const end = await Promise.race([
      values.once || values.count ? one : untilSignal(),
      untilSignal(),
      expired,
    ]);
    clearTimeout(timer);
    await control.close();
    if (end === "expired") fail(`no enrolment within ${values.timeout} s`, 1);
    Deno.exit(0);
    break;
  }
  case "serve-objects": {
    const control = await ControlPlane.open(dir);
    control.serveObjects((line) => console.error(line));
    await control.nc.flush();
    console.log("answering object reads");
    await untilSignal();
    await control.close();
    Deno.exit(0);
    break;
  }
  case "streams": {
    await using _control = await ControlPlane.open(dir);
    console.log("streams ready");
    break;
  }
  case "last": {
    const [node] = args;
    if (!node) fail("last NODE");
    await using control = await ControlPlane.open(dir);
    console.log(JSON.stringify({
      declaration: (await control.lastDeclaration(node)) ?? null,
      streamMessages: await control.streamMessages("MESH_DECL"),
    }));
    break;
  }
  case "reports": {
    const [node] = args;
    if (!node) fail("reports NODE");
    await using control = await ControlPlane.open(dir);
    // --records: each with its stream sequence and message id (Nats-Msg-Id).
    console.log(
      JSON.stringify(
        values.records ? await control.reportRecords(node) : await control.reports(node),
      ),
    );
    break;
  }
  case "heartbeat": {
    const [node] = args;
    if (!node) fail("heartbeat NODE");
    await using control = await ControlPlane.open(dir);
    console.log(JSON.stringify((await control.lastHeartbeat(node)) ?? null));
    break;
  }
  case "token": {
    const [node] = args;
    if (!node) fail("token NODE");
    await using control = await ControlPlane.open(dir);
    console.log(await control.mintToken(node, Number(values.ttl ?? 3600)));
    break;
  }
  case "declare": {
    const [node, file] = args;
    if (!node || !file) fail("declare NODE FILE");
    await using control = await ControlPlane.open(dir);
    const bytes = await Deno.readFile(file);
    const validFor = values["valid-for"];
    if (validFor !== undefined && !/^[1-9]\d*$/.test(validFor)) {
      fail(`--valid-for is "${validFor}": give a whole number of seconds`);
    }
    const sign = {
      ...(values.unsigned ? { signWith: null } : {}),
      ...(validFor ? { notAfter: new Date(Date.now() + Number(validFor) * 1000) } : {}),
    };
    const result = values["as-is"]
      ? await control.declare(node, bytes, sign)
      : await control.declare(node, JSON.parse(new TextDecoder().decode(bytes)), {
        serial: values.serial === undefined ? undefined : Number(values.serial),
        ...sign,
      });
    console.log(
      `published to ${node}: serial ${result.serial ?? "(as is)"}, stream seq ${result.seq}`,
    );
    break;
  }
  case "put": {
    const [file] = args;
    if (!file) fail("put FILE [--as SHA256]");
    await using control = await ControlPlane.open(dir);
    const bytes = await Deno.readFile(file);
    console.log(await control.putContent(bytes, values.as ? { name: values.as } : {}));
    break;
  }
  case "nodes": {
    await using control = await ControlPlane.open(dir);
    const state = await readState(dir);
    const rows = [];
    for (const [node, record] of Object.entries(state.nodes)) {
      rows.push({
        node,
        ...record,
        heartbeat: await control.lastHeartbeat(node) ?? null,
        inventory: await control.lastInventory(node) ?? null,
      });
    }
    if (values.json) console.log(JSON.stringify(rows));
    else {
      for (const r of rows) {
        const hb = r.heartbeat as Record<string, unknown> | null;
        console.log(
          `${r.node.padEnd(20)} ${r.revoked ? "revoked " : ""}serial ${r.serial}  ` +
            (hb
              ? `heard ${hb.at}: ${hb.version}, last ${JSON.stringify(hb.last)}, held ${
                JSON.stringify(hb.held)
              }`
              : "never heard from"),
        );
        const inv = r.inventory as Record<string, unknown> | null;
        if (inv) {
          const p = inv.profile as { os?: { id?: string }; architecture?: string } | undefined;
          console.log(
            `${"".padEnd(20)} inventory ${inv.at}: ${p?.os?.id ?? "?"} ${
              p?.architecture ?? "?"
            }, ` +
              `held ${(inv.held as unknown[] | undefined)?.length ?? 0}, overlay key ${
                inv.overlayKey ?? "none"
              }`,
          );
        }
      }
    }
    break;
  }
  case "watch": {
    const control = await ControlPlane.open(dir);
    control.watch(
      (m) => console.log(`${m.node} ${m.kind} ${JSON.stringify(m.body)}`),
      args[0] ?? "*",
    );
    await untilSignal();
    await control.close();
    break;
  }
  case "rotate-key": {
    await using control = await ControlPlane.open(dir);
    console.log(JSON.stringify(await control.rotateKey({ republish: !values["no-republish"] })));
    break;
  }
  case "renew-cert": {
    await using control = await ControlPlane.open(dir);
    console.log(JSON.stringify(await control.renewCertificates()));
    break;
  }
  case "rotate-ca": {
    const overlap = values.overlap ?? "3600";
    if (!/^[1-9]\d*$/.test(overlap)) {
      fail(`--overlap is "${overlap}": give a whole number of seconds`);
    }
    await using control = await ControlPlane.open(dir);
    console.log(JSON.stringify(await control.rotateCa({ overlapSeconds: Number(overlap) })));
    break;
  }
  case "withdraw-ca": {
    await using control = await ControlPlane.open(dir);
    console.log(JSON.stringify(await control.withdrawOldCa()));
    break;
  }
  case "revoke": {
    const [node] = args;
    if (!node) fail("revoke NODE");
    await using control = await ControlPlane.open(dir);
    await control.revoke(node);
    console.log(`${node} revoked`);
    break;
  }
  case "tokens": {
    if (args.length === 0) fail("tokens NODE...");
    await using control = await ControlPlane.open(dir);
    console.log(
      JSON.stringify(await control.mintTokens(args, Number(values.ttl ?? 3600), values.via)),
    );
    break;
  }
  case "rollout": {
    const [file, ...nodes] = args;
    if (!file || nodes.length === 0 || values.serial === undefined) {
      fail("rollout FILE --serial N NODE...");
    }
    await using control = await ControlPlane.open(dir);
    const rows = await rollout(
      control,
      nodes,
      await Deno.readTextFile(file),
      Number(values.serial),
      Number(values.timeout ?? 120) * 1000,
      (line) => console.error(line),
      values["pause-after"] === undefined
        ? undefined
        : { after: Number(values["pause-after"]), ms: Number(values["pause-ms"] ?? 2000) },
    );
    console.log(JSON.stringify(rows));
    break;
  }
  case "rollout-host": {
    const nodes = args;
    if (!values.version || nodes.length === 0) {
      fail(
        "rollout-host --version V [--running V] [--sha256 H --size N] [--upgrade full] " +
          "[--canary K] [--batch B] [--silence S] [--timeout S] NODE...",
      );
    }
    if ((values.sha256 === undefined) !== (values.size === undefined)) {
      fail("--sha256 and --size go together (the tarball in the object store)");
    }
    if (values.upgrade !== undefined && values.upgrade !== "full") fail("--upgrade takes full");
    const whole = (name: string, text: string | undefined, fallback: number) => {
      const n = Number(text ?? fallback);
      if (!Number.isSafeInteger(n) || n < 1) fail(`--${name} must be a whole number ≥ 1`);
      return n;
    };
    await using control = await ControlPlane.open(dir);
    const canary = whole("canary", values.canary, 1);
    const result = await rolloutHost(control, nodes, {
      version: values.version,
      ...(values.running ? { running: values.running } : {}),
      ...(values.sha256
        ? { contentSha256: values.sha256, size: whole("size", values.size, 0) }
        : {}),
      ...(values.upgrade ? { upgrade: "full" as const } : {}),
      canary,
      batch: whole("batch", values.batch, 2 * canary),
      silenceMs: whole("silence", values.silence, 120) * 1000,
      batchTimeoutMs: whole("timeout", values.timeout, 600) * 1000,
    }, (line) => console.error(`rollout: ${line}`));
    console.log(JSON.stringify(result));
    if (result.outcome === "stopped") {
      console.error(
        `mesh: the rollout of ${result.version} stopped at ${result.batches.at(-1)!.name}: ${
          result.stoppedBy.map((s) => `${s.node} ${s.why}: ${s.detail}`).join("; ")
        }${result.untouched.length ? `; never declared it: ${result.untouched.join(", ")}` : ""}`,
      );
      Deno.exit(1);
    }
    break;
  }
  case "tally": {
    if (args.length === 0) fail("tally NODE...");
    await using control = await ControlPlane.open(dir);
    console.log(JSON.stringify(await tallyReports(control, args)));
    break;
  }
  case "placement": {
    await using control = await ControlPlane.open(dir);
    console.log(JSON.stringify(await placement(control)));
    break;
  }
  case "stepdown": {
    if (args.length !== 1) fail("stepdown STREAM");
    await using control = await ControlPlane.open(dir);
    await stepDown(control, args[0]);
    break;
  }
  default:
    fail(`unknown command ${command}`);
}
