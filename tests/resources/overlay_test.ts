/**
 * The overlay kind for real: wireguard-go (this machine's kernel has no
 * WireGuard) inside network namespaces these tests make, two nodes with their
 * own stores and keys, pinging each other over the overlay. The kernel path's
 * command lines are tested as command lines.
 */
import assert from "node:assert/strict";
import { wireguard } from "../../os/wireguard/mod.ts";
import { createArgv, parseDump, setArgv } from "../../os/wireguard/mod.ts";
import { detectWireguard } from "../../os/wireguard/detect.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { DeclarationRefused } from "../../src/declaration/envelope.ts";
import { parseDeclaration } from "../../src/engine/parse.ts";
import { ensureOverlayKey, OVERLAY_KEY_FILE, readOverlayKey } from "../../src/overlay_key.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { cable, type Netns, netns } from "./_netns.ts";

const PARSE = { managedRoots: ["/etc"], own: { paths: [], services: [] } };
const KEY_A = "jxlJGHqZrWSspB9nXdeICdFGe/vy5BAdrIbdgxYWOBA=";
const KEY_B = "qHx8q8zBIH040lFLKL+paPfe8h5hqEtOvKzrtk57SHU=";

function ifname(): string {
  return `nkwg${crypto.randomUUID().slice(0, 6)}`;
}

function overlay(
  name: string,
  address: string,
  peers: { publicKey: string; endpoint?: string; allowedIps: string[] }[],
  extra: Record<string, unknown> = {},
) {
  return {
    type: "overlay",
    id: "mesh",
    interface: name,
    addresses: [address],
    listenPort: 51820,
    mtu: 1380,
    peers: peers.map((p) => ({ ...p, persistentKeepalive: 0 })),
    ...extra,
  };
}

async function node(ns: Netns) {
  const providers = {
    fs: posixFileSystem(),
    overlay: wireguard({ mode: "userspace", via: ns.via }),
  };
  return await testEngine(providers);
}

async function ping(from: Netns, address: string): Promise<boolean> {
  const r = await from.exec(["busybox", "ping", "-c", "1", "-W", "3", address]);
  return r.code === 0;
}

Deno.test({
  name:
    "overlay: two nodes converge on exactly the declared state, ping over it, drift is repaired",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using a = await netns("a");
    await using b = await netns("b");
    await cable(a, "10.251.0.1/24", b, "10.251.0.2/24");
    await using ea = await node(a);
    await using eb = await node(b);
    const ka = await ensureOverlayKey(ea.stateDir);
    const kb = await ensureOverlayKey(eb.stateDir);
    const wa = ifname(), wb = ifname();
    const declA = overlay(wa, "10.60.0.1/24", [
      { publicKey: kb.publicKey, endpoint: "10.251.0.2:51820", allowedIps: ["10.60.0.2/32"] },
    ]);
    const declB = overlay(wb, "10.60.0.2/24", [
      { publicKey: ka.publicKey, endpoint: "10.251.0.1:51820", allowedIps: ["10.60.0.1/32"] },
    ]);

    const plan = await ea.plan([declA]);
    assert.equal(plan[0].status, "create");
    const first = await ea.apply([declA]);
    assert.equal(first.outcome, "converged", first.error);
    assert.equal((await eb.apply([declB])).outcome, "converged");

    // Read back with the tools themselves.
    const dump = parseDump(await a.must(["wg", "show", wa, "dump"]));
    assert.equal(dump.publicKey, ka.publicKey);
    assert.equal(dump.listenPort, 51820);
    assert.deepEqual(dump.peers.map((p) => [p.publicKey, p.allowedIps]), [[kb.publicKey, [
      "10.60.0.2/32",
    ]]]);
    const addr = JSON.parse(await a.must(["ip", "-j", "addr", "show", "dev", wa]))[0];
    assert.equal(addr.mtu, 1380);
    assert.ok(addr.flags.includes("UP"));
    assert.ok(addr.addr_info.some((i: { local: string }) => i.local === "10.60.0.1"));
    assert.ok(await ping(a, "10.60.0.2"), "a reaches b over the overlay");

    // Unchanged on the next pass.
    assert.deepEqual(outcomes(await ea.apply([declA])), ["mesh:unchanged"]);

    // A person removes the peer and adds another one and an address: the plan says so in words.
    await a.must(["wg", "set", wa, "peer", kb.publicKey, "remove"]);
    await a.must(["wg", "set", wa, "peer", KEY_A, "allowed-ips", "10.99.0.0/24"]);
    await a.must(["ip", "address", "add", "10.61.0.1/24", "dev", wa]);
    assert.ok(!await ping(a, "10.60.0.2"), "no route to b without its peer");
    const drifted = (await ea.plan([declA]))[0];
    assert.equal(drifted.status, "change");
    assert.ok(
      drifted.changes.includes(`peer ${kb.publicKey.slice(0, 8)}… added`),
      drifted.changes.join("; "),
    );
    assert.ok(drifted.changes.includes(`peer ${KEY_A.slice(0, 8)}… removed`));
    assert.ok(drifted.changes.includes("address 10.61.0.1/24 removed"));
    const repaired = await ea.apply([declA]);
    assert.deepEqual(outcomes(repaired), ["mesh:changed"], repaired.error);
    assert.deepEqual(
      parseDump(await a.must(["wg", "show", wa, "dump"])).peers.map((p) => p.publicKey),
      [kb.publicKey],
    );
    assert.ok(await ping(a, "10.60.0.2"), "restored");

    // wireguard-go killed (the interface goes with it): recreated.
    await a.must(["ip", "link", "del", "dev", wa]);
    assert.equal((await ea.plan([declA]))[0].status, "create");
    assert.equal((await ea.apply([declA])).outcome, "converged");
    assert.ok(await ping(a, "10.60.0.2"), "recreated");

    // Port and MTU changed in the declaration: said in words, applied.
    const moved = { ...declA, mtu: 1300 };
    assert.deepEqual((await ea.plan([moved]))[0].changes, ["mtu 1380 -> 1300"]);
    assert.equal((await ea.apply([moved])).outcome, "converged");

    // No longer declared: the interface the host made is deleted.
    const released = await ea.apply([]);
    assert.deepEqual(outcomes(released), ["mesh:removed"]);
    assert.equal((await a.exec(["ip", "link", "show", "dev", wa])).code, 1);
  },
});

Deno.test({
  name: "overlay: a link the host did not create is never touched (refused at apply, named)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using a = await netns("own");
    await using e = await node(a);
    const name = ifname();
    await a.must(["ip", "link", "add", name, "type", "veth", "peer", "name", `${name}p`]);
    const r = await e.apply([overlay(name, "10.60.0.1/24", [])]);
    assert.equal(r.outcome, "failed");
    assert.match(
      r.error ?? "",
      /a veth link, not WireGuard, named "nkwg\w+" exists but was not created by this host/,
    );
    // Someone else's wireguard-go interface of that name: also left alone.
    const other = ifname();
    await a.must(["wireguard-go", other]);
    const r2 = await e.apply([overlay(other, "10.60.0.1/24", [])]);
    assert.match(r2.error ?? "", /a tun link named .* was not created by this host/);
    assert.equal((await a.exec(["ip", "link", "show", "dev", name])).code, 0, "still there");
    assert.equal((await a.exec(["wg", "show", other, "dump"])).code, 0, "still there");
  },
});

Deno.test("overlay: bad input is refused with its JSON path", async () => {
  const refused = async (resource: Record<string, unknown>) => {
    try {
      await parseDeclaration(JSON.stringify({ version: 1, resources: [resource] }), PARSE);
    } catch (error) {
      return (error as Error).message;
    }
    assert.fail("accepted");
  };
  const base = overlay("wg0", "10.60.0.1/24", [{ publicKey: KEY_A, allowedIps: ["10.60.0.2/32"] }]);
  assert.match(
    await refused({ ...base, interface: "wg-name-too-long" }),
    /resources\[0\]\.interface: "wg-name-too-long" is not an interface name: 1–15/,
  );
  assert.match(
    await refused({ ...base, privateKey: KEY_B }),
    /resources\[0\]\.privateKey: a WireGuard private key is never declared/,
  );
  assert.match(
    await refused({ ...base, peers: [{ publicKey: KEY_A, allowedIps: [], privateKey: KEY_B }] }),
    /resources\[0\]\.peers\[0\]\.privateKey: a WireGuard private key is never declared/,
  );
  for (const bad of ["abc", KEY_A.slice(0, 43), KEY_A.replace("A=", "B="), `${KEY_A}A`]) {
    assert.match(
      await refused({ ...base, peers: [{ publicKey: bad, allowedIps: [] }] }),
      /resources\[0\]\.peers\[0\]\.publicKey: .* is not a WireGuard key \(base64 of exactly 32 bytes\)/,
    );
  }
  assert.match(
    await refused({
      ...base,
      peers: [
        { publicKey: KEY_A, allowedIps: ["10.60.0.0/24"] },
        { publicKey: KEY_B, allowedIps: ["10.60.1.0/24", "10.60.0.7/32"] },
      ],
    }),
    /resources\[0\]\.peers\[1\]\.allowedIps\[1\]: 10\.60\.0\.7\/32 overlaps 10\.60\.0\.0\/24 of peers\[0\]\.allowedIps\[0\]/,
  );
  assert.match(
    await refused({ ...base, addresses: ["10.60.0.300/24"] }),
    /resources\[0\]\.addresses\[0\]: "10\.60\.0\.300\/24" is not a CIDR address/,
  );
  assert.match(await refused({ ...base, interface: "-x" }), /resources\[0\]\.interface/);
  assert.match(await refused({ ...base, interface: ".." }), /resources\[0\]\.interface/);
  assert.match(await refused({ ...base, interface: "a/b" }), /resources\[0\]\.interface/);
  // Two resources on one interface conflict.
  try {
    await parseDeclaration(
      JSON.stringify({ version: 1, resources: [base, { ...base, id: "other" }] }),
      PARSE,
    );
    assert.fail("accepted");
  } catch (error) {
    assert.match((error as Error).message, /both manage overlay wg0/);
  }
});

Deno.test("overlay key: made once, 0600, never through a planted link, the public half as wg computes it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxnk-key-" });
  try {
    const key = await ensureOverlayKey(dir);
    assert.equal((await Deno.stat(key.path)).mode! & 0o777, 0o600);
    const privateKey = (await Deno.readTextFile(key.path)).trim();
    const wg = await new Deno.Command("wg", { args: ["pubkey"], stdin: "piped", stdout: "piped" })
      .spawn();
    const w = wg.stdin.getWriter();
    await w.write(new TextEncoder().encode(privateKey + "\n"));
    await w.close();
    assert.equal(new TextDecoder().decode((await wg.output()).stdout).trim(), key.publicKey);
    assert.deepEqual(await ensureOverlayKey(dir), key, "the same key the next time");

    // Readable by others: refused, not used.
    await Deno.chmod(key.path, 0o644);
    await assert.rejects(readOverlayKey(dir), /is readable by others \(mode 644\)/);
    await Deno.remove(key.path);

    // A symlink planted at the key's name: not followed, neither to read nor to write.
    const target = `${dir}/elsewhere`;
    await Deno.writeTextFile(target, "not a key\n");
    await Deno.symlink(target, `${dir}/${OVERLAY_KEY_FILE}`);
    await assert.rejects(ensureOverlayKey(dir), /is not a regular file/);
    assert.equal(await Deno.readTextFile(target), "not a key\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "overlay: the private key never reaches the store or a report",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using a = await netns("leak");
    await using e = await node(a);
    const name = ifname();
    const report = await e.apply([overlay(name, "10.60.0.1/24", [])]);
    assert.equal(report.outcome, "converged", report.error);
    const privateKey = (await Deno.readTextFile(`${e.stateDir}/${OVERLAY_KEY_FILE}`)).trim();
    e.store.close();
    for await (const entry of Deno.readDir(e.stateDir)) {
      if (entry.name === OVERLAY_KEY_FILE) continue;
      const bytes = await Deno.readFile(`${e.stateDir}/${entry.name}`);
      const text = new TextDecoder("latin1").decode(bytes);
      assert.ok(!text.includes(privateKey), `${entry.name} holds the private key`);
    }
    assert.ok(!JSON.stringify(report).includes(privateKey));
  },
});

Deno.test({
  name:
    "overlay: profile finds userspace WireGuard working here (a scratch interface), kernel absent",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using a = await netns("probe");
    const cap = await detectWireguard({ via: a.via });
    assert.equal(cap.state, "working", cap.evidence.join("; "));
    assert.equal(cap.provider, "userspace");
    assert.match(cap.evidence.join("\n"), /the kernel made no WireGuard interface/);
    assert.doesNotMatch(await a.must(["ip", "link"]), /nmhp/, "the scratch interface is gone");
  },
});

Deno.test("overlay: the kernel path's command lines", () => {
  assert.deepEqual(createArgv("kernel", "wg0"), [
    "ip",
    "link",
    "add",
    "dev",
    "wg0",
    "type",
    "wireguard",
  ]);
  assert.deepEqual(createArgv("userspace", "wg0"), ["wireguard-go", "wg0"]);
  assert.throws(() => createArgv("kernel", "-x"), /looks like an option/);
  assert.deepEqual(
    setArgv("wg0", {
      privateKeyFile: "/var/lib/mesh-host/wireguard.key",
      listenPort: 51820,
      peers: [{ publicKey: KEY_A, allowedIps: ["10.60.0.2/32"], endpoint: "192.0.2.1:51820" }],
      removePeers: [KEY_B],
    }),
    [
      "wg",
      "set",
      "wg0",
      "private-key",
      "/var/lib/mesh-host/wireguard.key",
      "listen-port",
      "51820",
      "peer",
      KEY_B,
      "remove",
      "peer",
      KEY_A,
      "allowed-ips",
      "10.60.0.2/32",
      "endpoint",
      "192.0.2.1:51820",
      "persistent-keepalive",
      "0",
    ],
  );
});

/** The problems the safe parse refuses `resources` with, as "path: message". */
async function problemsOf(resources: unknown[]): Promise<string[]> {
  try {
    await parseDeclaration(JSON.stringify({ version: 1, resources }), PARSE);
  } catch (error) {
    if (error instanceof DeclarationRefused) {
      return error.problems.map((p) => `${p.path}: ${p.message}`);
    }
    throw error;
  }
  return [];
}

Deno.test("overlay: two overlays on one UDP port are refused, naming both", async () => {
  const a = overlay("wg0", "10.60.0.1/24", []);
  const b = { ...overlay("wg1", "10.61.0.1/24", []), id: "other" };
  assert.deepEqual(await problemsOf([a, b]), [
    "resources[1].listenPort: UDP port 51820 is also resources[0].listenPort; one port is held " +
    "by one interface, so the two could never both be set: give each overlay its own port",
  ]);
  assert.deepEqual(await problemsOf([a, { ...b, listenPort: 51821 }]), []);
  // An overlay without a port takes whatever the kernel gives it: no claim.
  const { listenPort: _, ...unported } = b;
  assert.deepEqual(await problemsOf([a, unported]), []);
});

Deno.test("overlay: IPv6 addresses that could never hold are refused, named by path", async () => {
  const v6 = (addresses: string[], extra: Record<string, unknown> = {}) =>
    problemsOf([overlay("wg0", "10.60.0.1/24", [], { addresses, ...extra })]);
  // Below 1280 the kernel takes every IPv6 address away (and refuses to add one).
  assert.deepEqual(await v6(["10.60.0.1/24", "fd77::1/64"], { mtu: 1279 }), [
    "resources[0].mtu: 1279 is below 1280, the smallest MTU IPv6 works on, and addresses[1] is " +
    "IPv6: the kernel would take it away; declare mtu 1280 or more",
  ]);
  assert.deepEqual(await v6(["fd77::1/64"], { mtu: 1280 }), []);
  assert.deepEqual(await v6(["10.60.0.1/24"], { mtu: 576 }), []);
  // Link scope: the read-back leaves it to the kernel, so it would never read back.
  for (const address of ["fe80::1/64", "FE80::9/10", "febf:ffff::1/64"]) {
    assert.match(
      (await v6([address])).join("\n"),
      /^resources\[0\]\.addresses\[0\]: \S+ is link-local \(fe80::\/10\): .* declare a global or unique-local/,
    );
  }
  assert.deepEqual(await v6(["fec0::1/64"]), []);
  // One IPv6 address with two prefixes: an interface holds it once.
  assert.deepEqual(await v6(["fd77::1/64", "fd77:0::1/80"]), [
    "resources[0].addresses[1]: fd77:0::1/80 is the address of addresses[0] (fd77::1/64) with " +
    "another prefix; an interface holds an IPv6 address once, so the two could never both " +
    "hold: declare it once",
  ]);
  // IPv4 holds one address under two prefixes (checked with ip): accepted.
  assert.deepEqual(await v6(["10.60.0.1/24", "10.60.0.1/32"]), []);
});

Deno.test("overlay: a peer endpoint is accepted only in the one spelling wg prints", async () => {
  const withEndpoint = (endpoint: string) =>
    problemsOf([overlay("wg0", "10.60.0.1/24", [{ publicKey: KEY_A, endpoint, allowedIps: [] }])]);
  const refusedAs: [string, RegExp][] = [
    ["010.0.0.1:51820", /010\.0\.0\.1 is not an IPv4 address in its one spelling.* octal 8/],
    ["127.1:51820", /127\.1 is not an IPv4 address in its one spelling/],
    ["0x7f.0.0.1:51820", /0x7f\.0\.0\.1 is not an IPv4 address in its one spelling/],
    ["1.2.3:51820", /1\.2\.3 is not an IPv4 address/],
    ["[2001:DB8::1]:51820", /write it as "\[2001:db8::1\]:51820" \(lower case, zeros compressed\)/],
    ["[2001:db8:0:0:0:0:0:1]:51820", /write it as "\[2001:db8::1\]:51820"/],
    ["[2001:db8::0:1]:51820", /write it as "\[2001:db8::1\]:51820"/],
    ["[::ffff:198.51.100.7]:51820", /an IPv4 address written as IPv6 .* "198\.51\.100\.7:51820"/],
    ["[1:2:3:4:5:6:7:8:9]:51820", /\[1:2:3:4:5:6:7:8:9\] is not an IPv6 address in brackets/],
    ["[2001:db8::1:51820", /is not an IPv6 address in brackets/],
    ["a..b:51820", /a\.\.b is neither an IPv4 address nor a host name/],
    ["-peer.example.org:51820", /is neither an IPv4 address nor a host name/],
    ["peer.example.org.:51820", /is neither an IPv4 address nor a host name/],
    ["198.51.100.7:0", /the port is 1–65535/],
    ["198.51.100.7:051820", /the port is 1–65535, written without leading zeros/],
    ["198.51.100.7", /is not an endpoint: an address or host name, ":" and a port/],
  ];
  for (const [endpoint, why] of refusedAs) {
    const problems = await withEndpoint(endpoint);
    assert.equal(problems.length, 1, `${endpoint}: ${problems.join("; ")}`);
    assert.match(problems[0], /^resources\[0\]\.peers\[0\]\.endpoint: /, endpoint);
    assert.match(problems[0], why, endpoint);
  }
  for (
    const endpoint of [
      "198.51.100.7:51820",
      "[2001:db8::1]:51820",
      "[::1]:1",
      "[2001:db8:0:1:1:1:1:1]:65535",
      "peer.example.org:51820",
      "Peer-7.example.org:51820",
      "localhost:51820",
    ]
  ) {
    assert.deepEqual(await withEndpoint(endpoint), [], endpoint);
  }
});

Deno.test({
  name: "overlay: an IPv6 endpoint in its one spelling reads back equal from wg (converges)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using a = await netns("ep6");
    await using e = await node(a);
    const name = ifname();
    // 2001:db8::/32 is for documentation; inside this namespace nothing is sent to it (no
    // keepalive, and nothing routed to the peer's allowed-ips is ever sent).
    const decl = overlay(name, "10.60.0.1/24", [
      { publicKey: KEY_A, endpoint: "[2001:db8::7]:51820", allowedIps: ["10.60.0.2/32"] },
      { publicKey: KEY_B, endpoint: "198.51.100.7:51820", allowedIps: ["10.60.0.3/32"] },
    ]);
    const first = await e.apply([decl]);
    assert.equal(first.outcome, "converged", first.error);
    const endpoints = parseDump(await a.must(["wg", "show", name, "dump"])).peers.map((p) =>
      p.endpoint
    );
    assert.deepEqual(endpoints.sort(), ["198.51.100.7:51820", "[2001:db8::7]:51820"]);
    assert.deepEqual(outcomes(await e.apply([decl])), ["mesh:unchanged"]);
  },
});

Deno.test("overlay: overlapping allowed-ips are found by one sweep, nested or equal, across families", async () => {
  const peers = (...lists: string[][]) =>
    problemsOf([overlay(
      "wg0",
      "10.60.0.1/24",
      lists.map((allowedIps, i) => ({ publicKey: i ? KEY_B : KEY_A, allowedIps })),
    )]);
  // The later-declared block of each clash is named, with the earlier it overlaps.
  assert.deepEqual(await peers(["10.0.0.0/8", "fd00::/8"], ["10.1.2.0/24", "fd00:1::/32"]), [
    "resources[0].peers[1].allowedIps[0]: 10.1.2.0/24 overlaps 10.0.0.0/8 of " +
    "peers[0].allowedIps[0]; WireGuard routes each address to one peer only",
    "resources[0].peers[1].allowedIps[1]: fd00:1::/32 overlaps fd00::/8 of " +
    "peers[0].allowedIps[1]; WireGuard routes each address to one peer only",
  ]);
  // A wide block declared after the narrow one it holds: the wide one is named.
  assert.deepEqual(await peers(["10.1.2.3/32"], ["10.1.0.0/16"]), [
    "resources[0].peers[1].allowedIps[0]: 10.1.0.0/16 overlaps 10.1.2.3/32 of " +
    "peers[0].allowedIps[0]; WireGuard routes each address to one peer only",
  ]);
  assert.deepEqual(await peers(["0.0.0.0/0"], ["0.0.0.0/0"]), [
    "resources[0].peers[1].allowedIps[0]: 0.0.0.0/0 overlaps 0.0.0.0/0 of " +
    "peers[0].allowedIps[0]; WireGuard routes each address to one peer only",
  ]);
  // Blocks of one peer may overlap; neighbours of two peers do not; nor IPv4 and IPv6.
  assert.deepEqual(await peers(["10.0.0.0/8", "10.1.0.0/16"], ["11.0.0.0/8", "::/0"]), []);
  assert.deepEqual(await peers(["10.0.0.0/25"], ["10.0.0.128/25"]), []);
});
