/**
 * The sysctl kind for real, on a per-namespace setting (conntrack's TCP
 * established timeout) inside a network namespace this test makes: applied,
 * read back from the kernel, drift repaired, the value seen before restored
 * when no longer declared; unknown keys and bad values refused.
 */
import assert from "node:assert/strict";
import { checkKey, sysctl } from "../../os/sysctl/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { parseDeclaration } from "../../src/engine/parse.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { type Netns, netns } from "./_netns.ts";

const KEY = "net.netfilter.nf_conntrack_tcp_timeout_established";
const PARSE = { managedRoots: ["/etc"], own: { paths: [], services: [] } };

function setting(value: string | number, key = KEY) {
  return { type: "sysctl", id: "conntrack", key, value };
}

async function engine(ns: Netns) {
  return await testEngine({ fs: posixFileSystem(), sysctl: sysctl({ via: ns.via }) });
}

Deno.test({
  name: "sysctl: applied and read back, drift repaired, the original value restored when dropped",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sc");
    await using e = await engine(ns);
    const read = async () => (await ns.must(["sysctl", "-n", KEY])).trim();
    const original = await read();
    assert.notEqual(original, "600");

    const plan = (await e.plan([setting(600)]))[0];
    assert.equal(plan.status, "change");
    assert.deepEqual(plan.changes, [`value ${original} -> 600`]);
    const r = await e.apply([setting(600)]);
    assert.equal(r.outcome, "converged", r.error);
    assert.equal(await read(), "600");
    assert.deepEqual(outcomes(await e.apply([setting("600")])), ["conntrack:unchanged"]);

    // A person changes it: repaired; the value recorded as original stays the first one.
    await ns.must(["sysctl", "-w", `${KEY}=1234`]);
    assert.deepEqual((await e.plan([setting(600)]))[0].changes, ["value 1234 -> 600"]);
    assert.deepEqual(outcomes(await e.apply([setting(600)])), ["conntrack:changed"]);
    assert.equal(await read(), "600");

    const planned = (await e.plan([]))[0];
    assert.equal(planned.status, "remove");
    assert.equal(planned.detail, `would restore ${original}`);
    const released = await e.apply([]);
    assert.deepEqual(outcomes(released), ["conntrack:removed"]);
    assert.equal(released.results[0].detail, `restored to ${original}`);
    assert.equal(await read(), original);
    // The machine's own namespace never changed.
    const outside = new TextDecoder().decode(
      (await new Deno.Command("sysctl", { args: ["-n", KEY], stdout: "piped" }).output()).stdout,
    ).trim();
    assert.equal(outside, original);
  },
});

Deno.test({
  name: "sysctl: values with several words compare as the kernel prints them",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sc2");
    await using e = await engine(ns);
    const key = "net.ipv4.ip_local_port_range";
    const r = await e.apply([setting("40000   50000", key)]);
    assert.equal(r.outcome, "converged", r.error);
    assert.match(await ns.must(["sysctl", "-n", key]), /^40000\s+50000\n$/);
    assert.deepEqual(outcomes(await e.apply([setting("40000 50000", key)])), [
      "conntrack:unchanged",
    ]);
  },
});

Deno.test({
  name: "sysctl: a setting whose name holds a dot (interface a.b) is named by its path, and " +
    "the two spellings of one setting are one resource",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sc4");
    await using e = await engine(ns);
    // An interface whose name holds a dot, as a VLAN's (eth0.100) does.
    await ns.must(["ip", "link", "add", "a.b", "type", "veth", "peer", "name", "vb"]);
    const key = "net/ipv4/conf/a.b/forwarding";
    const read = async () =>
      (await ns.must(["cat", "/proc/sys/net/ipv4/conf/a.b/forwarding"])).trim();
    assert.equal(await read(), "0");
    const r = await e.apply([setting(1, key)]);
    assert.equal(r.outcome, "converged", r.error);
    assert.equal(await read(), "1");
    assert.deepEqual(outcomes(await e.apply([setting(1, key)])), ["conntrack:unchanged"]);
    const released = await e.apply([]);
    assert.equal(released.results[0].detail, "restored to 0");
    assert.equal(await read(), "0");

    // Without a dot in any part, the path is the dotted name: one setting, one resource.
    const both = await parseDeclaration(
      JSON.stringify({
        version: 1,
        resources: [
          { type: "sysctl", id: "a", key: "net.ipv4.ip_forward", value: 1 },
          { type: "sysctl", id: "b", key: "net/ipv4/ip_forward", value: 0 },
        ],
      }),
      PARSE,
    ).then(() => "accepted", (error) => (error as Error).message);
    assert.match(
      both,
      /resources\[1\]: conflicts with resources\[0\]: both manage sysctl net\.ipv4\.ip_forward/,
    );
  },
});

Deno.test({
  name: "sysctl: a key the kernel does not have fails the apply, naming it",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sc3");
    await using e = await engine(ns);
    const r = await e.apply([setting(1, "net.ipv4.no_such_setting")]);
    assert.equal(r.outcome, "failed");
    assert.match(
      r.error ?? "",
      /"net\.ipv4\.no_such_setting" is not a kernel setting on this machine \(nothing at \/proc\/sys\/net\/ipv4\/no_such_setting\)/,
    );
  },
});

Deno.test("sysctl: keys that leave /proc/sys and values with newlines are refused with the JSON path", async () => {
  const refused = async (resource: Record<string, unknown>) => {
    try {
      await parseDeclaration(JSON.stringify({ version: 1, resources: [resource] }), PARSE);
    } catch (error) {
      return (error as Error).message;
    }
    assert.fail(`accepted: ${JSON.stringify(resource)}`);
  };
  for (
    const key of [
      "../../etc/passwd",
      "net/../../etc/passwd",
      "net/ipv4/./ip_forward",
      "net/ipv4/.../x",
      "net//ipv4",
      "/net/ipv4",
      "net/ipv4/",
      "net/ipv4.conf/a b",
      "net..ipv4",
      ".net",
      "net.",
      "",
      "-a", // options of sysctl (procps and busybox): the parse refuses them, not only the adapter
      "-p",
      "-p/etc/sysctl.conf",
      "-w/x",
      "--system",
    ]
  ) {
    assert.match(await refused(setting(1, key)), /resources\[0\]\.key: .* is not a setting name/);
  }
  assert.match(await refused(setting("1\n2")), /resources\[0\]\.value: a value is one line/);
  assert.match(await refused(setting(1.5)), /resources\[0\]\.value/);
  assert.match(await refused(setting("")), /resources\[0\]\.value/);
  // The adapter refuses them as well, whatever the parse let through.
  assert.throws(() => checkKey("-a"), /not a kernel setting name/);
  assert.throws(() => checkKey("net/../x"), /not a kernel setting name/);
  assert.throws(() => checkKey("net/ipv4/.."), /not a kernel setting name/);
  assert.throws(() => checkKey("-w/x"), /not a kernel setting name/);
  await assert.rejects(sysctl().write("net.ipv4.ip_forward", "1\nnet.x=2"), /one line/);
});
