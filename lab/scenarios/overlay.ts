import { type Scenario, waitFor } from "../lib/scenario.ts";
import { fail, shown, type Step } from "../lib/_step.ts";
import { hostCommand } from "../lib/host.ts";
import {
  assertLastApply,
  declare,
  enrol,
  mesh,
  meshUp,
  startHost,
} from "../mesh_steps/link_steps.ts";
import { addressOf, assertNotOutput, assertOutput, driftUnitFiles } from "./_netkinds.ts";

/** The three nodes, and each one's address on the overlay (which exists only inside them). */
const NODES = ["n1", "n2", "n3"] as const;
type Node = typeof NODES[number];
const overlayAddress = (node: Node) => `10.77.0.${NODES.indexOf(node) + 1}`;
const PORT = 51820;
const IF = "mesh0";

/** Each node's WireGuard public key, as the control plane learnt it from the node's inventory. */
const keys = new Map<Node, string>();
const keyOf = (node: Node) => {
  const key = keys.get(node);
  if (!key) fail(`${node}'s WireGuard public key read from its inventory`, "none");
  return key;
};

/**
 * The control plane reads a node's WireGuard public key from the last inventory the
 * node sent over the link, and it is the key the node itself shows (`inventory --json`).
 */
function readKey(node: Node): Step {
  return {
    title: `the control plane reads ${node}'s WireGuard public key from the inventory it sent`,
    async run(ctx) {
      const rows = JSON.parse(await mesh(ctx, ["nodes", "--json"])) as {
        node: string;
        inventory: { overlayKey?: unknown } | null;
      }[];
      const key = rows.find((r) => r.node === node)?.inventory?.overlayKey;
      if (typeof key !== "string" || !/^[A-Za-z0-9+/]{43}=$/.test(key)) {
        fail(`an inventory from ${node} with its WireGuard public key`, JSON.stringify(key));
      }
      const m = ctx.machine(node);
      const r = await m.exec([hostCommand(m), "inventory", "--json"]);
      if (r.code !== 0) fail("inventory to exit 0", `exit ${r.code}: ${shown(r.stderr)}`);
      const own = JSON.parse(r.stdout).identity?.wireguardPublicKey;
      if (own !== key) fail(`the key ${node} shows itself (${own})`, key);
      keys.set(node, key);
    },
  };
}

/**
 * The control plane pushes `node` an overlay-only declaration: its address on `mesh0`,
 * its listen port, and `members` (but itself) as peers at their lab addresses.
 */
function declareOverlay(node: Node, members: readonly Node[], serial: number): Step {
  return {
    title: `the control plane pushes ${node} an overlay-only declaration (serial ${serial}) ` +
      `with peers ${members.filter((n) => n !== node).join(", ")}`,
    run(ctx) {
      const peers = members.filter((n) => n !== node).map((n) => ({
        publicKey: keyOf(n),
        endpoint: `${addressOf(ctx, n)}:${PORT}`,
        allowedIps: [`${overlayAddress(n)}/32`],
      }));
      const overlay = {
        type: "overlay",
        id: "mesh",
        interface: IF,
        addresses: [`${overlayAddress(node)}/24`],
        listenPort: PORT,
        peers,
      };
      return declare(node, { version: 1, resources: [overlay] }, serial).run(ctx);
    },
  };
}

/** `wg show mesh0 peers` on `node` lists exactly `peers`' keys. */
function assertPeers(node: Node, peers: readonly Node[]): Step {
  return {
    title: `assert ${node}'s ${IF} has exactly the peers ${peers.join(", ")}`,
    async run(ctx) {
      const r = await ctx.machine(node).exec(["wg", "show", IF, "peers"]);
      if (r.code !== 0) fail("wg show to exit 0", `exit ${r.code}: ${shown(r.stderr)}`);
      const seen = r.stdout.split("\n").filter((l) => l.trim()).sort();
      const want = peers.map(keyOf).sort();
      if (seen.join(" ") !== want.join(" ")) {
        const names = seen.map((k) => NODES.find((n) => keys.get(n) === k) ?? k);
        fail(`peers ${peers.join(", ")}`, names.join(", ") || "none");
      }
    },
  };
}

const ping = (to: Node) => ["/bin/busybox", "ping", "-c1", "-W2", overlayAddress(to)];

/** `from` pings `to` over the overlay (one answer within 2 s). */
function assertPing(from: Node, to: Node): Step {
  return assertOutput(
    from,
    ping(to),
    /1 (packets )?received/,
    `assert ${from} pings ${to} at ${overlayAddress(to)} over the overlay`,
  );
}

/** `from`'s ping to `to` over the overlay gets no answer. */
function assertNoPing(from: Node, to: Node): Step {
  return assertNotOutput(
    from,
    ping(to),
    `assert ${from}'s ping to ${to} at ${overlayAddress(to)} gets no answer`,
  );
}

/** A person removes a peer by hand (`wg set mesh0 peer KEY remove`); it is gone at once. */
function personRemovesPeer(node: Node, peer: Node): Step {
  return {
    title: `a person removes ${peer} from ${node}'s peers (wg set ${IF} peer KEY remove)`,
    async run(ctx) {
      const m = ctx.machine(node);
      const r = await m.exec(["wg", "set", IF, "peer", keyOf(peer), "remove"]);
      if (r.code !== 0) fail("wg set to exit 0", `exit ${r.code}: ${shown(r.stderr)}`);
      const left = await m.exec(["wg", "show", IF, "peers"]);
      if (left.stdout.includes(keyOf(peer))) fail(`${peer} gone`, shown(left.stdout));
    },
  };
}

/**
 * A person kills the node's wireguard-go (the one serving mesh0, by its pid); the
 * interface goes with it. (The drift timer may already have made a new one by the
 * time this looks, so "gone" is: that process ended.)
 */
function personKillsWireguardGo(node: Node): Step {
  return {
    title: `a person kills ${node}'s wireguard-go serving ${IF}`,
    async run(ctx) {
      const m = ctx.machine(node);
      const r = await m.exec([
        "/bin/sh",
        "-c",
        `set -eu
pid=$(pgrep -x -f "/usr/bin/wireguard-go $1") || { echo "no wireguard-go serves $1" >&2; exit 1; }
kill "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
echo "wireguard-go $pid still runs 5 s after TERM" >&2; exit 1`,
        "lab-kill",
        IF,
      ]);
      if (r.code !== 0) fail("wireguard-go killed", `exit ${r.code}: ${shown(r.stderr)}`);
    },
  };
}

const everyPair = (members: readonly Node[]) =>
  members.flatMap((from) => members.filter((to) => to !== from).map((to) => [from, to] as const));

/** Seed 001: a node's first declaration is its overlay and nothing else. */
export const scenario: Scenario = {
  name: "overlay",
  summary: "three enrolled nodes get an overlay-only first declaration built from the WireGuard " +
    "keys in their inventories and ping each other on 10.77.0.x (userspace wireguard-go); a " +
    "peer a person removes, and a wireguard-go a person kills, are restored by the drift " +
    "timer; a declaration that drops a node takes it out of the others' peers and the ping " +
    "to it stops",
  broker: true,
  machines: Object.fromEntries(
    NODES.map((n) => [n, { flavour: "systemd", host: true, files: driftUnitFiles(5) }]),
  ),
  steps: [
    meshUp(),
    ...NODES.map((n) => enrol(n, n)),
    ...NODES.map(startHost),
    ...NODES.map((n) => waitFor(readKey(n), 60, 1000)),
    ...NODES.map((n) => declareOverlay(n, NODES, 1)),
    ...NODES.map((n) => waitFor(assertLastApply(n, 1, "converged"), 60)),
    ...NODES.map((n) => assertPeers(n, NODES.filter((p) => p !== n))),
    assertOutput(
      "n1",
      ["ip", "-d", "link", "show", IF],
      /\btun\b/,
      `assert n1's ${IF} is a userspace (wireguard-go) device`,
    ),
    ...everyPair(NODES).map(([from, to]) => waitFor(assertPing(from, to), 30)),
    personRemovesPeer("n1", "n2"),
    waitFor(assertPeers("n1", ["n2", "n3"]), 60),
    waitFor(assertPing("n1", "n2"), 30),
    personKillsWireguardGo("n2"),
    waitFor(assertPeers("n2", ["n1", "n3"]), 60),
    // The new wireguard-go holds no sessions: it speaks first, so the handshake is redone
    // at once (a peer that only sends to it retries after ~15 s, as WireGuard does).
    waitFor(assertPing("n2", "n3"), 30),
    waitFor(assertPing("n3", "n2"), 30),
    // n3 leaves the mesh: the others' next declaration no longer names it.
    declareOverlay("n1", ["n1", "n2"], 2),
    declareOverlay("n2", ["n1", "n2"], 2),
    waitFor(assertLastApply("n1", 2, "converged"), 60),
    waitFor(assertLastApply("n2", 2, "converged"), 60),
    assertPeers("n1", ["n2"]),
    assertPeers("n2", ["n1"]),
    assertNoPing("n1", "n3"),
    assertNoPing("n2", "n3"),
    assertNoPing("n3", "n1"),
    // n2 has not spoken to n1 since its wireguard-go was restarted: n2 speaks first.
    waitFor(assertPing("n2", "n1"), 30),
    waitFor(assertPing("n1", "n2"), 30),
  ],
};
