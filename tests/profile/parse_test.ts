import assert from "node:assert/strict";
import { parseSession } from "../../os/detect/graphical.ts";
import {
  parseDefaultRoutes,
  parseIpAddress,
  positionOf,
  scopeOf,
} from "../../os/detect/network.ts";
import { parseOsRelease } from "../../os/detect/os_release.ts";
import { profileText, stronger } from "../../src/profile.ts";

Deno.test("os-release: quoted and bare values, ID_LIKE words", () => {
  const os = parseOsRelease(
    'NAME="Arch Linux"\nPRETTY_NAME="Arch Linux"\nID=arch\nBUILD_ID=rolling\n# c\n',
  );
  assert.deepEqual(os, { id: "arch", prettyName: "Arch Linux", like: [] });
  const alpine = parseOsRelease('ID=alpine\nVERSION_ID=3.20.3\nPRETTY_NAME="Alpine Linux v3.20"\n');
  assert.deepEqual(alpine, {
    id: "alpine",
    versionId: "3.20.3",
    prettyName: "Alpine Linux v3.20",
    like: [],
  });
  assert.deepEqual(parseOsRelease("ID=manjaro\nID_LIKE='arch'\n").like, ["arch"]);
  assert.equal(parseOsRelease("").id, "linux");
});

// Recorded from iproute2 6.1 (Debian 12) on this machine; the veth0 entry added in the same format.
const IPROUTE2 =
  `1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    inet 127.0.0.1/8 scope host lo
       valid_lft forever preferred_lft forever
    inet6 ::1/128 scope host 
       valid_lft forever preferred_lft forever
2: ifb0: <BROADCAST,NOARP> mtu 1500 qdisc noop state DOWN group default qlen 32
    link/ether 02:4c:5a:a0:b3:3d brd ff:ff:ff:ff:ff:ff
4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1400 qdisc pfifo_fast state UP group default qlen 1000
    link/ether 02:fc:00:00:00:01 brd ff:ff:ff:ff:ff:ff
    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0
       valid_lft forever preferred_lft forever
    inet6 fd00::2/64 scope global nodad 
       valid_lft forever preferred_lft forever
    inet6 fe80::fc:ff:fe00:1/64 scope link 
       valid_lft forever preferred_lft forever
5: veth0@if4: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state LOWERLAYERDOWN
    link/ether 5a:11:22:33:44:55 brd ff:ff:ff:ff:ff:ff link-netnsid 0
    inet 10.250.0.10/24 scope global veth0
`;

// Recorded from busybox 1.35 `ip addr show` (Alpine's default ip) on this machine.
const BUSYBOX = `1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    inet 127.0.0.1/8 scope host lo
       valid_lft forever preferred_lft forever
4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1400 qdisc pfifo_fast qlen 1000
    link/ether 02:fc:00:00:00:01 brd ff:ff:ff:ff:ff:ff
    inet 10.1.2.3/24 brd 10.1.2.255 scope global eth0
       valid_lft forever preferred_lft forever
`;

Deno.test("ip address: interfaces, up state and addresses from iproute2 and busybox", () => {
  const ifs = parseIpAddress(IPROUTE2);
  assert.deepEqual(ifs.map((i) => [i.name, i.up, i.loopback]), [
    ["lo", true, true],
    ["ifb0", false, false],
    ["eth0", true, false],
    ["veth0", false, false],
  ]);
  assert.deepEqual(ifs[2].addresses, [
    { address: "192.0.2.2", family: "IPv4", prefix: 24, scope: "public" },
    { address: "fd00::2", family: "IPv6", prefix: 64, scope: "private" },
    { address: "fe80::fc:ff:fe00:1", family: "IPv6", prefix: 64, scope: "link-local" },
  ]);
  const bb = parseIpAddress(BUSYBOX);
  assert.deepEqual(bb[1].addresses, [
    { address: "10.1.2.3", family: "IPv4", prefix: 24, scope: "private" },
  ]);
});

Deno.test("ip route: default routes only, from iproute2 and busybox", () => {
  assert.deepEqual(parseDefaultRoutes("default via 192.0.2.1 dev eth0 \n", "IPv4"), [
    { family: "IPv4", device: "eth0", via: "192.0.2.1" },
  ]);
  // busybox prints every route even when asked for the default one
  const bb = "default via 192.0.2.1 dev eth0 \n192.0.2.0/24 dev eth0 scope link  src 192.0.2.2 \n";
  assert.equal(parseDefaultRoutes(bb, "IPv4").length, 1);
  assert.deepEqual(parseDefaultRoutes("default dev wg0 scope link\n", "IPv4"), [
    { family: "IPv4", device: "wg0" },
  ]);
  assert.deepEqual(parseDefaultRoutes("unreachable default dev lo\n", "IPv6"), []);
});

Deno.test("position: offline, isolated, private, public", () => {
  const ifs = parseIpAddress(BUSYBOX);
  const route = [{ family: "IPv4" as const, device: "eth0" }];
  assert.equal(positionOf(ifs.slice(0, 1), []), "offline");
  assert.equal(positionOf(ifs, []), "isolated");
  assert.equal(positionOf(ifs, route), "private");
  assert.equal(positionOf(parseIpAddress(IPROUTE2), route), "public");
  assert.equal(scopeOf("100.64.1.1", "IPv4"), "shared");
  assert.equal(scopeOf("2001:db8::1", "IPv6"), "public");
});

Deno.test("logind session files: type, state, active", () => {
  const s = parseSession(
    "3",
    "UID=1000\nUSER=ana\nACTIVE=1\nSTATE=active\nTYPE=wayland\nSEAT=seat0\n",
  );
  assert.deepEqual(s, {
    id: "3",
    type: "wayland",
    state: "active",
    active: true,
    user: "ana",
    seat: "seat0",
  });
});

Deno.test("profileText prints every capability with its evidence", () => {
  const cap = (state: "absent" | "working", provider?: string) => ({
    state,
    ...(provider ? { provider } : {}),
    evidence: [`${state} because`],
  });
  const text = profileText({
    detectedAt: "2026-01-01T00:00:00Z",
    os: { id: "arch", prettyName: "Arch Linux", like: [] },
    architecture: "x86_64",
    capabilities: {
      init: cap("working", "systemd"),
      packages: cap("working", "pacman"),
      containers: cap("absent"),
      graphical: cap("absent"),
      network: cap("absent"),
      wireguard: cap("working", "kernel"),
      nftables: cap("absent"),
      accounts: cap("working", "shadow"),
    },
  });
  assert.match(text, /^os {11}Arch Linux \(arch\)\n/);
  assert.match(text, /\ninit {9}working systemd\n {15}working because\n/);
  assert.match(text, /\ncontainers {3}absent\n/);
  assert.match(text, /\naccounts {5}working shadow\n/);
  assert.equal(stronger("present", "running"), "running");
});
