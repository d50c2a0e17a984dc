/**
 * The confirm window for real: `run` as a process inside a network namespace that
 * reaches a real nats-server only through another namespace (tests/_node_net.ts), with
 * real nft, ip, wireguard-go and sysctl there. A pushed change that cuts the node off
 * its broker is undone when the window lapses, the serial is refused (reported once
 * the link is back, never applied again: not by the catch-up, a drift pass or a
 * restart); a harmless one is confirmed and stays; a later serial is taken normally.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { bundledMachine, runHost, type Scratch, scratch } from "./_helpers.ts";
import { Store } from "../src/store/store.ts";
import { META } from "../src/store/meta.ts";
import { fileResource, type HostProcess, type Mesh, spawnHost, startMesh, until } from "./_mesh.ts";
import { BROKER_ADDRESS, type NodeNet, nodeNet } from "./_node_net.ts";

type Report = Record<string, unknown>;

/** A window short enough for a test, long enough for a loaded machine's round trip. */
const WINDOW_S = 8;

const HARMLESS = `chain input {
  type filter hook input priority 0; policy accept;
  tcp dport 8081 drop
}`;
/** The example: everything the node sends is dropped, its broker included. */
const CUT = `chain output {
  type filter hook output priority -500; policy drop;
}`;

/**
 * What is established lives, the link's connection with it; every new connection the
 * node opens is dropped: it is cut off at its next reconnect.
 */
const NEW_DROPPED = `chain output {
  type filter hook output priority 0; policy accept;
  ct state new drop
}`;

function firewall(rules: string) {
  return { type: "firewall", id: "edge", family: "inet", table: "edge", rules };
}

function sysctl(value: number) {
  return { type: "sysctl", id: "ttl", key: "net.ipv4.ip_default_ttl", value };
}

/** A node enrolled through its namespace, with its scratch state. */
async function enrolled(mesh: Mesh, net: NodeNet, name: string, s: Scratch): Promise<void> {
  const run = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: net.token(await mesh.control.mintToken(name)),
    via: net.node.via,
  });
  assert.equal(run.code, 0, run.stderr);
}

function start(net: NodeNet, s: Scratch, extra: string[] = []): Promise<HostProcess> {
  return spawnHost(["run", "--heartbeat-interval", "1", ...extra], s.env, { source: true }, [
    ...net.node.via,
  ]);
}

const applied = (serial: number, trigger?: string) => (r: Report) =>
  r.kind === "apply" && r.serial === serial && (trigger === undefined || r.trigger === trigger);

/** The names of node-a's connections the broker holds. */
async function brokerConnections(mesh: Mesh, node: string): Promise<string[]> {
  const connz = await mesh.broker.monitor("connz?limit=1024");
  return ((connz.connections ?? []) as { name?: string }[])
    .map((c) => c.name ?? "")
    .filter((name) => name.includes(` ${node}`));
}

/** The node namespace's TCP sockets to its broker that are open or opening (ss states). */
async function socketsToBroker(net: NodeNet): Promise<string[]> {
  const out = await net.node.must(["ss", "-Htn", "state", "established", "state", "syn-sent"]);
  return out.split("\n").filter((line) => line.includes("10.254.0.1:4222"));
}

async function table(net: NodeNet): Promise<string> {
  const r = await net.node.exec(["nft", "list", "table", "inet", "edge"]);
  return r.code === 0 ? r.stdout : "(no table)";
}

Deno.test({
  name: "confirm: a pushed rule that cuts the node off is undone when the window lapses, " +
    "the whole serial with it; refused from then on, also after a restart; a harmless one stays",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using mesh = await startMesh({ ips: [BROKER_ADDRESS] });
    await using net = await nodeNet(mesh.broker.port);
    await using s = await scratch({ confirmWindowSeconds: WINDOW_S });
    await enrolled(mesh, net, "node-a", s);
    const ttl = (await net.node.must(["sysctl", "-n", "net.ipv4.ip_default_ttl"])).trim();
    let host = await start(net, s);
    try {
      await host.waitLog(/link: up to tls:\/\/10\.254\.0\.1:4222 as node-a/);
      const f = posix.join(s.root, "f");
      const g = posix.join(s.root, "g");

      // Serial 1: harmless, confirmed by the first heartbeat the broker answers.
      await mesh.control.declare("node-a", {
        version: 1,
        resources: [firewall(HARMLESS), fileResource("f", f, "one\n")],
      });
      assert.equal((await mesh.control.waitReport("node-a", applied(1))).outcome, "converged");
      await host.waitLog(/confirm: serial 1 confirmed/);

      // Serial 2: the cutting rule, beside a file changed, a file added, a sysctl changed.
      await mesh.control.declare("node-a", {
        version: 1,
        resources: [
          firewall(CUT),
          fileResource("f", f, "two\n"),
          fileResource("g", g, "new\n"),
          sysctl(Number(ttl) - 1),
        ],
      });
      await host.waitLog(/apply \(declaration, link serial 2\): converged/);
      assert.match(await table(net), /hook output priority -500; policy drop;/);

      // Reported once the link is back: refused, naming what changed.
      const refused = await mesh.control.waitReport(
        "node-a",
        (r) => r.kind === "refused" && r.serial === 2,
      );
      assert.equal(refused.reason, "unconfirmed");
      assert.match(
        String(refused.message),
        new RegExp(
          `no heartbeat within the confirm window \\(${WINDOW_S} s.*\\(firewall "edge", sysctl "ttl"\\).*` +
            `went back to serial 1.*serial 2 is refused from now on`,
        ),
      );
      assert.deepEqual(
        (refused.problems as Report[]).map((p) => p.message),
        [
          'firewall "edge" (firewall:inet edge): changed',
          'sysctl "ttl" (sysctl:net.ipv4.ip_default_ttl): changed',
        ],
      );
      const back = await mesh.control.waitReport("node-a", applied(1, "revert"));
      assert.equal(back.outcome, "converged", String(back.error));
      // The network first, then the rest as declared; what serial 2 added is removed.
      assert.deepEqual(
        (back.results as Report[]).filter((r) => r.outcome !== "unchanged").map((r) =>
          `${r.id}:${r.outcome}`
        ),
        ["ttl:removed", "edge:changed", "f:changed", "g:removed"],
      );
      assert.doesNotMatch(await table(net), /hook output/);
      assert.match(await table(net), /tcp dport 8081 drop/);
      assert.equal(await Deno.readTextFile(f), "one\n");
      await assert.rejects(Deno.stat(g), Deno.errors.NotFound);
      assert.equal((await net.node.must(["sysctl", "-n", "net.ipv4.ip_default_ttl"])).trim(), ttl);

      // A restart: the catch-up hands serial 2 over again; it is not applied.
      assert.equal(await host.stop(), 0);
      const firstLog = host.log();
      const status = await runHost(["status", "--json"], { env: s.env });
      assert.equal(JSON.parse(status.stdout).confirm.refused.serial, 2, status.stderr);
      assert.equal(JSON.parse(status.stdout).confirm.open, null);
      assert.match(
        (await runHost(["status"], { env: s.env })).stdout,
        /refused +serial 2 at .* \(not confirmed in time\)/,
      );
      host = await start(net, s, ["--drift-interval", "1"]);
      await host.waitLog(/serial 2 arrived again; it was refused when its confirm window lapsed/);
      await host.waitLog(/apply \(drift, link serial 1\): converged/);
      assert.doesNotMatch(host.log(), /serial 2\): /);
      assert.doesNotMatch(await table(net), /hook output/);
      const reports = await mesh.control.reports("node-a");
      const refusals = reports.filter((r) => r.kind === "refused");
      assert.equal(
        refusals.length,
        1,
        `reported once: ${JSON.stringify(refusals.map((r) => [r.serial, r.reason, r.id]))}\n` +
          firstLog + host.log(),
      );

      // A later serial is taken normally.
      await mesh.control.declare("node-a", {
        version: 1,
        resources: [firewall(HARMLESS.replace("8081", "8083")), fileResource("f", f, "three\n")],
      });
      assert.equal((await mesh.control.waitReport("node-a", applied(3))).outcome, "converged");
      await host.waitLog(/confirm: serial 3 confirmed/);
      assert.match(await table(net), /tcp dport 8083 drop/);
    } finally {
      await host[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name: "confirm: a rule that lets the link's connection live but drops new ones (ct state " +
    "new drop) is undone when the window lapses: a new connection must be made; the " +
    "node links up again after; no probe leaves a connection behind",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using mesh = await startMesh({ ips: [BROKER_ADDRESS] });
    await using net = await nodeNet(mesh.broker.port);
    await using s = await scratch({ confirmWindowSeconds: WINDOW_S });
    await enrolled(mesh, net, "node-a", s);
    let host = await start(net, s);
    try {
      await host.waitLog(/link: up to .* as node-a/);
      await mesh.control.declare("node-a", { version: 1, resources: [firewall(HARMLESS)] });
      await host.waitLog(/confirm: serial 1 confirmed: .* took a new connection/);
      // The probe's connection was closed: the broker holds the link's only.
      await until("one connection of node-a at the broker", async () => {
        const names = await brokerConnections(mesh, "node-a");
        return names.length === 1 ? names : undefined;
      });

      await mesh.control.declare("node-a", { version: 1, resources: [firewall(NEW_DROPPED)] });
      await host.waitLog(/apply \(declaration, link serial 2\): converged/);
      assert.match(await table(net), /ct state new drop/);
      // The link's connection still answers; the new one does not get through.
      await host.waitLog(/confirm: the link's connection answers, but a new one fails: /);
      const refused = await mesh.control.waitReport(
        "node-a",
        (r) => r.kind === "refused" && r.serial === 2,
      );
      assert.equal(refused.reason, "unconfirmed");
      assert.match(String(refused.message), /or took no new connection from the node/);
      const back = await mesh.control.waitReport("node-a", applied(1, "revert"));
      assert.equal(back.outcome, "converged", String(back.error));
      assert.doesNotMatch(host.log(), /serial 2 confirmed/);
      assert.doesNotMatch(await table(net), /ct state new/);
      assert.match(await table(net), /tcp dport 8081 drop/);
      // Every probe's attempt was closed, in the node's namespace as at the broker: only
      // the link's connection is left.
      await until("only the link's socket in the node's namespace", async () => {
        const sockets = await socketsToBroker(net);
        return sockets.length === 1 ? sockets : undefined;
      });
      assert.equal((await brokerConnections(mesh, "node-a")).length, 1);

      // The node can connect again: a new process links up through the path.
      assert.equal(await host.stop(), 0);
      host = await start(net, s);
      await host.waitLog(/link: up to .* as node-a/);
      await host.waitLog(/apply \(start, link serial 1\): converged/);
    } finally {
      await host[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name: "confirm: a host killed inside the window resumes it and lapses; one whose window " +
    "lapsed while it was down goes back at start, before anything is applied (a reboot)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using mesh = await startMesh({ ips: [BROKER_ADDRESS] });
    await using net = await nodeNet(mesh.broker.port);
    await using s = await scratch({ confirmWindowSeconds: WINDOW_S });
    await enrolled(mesh, net, "node-a", s);
    let host = await start(net, s);
    try {
      await host.waitLog(/link: up to .* as node-a/);
      await mesh.control.declare("node-a", { version: 1, resources: [firewall(HARMLESS)] });
      await host.waitLog(/confirm: serial 1 confirmed/);

      // Killed right after applying the cutting rule: the next process finds the window
      // open (the rule still loaded keeps its link down), lets it lapse, goes back.
      await mesh.control.declare("node-a", { version: 1, resources: [firewall(CUT)] });
      await host.waitLog(/apply \(declaration, link serial 2\): converged/);
      assert.equal(await host.stop("SIGKILL"), 137);
      const open = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout)
        .confirm.open;
      assert.deepEqual([open.serial, open.goesBackTo, open.changed], [2, 1, ['firewall "edge"']]);
      host = await start(net, s);
      await host.waitLog(
        /serial 2 changed what can cut this node off \(firewall "edge"\) and was not confirmed before the last process ended; it stands if the broker acknowledges a heartbeat and takes a new connection within \d+ s/,
      );
      assert.equal(
        (await mesh.control.waitReport("node-a", applied(1, "revert"))).outcome,
        "converged",
      );
      assert.equal(
        (await mesh.control.waitReport("node-a", (r) => r.kind === "refused" && r.serial === 2))
          .reason,
        "unconfirmed",
      );
      assert.doesNotMatch(await table(net), /hook output/);

      // Killed again after serial 3 cut it off; the machine reboots (the kernel forgets the
      // table) and comes back after the window: it goes back before applying anything.
      await mesh.control.declare("node-a", { version: 1, resources: [firewall(CUT)] });
      await host.waitLog(/apply \(declaration, link serial 3\): converged/);
      assert.equal(await host.stop("SIGKILL"), 137);
      await net.node.must(["nft", "delete", "table", "inet", "edge"]);
      await new Promise((resolve) => setTimeout(resolve, (WINDOW_S + 1) * 1000));
      host = await start(net, s);
      await host.waitLog(/serial 3 .* its window has lapsed: the node goes back to serial 1/);
      const first = await host.waitLog(/apply \((\w+), link serial (\d+)\)/);
      assert.deepEqual([first[1], first[2]], ["revert", "1"], host.log());
      await mesh.control.waitReport("node-a", (r) => r.kind === "refused" && r.serial === 3);
      await host.waitLog(/apply \(start, link serial 1\): converged/);
      assert.doesNotMatch(host.log(), /serial 3\): /);
      assert.match(await table(net), /tcp dport 8081 drop/);
      assert.doesNotMatch(await table(net), /hook output/);
    } finally {
      await host[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name: "confirm: an overlay address whose route takes the broker's path is undone; its " +
    "earlier address comes back",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using mesh = await startMesh({ ips: [BROKER_ADDRESS] });
    await using net = await nodeNet(mesh.broker.port);
    await using s = await scratch({ confirmWindowSeconds: WINDOW_S });
    await enrolled(mesh, net, "node-a", s);
    const name = `nkwg${crypto.randomUUID().slice(0, 6)}`;
    const overlay = (address: string) => ({
      type: "overlay",
      id: "mesh",
      interface: name,
      addresses: [address],
      listenPort: 51820,
      peers: [],
    });
    const addresses = async () =>
      (await net.node.must(["ip", "-o", "-4", "address", "show", "dev", name]))
        .match(/inet \S+/g)?.join(" ");
    await using host = await start(net, s);
    await host.waitLog(/link: up to .* as node-a/);
    await mesh.control.declare("node-a", { version: 1, resources: [overlay("10.77.0.1/24")] });
    await host.waitLog(/confirm: serial 1 confirmed/);
    assert.equal(await addresses(), "inet 10.77.0.1/24");

    // A /8 on the overlay routes 10.0.0.0/8, the broker's address with it, into WireGuard.
    await mesh.control.declare("node-a", { version: 1, resources: [overlay("10.77.0.1/8")] });
    await host.waitLog(/apply \(declaration, link serial 2\): converged/);
    const refused = await mesh.control.waitReport(
      "node-a",
      (r) => r.kind === "refused" && r.serial === 2,
    );
    assert.match(String(refused.message), /\(overlay "mesh"\) may have cut this node off/);
    assert.equal(await addresses(), "inet 10.77.0.1/24");
  },
});

Deno.test({
  name: "confirm: the bundle, applied offline, is never under the window (it is trusted)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using net = await nodeNet(1);
    await using s = await bundledMachine({ confirmWindowSeconds: 5 });
    await Deno.writeTextFile(
      s.bundle,
      JSON.stringify({ version: 1, resources: [firewall(CUT)] }),
    );
    await using host = await start(net, s, ["--drift-interval", "1"]);
    await host.waitLog(/apply \(start, bundle\): converged/);
    const since = Date.now();
    // Drift passes well past the window: the rule stays, nothing goes back.
    await until("a drift pass after the window", () => {
      const passes = host.log().match(/apply \(drift, bundle\): converged/g)?.length ?? 0;
      return Date.now() - since > 7000 && passes > 0 ? true : undefined;
    }, 60_000);
    assert.match(await table(net), /hook output priority -500; policy drop;/);
    assert.doesNotMatch(host.log(), /confirm:/);
    using store = Store.open(s.stateDir);
    assert.equal(store.meta(META.confirmPending), undefined);
  },
});
