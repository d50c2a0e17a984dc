/**
 * The seeded fuzzing test of the declaration parse (tests/declaration_fuzz.ts):
 * a few thousand mutated declarations, each refused with the parse's own error or
 * accepted only when every invariant holds. FUZZ_SEED / FUZZ_CASES override the
 * defaults; a finding prints its seed and case so it can be replayed.
 */
import assert from "node:assert/strict";
import type { Resource } from "../src/resources/mod.ts";
import { brokenInvariants, describe, fuzz, fuzzCase, slowParse } from "./declaration_fuzz.ts";

const seed = Number(Deno.env.get("FUZZ_SEED") ?? 20240610);
const cases = Number(Deno.env.get("FUZZ_CASES") ?? 4000);

Deno.test(`declaration fuzz: ${cases} cases from seed ${seed}, every one refused or sound`, async () => {
  const { findings, accepted, refused } = await fuzz(cases, seed);
  assert.deepEqual(findings.map(describe), [], `seed ${seed}: ${findings.length} findings`);
  assert.equal(accepted + refused, cases);
  // The mutations must reach both sides, or the oracle proves nothing.
  assert.ok(accepted > cases / 50, `only ${accepted} of ${cases} cases were accepted`);
  assert.ok(refused > cases / 2, `only ${refused} of ${cases} cases were refused`);
});

Deno.test("declaration fuzz: a case is the same for the same seed and index", () => {
  assert.deepEqual(fuzzCase(7, 3), fuzzCase(7, 3));
  assert.notDeepEqual(fuzzCase(7, 3), fuzzCase(8, 3));
});

Deno.test("declaration fuzz: the oracle knows every class of issue 22 (each flagged, its fix not)", () => {
  const K1 = "jxlJGHqZrWSspB9nXdeICdFGe/vy5BAdrIbdgxYWOBA=";
  const K2 = "qHx8q8zBIH040lFLKL+paPfe8h5hqEtOvKzrtk57SHU=";
  const sysctl = (key: string, value: string | number, extra = {}) => ({
    type: "sysctl",
    id: `k${key}${value}`,
    key,
    value,
    ...extra,
  });
  const service = (name: string, running = true) => ({
    type: "service",
    id: name,
    name,
    enabled: false,
    running,
  });
  const overlay = (extra: Record<string, unknown>) => ({
    type: "overlay",
    id: `o${JSON.stringify(extra).length}`,
    interface: "wg0",
    addresses: ["10.0.0.1/24"],
    peers: [],
    ...extra,
  });
  const ref = (contentSha256: string, size: number) => ({
    type: "file",
    id: "f",
    path: "/srv/f",
    contentSha256,
    size,
    mode: "0644",
    owner: "root",
    group: "root",
  });
  const EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  const classes: [string, unknown[], unknown[]][] = [
    ["1 runs a program", [sysctl("kernel.core_pattern", "|/srv/x")], [
      sysctl("kernel.core_pattern", "core"),
    ]],
    ["1 runs a program", [sysctl("kernel/usermodehelper/bset", "1 1")], []],
    ["2 protection off", [sysctl("fs.suid_dumpable", 2)], [sysctl("fs.suid_dumpable", 0)]],
    ["3 stops the node", [service("systemd-reboot.service")], [service("systemd-reboot", false)]],
    ["3 stops the node", [service("killprocs")], [service("sshd")]],
    [
      "4 one-way",
      [sysctl("kernel.modules_disabled", "0x1")],
      [sysctl("kernel.modules_disabled", 1, { permanent: true })],
    ],
    ["4 permanent", [sysctl("net.ipv4.ip_forward", 1, { permanent: true })], []],
    [
      "5 two spellings",
      [sysctl("net.ipv4.ip_forward", 1), sysctl("net/ipv4.ip_forward", 0)],
      [sysctl("net.ipv4.ip_forward", 1), sysctl("net.ipv6.conf.all.forwarding", 1)],
    ],
    [
      "6 one port",
      [overlay({ listenPort: 5 }), overlay({ interface: "wg1", listenPort: 5, id: "x" })],
      [overlay({ listenPort: 5 }), overlay({ interface: "wg1", listenPort: 6, id: "x" })],
    ],
    ["7 size 0", [ref("a".repeat(64), 0)], [ref(EMPTY, 0)]],
    ["8 mtu", [overlay({ addresses: ["fd00::1/64"], mtu: 1279 })], [overlay({ mtu: 1279 })]],
    ["8 link-local", [overlay({ addresses: ["FE80::1/64"] })], [
      overlay({ addresses: ["fd00::1/64"] }),
    ]],
    ["8 two prefixes", [overlay({ addresses: ["fd00::1/64", "fd00:0::1/128"] })], []],
    ...["010.0.0.1:1", "127.1:1", "0x7f.0.0.1:1", "[2001:DB8::1]:1", "[::ffff:1.2.3.4]:1", "a..b:1"]
      .map((endpoint): [string, unknown[], unknown[]] => [
        `9 endpoint ${endpoint}`,
        [overlay({ peers: [{ publicKey: K1, endpoint, allowedIps: [] }] })],
        [overlay({ peers: [{ publicKey: K1, endpoint: "[2001:db8::1]:1", allowedIps: [] }] })],
      ]),
    [
      "11 overlap",
      [overlay({
        peers: [{ publicKey: K1, allowedIps: ["10.0.0.0/8"] }, {
          publicKey: K2,
          allowedIps: ["10.1.0.0/16"],
        }],
      })],
      [overlay({
        peers: [{ publicKey: K1, allowedIps: ["10.0.0.0/8"] }, {
          publicKey: K2,
          allowedIps: ["11.1.0.0/16"],
        }],
      })],
    ],
  ];
  for (const [what, bad, good] of classes) {
    assert.notDeepEqual(brokenInvariants(bad as Resource[], false), [], `${what}: not flagged`);
    assert.deepEqual(brokenInvariants(good as Resource[], false), [], `${what}: its fix flagged`);
  }
  // The bundle may run programs, turn protections off and stop the node; nothing else.
  assert.deepEqual(
    brokenInvariants([sysctl("kernel.core_pattern", "|/x")] as Resource[], true),
    [],
  );
  assert.deepEqual(brokenInvariants([service("rescue")] as Resource[], true), []);
  assert.notDeepEqual(
    brokenInvariants([sysctl("kernel.modules_disabled", 1)] as Resource[], true),
    [],
  );
});

Deno.test("declaration fuzz: a parse slower than the bound three runs running is reported, a fast one not", async () => {
  const big = JSON.stringify({
    version: 1,
    resources: Array.from({ length: 10_000 }, (_, i) => ({
      type: "sysctl",
      id: `k${i}`,
      key: `net.x${i}`,
      value: i,
    })),
  });
  const slow = await slowParse(big, false, 1);
  assert.ok(slow !== undefined && slow > 1, `a 10,000-resource parse reported ${slow}`);
  assert.equal(await slowParse('{"version":1,"resources":[]}', false), undefined);
});
