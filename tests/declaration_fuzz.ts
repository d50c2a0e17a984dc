/**
 * A seeded fuzzer of the declaration parse: mutates valid declarations in-process
 * and holds every outcome to the oracle of DESIGN.md §4 and §17. Either the parse
 * refuses with its own error (DeclarationRefused), or what it returns satisfies every
 * invariant: paths absolute, normalised, within the byte limits, inside a managed
 * root, neither an own path nor above one; ids and keys unique; modes in the
 * documented form; command-line strings with no leading "-", NUL or line break;
 * images pinned by digest; no action outside the bundle; nothing declared dropped
 * (the parsed value is the text's value); kernel settings one per setting however
 * spelled, none that runs a program or turns a protection off outside the bundle, a
 * one-way value only as permanent; no service that stops the node outside the
 * bundle; overlays whose ports, addresses, endpoints and allowed-ips can converge;
 * references whose size and digest can both hold; restartOn naming earlier ids. The
 * oracle says each of these in its own words (the URL parser canonicalises addresses
 * for it), not by calling the parse's helpers. A parse that takes over 100 ms (three
 * times running, so a loaded machine's pause is not one) is a finding too. Anything
 * else (another exception, a broken invariant) is a finding, reported with its seed
 * and case.
 *
 * `deno task fuzz [cases] [seed]` runs it for as long as asked; the test
 * (declaration_fuzz_test.ts) runs a few thousand cases on every `deno task test`.
 */
import { posix } from "node:path";
import { canonicalJson } from "../src/declaration/canonical.ts";
import { DeclarationRefused } from "../src/declaration/envelope.ts";
import type { ParseOptions } from "../src/declaration/options.ts";
import { parseDeclaration, parseTrustedDeclaration } from "../src/engine/parse.ts";
import type { Resource } from "../src/resources/mod.ts";
import { ALL_OWN_PATHS } from "../packaging/own_paths_by_os.ts";

const ROOTS = ["/etc", "/srv", "/opt", "/var/lib", "/var/log", "/usr/local", "/home"];
const OWN = [...ALL_OWN_PATHS, "/var/lib/mesh-host", "/etc/mesh-host"];

/** The options every case is parsed with. */
export const FUZZ_OPTIONS: ParseOptions = {
  managedRoots: ROOTS,
  own: { paths: OWN, services: ["nox-mesh-host"] },
  origin: "fuzz",
};

/** A small, fast, seedable PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const DIGEST = "a".repeat(64);
/** The SHA-256 of no bytes. */
const EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const KEY_A = "jxlJGHqZrWSspB9nXdeICdFGe/vy5BAdrIbdgxYWOBA=";
const KEY_B = "qHx8q8zBIH040lFLKL+paPfe8h5hqEtOvKzrtk57SHU=";

/** A parse slower than this (three times running) is a finding. */
export const SLOW_MS = 100;

/** Valid declarations to start from (the last one only the trusted parse accepts). */
function seeds(): Record<string, unknown>[] {
  return [
    {
      version: 1,
      node: "node-1",
      serial: 7,
      resources: [
        { type: "directory", id: "d", path: "/etc/app", mode: "0755", owner: "root", group: "0" },
        {
          type: "file",
          id: "f",
          path: "/etc/app/app.conf",
          content: "a = 1\n",
          mode: "0640",
          owner: "root",
          group: "root",
        },
        { type: "package", id: "p", name: "wireguard-tools", version: "1.0.2-1" },
        { type: "service", id: "s", name: "wg-quick@wg0", enabled: true, running: true },
      ],
    },
    {
      version: 1,
      resources: [
        {
          type: "container",
          id: "c",
          name: "registry",
          image: `localhost/registry@sha256:${DIGEST}`,
          args: ["--port", "5000"],
          env: { HOME: "/root", A_1: "x" },
          mounts: [{ source: "/srv/registry", target: "/data", readOnly: true }],
          restart: "always",
        },
        {
          type: "directory",
          id: "shared",
          path: "/srv/shared",
          mode: "0775",
          setgid: true,
          sticky: true,
          owner: "1000",
          group: "1000",
        },
        {
          type: "file",
          id: "bin",
          path: "/usr/local/lib/tool",
          contentBase64: "AAEC",
          mode: "0755",
          setuid: true,
          owner: "root",
          group: "root",
        },
      ],
    },
    {
      version: 1,
      node: "node-2",
      serial: 3,
      resources: [
        {
          type: "overlay",
          id: "o",
          interface: "wg0",
          addresses: ["10.77.0.1/24", "fd77::1/64"],
          listenPort: 51820,
          mtu: 1420,
          peers: [
            {
              publicKey: KEY_A,
              endpoint: "198.51.100.7:51820",
              allowedIps: ["10.77.0.2/32", "fd77::2/128"],
              persistentKeepalive: 25,
            },
            { publicKey: KEY_B, endpoint: "[2001:db8::7]:51820", allowedIps: ["10.77.1.0/24"] },
          ],
        },
        {
          type: "firewall",
          id: "fw",
          family: "inet",
          table: "mesh",
          rules: "chain input {\n  type filter hook input priority 0; policy accept;\n" +
            "  tcp dport 22 accept\n}\n",
        },
      ],
    },
    {
      version: 1,
      resources: [
        { type: "sysctl", id: "k", key: "net.ipv4.ip_forward", value: 1 },
        { type: "sysctl", id: "cp", key: "kernel/core_pattern", value: "core.%p" },
        { type: "sysctl", id: "ps", key: "kernel.yama.ptrace_scope", value: 2 },
        { type: "sysctl", id: "m", key: "kernel.modules_disabled", value: 1, permanent: true },
      ],
    },
    {
      version: 1,
      resources: [
        {
          type: "file",
          id: "big",
          path: "/srv/big.bin",
          contentSha256: DIGEST,
          size: 5,
          mode: "0644",
          owner: "root",
          group: "root",
        },
        {
          type: "file",
          id: "empty",
          path: "/srv/empty",
          contentSha256: EMPTY,
          size: 0,
          mode: "0644",
          owner: "root",
          group: "root",
        },
        {
          type: "service",
          id: "svc",
          name: "app.service",
          enabled: true,
          running: true,
          restartOn: ["big"],
          reload: true,
        },
        {
          type: "container",
          id: "web",
          name: "web",
          image: `localhost/web@sha256:${DIGEST}`,
          args: [],
          env: { constructor: "x", prototype: "y", valueOf: "z" },
          mounts: [],
          restart: "no",
          restartOn: ["big", "svc"],
        },
      ],
    },
    {
      version: 1,
      resources: [
        { type: "directory", id: "md", path: "/srv/data", mode: "0755", owner: "root", group: "0" },
        {
          type: "mount",
          id: "m",
          target: "/srv/data",
          source: "UUID=3b1d2c7e-1111-4a2b-9c3d-0123456789ab",
          fstype: "ext4",
          options: ["noatime", "errors=remount-ro"],
        },
        { type: "mount", id: "t", target: "/srv/data/tmp", source: "tmpfs", fstype: "tmpfs" },
        {
          type: "mount",
          id: "b",
          target: "/opt/www",
          source: "/srv/data/www",
          fstype: "bind",
          options: ["ro", "noexec"],
        },
      ],
    },
    {
      version: 1,
      resources: [
        {
          type: "action",
          id: "a",
          run: ["/usr/bin/true"],
          verify: ["/usr/bin/test", "-f", "/etc/x"],
        },
        { type: "service", id: "t", name: "backup.timer", enabled: true, running: false },
      ],
    },
  ];
}

const STRINGS = [
  "",
  "-",
  "--help",
  "-rf",
  "/",
  ".",
  "..",
  "/etc",
  "/var/lib",
  "/usr/local",
  "/etc/systemd/system",
  "/etc/systemd/system/nox-mesh-.service.d/x.conf",
  "/etc/systemd/system/service.d/x.conf",
  "/etc/conf.d/nox-mesh-host.default",
  "/etc/runlevels/boot/nox-mesh-host",
  "/usr/local/sbin/nox-mesh-host",
  "/var/lib/mesh-host/state.db",
  "/var/log/nox-mesh-host.log",
  "/etc/a,b",
  '/srv/a"b',
  "/etc/../root",
  "/etc//x",
  "/etc/x/",
  "etc/x",
  "/root/.ssh/authorized_keys",
  "0644",
  "644",
  "4755",
  "07777",
  "0o644",
  "4294967294",
  "4294967295",
  "99999999999",
  "root",
  "nox-mesh-host",
  "nox-mesh-host.socket",
  "nox-mesh-host@x.service",
  "reboot.target",
  "sshd.socket",
  "x.mount",
  "net.eth0",
  "toString",
  "__proto__",
  "constructor",
  "valueOf",
  "hasOwnProperty",
  "file",
  "directory",
  "action",
  "container",
  `img@sha256:${DIGEST}`,
  "img:latest",
  "\u0000",
  "\n",
  "\r",
  "\t",
  "\u0085",
  "\u009b",
  "\u202e",
  "\u2066",
  "\ud800",
  "\udc00",
  "\ud83d\ude00",
  "é".repeat(128),
  // Overlays: addresses, blocks and endpoints, in their one spelling and others.
  "fe80::1/64",
  "FE80::9/64",
  "fd77::1/128",
  "fd77::1/64",
  "fd77:0::2/128",
  "10.77.0.1/32",
  "10.77.0.0/16",
  "0.0.0.0/0",
  "::/0",
  "198.51.100.7:51820",
  "010.0.0.1:51820",
  "127.1:51820",
  "0x7f.0.0.1:1",
  "[2001:DB8::1]:51820",
  "[2001:db8:0:0:0:0:0:1]:51820",
  "[2001:db8::1]:51820",
  "[::ffff:1.2.3.4]:1",
  "[::1.2.3.4]:1",
  "[1:2:3:4:5:6:7:8:9]:1",
  "a..b:1",
  "peer.example.org:51820",
  ":51820",
  KEY_A,
  KEY_B,
  // Kernel settings and their values.
  "kernel.core_pattern",
  "kernel/core_pattern",
  "|/srv/x %p",
  "@/run/core.sock",
  "kernel.modprobe",
  "kernel.usermodehelper.bset",
  "fs.binfmt_misc.register",
  "kernel.randomize_va_space",
  "kernel.perf_event_paranoid",
  "vm.mmap_min_addr",
  "vm.unprivileged_userfaultfd",
  "fs.suid_dumpable",
  "fs/protected_symlinks",
  "kernel.yama.ptrace_scope",
  "kernel.unprivileged_bpf_disabled",
  "kernel.modules_disabled",
  "kernel.io_uring_disabled",
  "net.ipv4.ip_forward",
  "net/ipv4.ip_forward",
  "net/ipv4/ip_forward",
  "net/ipv4/conf/a.b/forwarding",
  "0x1",
  "01",
  "1 0",
  // Services that stop the node, and references.
  "systemd-reboot.service",
  "rescue",
  "emergency.service",
  "killprocs",
  "mount-ro",
  "debug-shell.socket",
  "poweroff.target",
  EMPTY,
  // Firewall rules.
  'include "/etc/x"',
  "}",
  "{",
  "chain x { }",
  "a".repeat(256),
  "/etc" + `/${"é".repeat(100)}`.repeat(21),
  // Mounts: sources, types and options.
  "bind",
  "tmpfs",
  "ext4",
  "fuse.sshfs",
  "UUID=3b1d2c7e",
  "LABEL=data",
  "LABEL=a b",
  "/dev/vdb1",
  "/dev/shm/disk.img",
  "/dev/disk/by-uuid/x",
  "/srv/a b",
  "/srv/a%b",
  "/srv/a\\b",
  "/proc",
  "ro",
  "rw",
  "suid",
  "dev",
  "exec",
  "noexec",
  "rbind",
  "user",
  "loop",
  "nofail",
  "x-systemd.automount",
  "mode=1777",
  "mode=0755",
  "size=64m",
  "noatime",
  "relatime",
];

const KEYS = [
  "type",
  "id",
  "path",
  "mode",
  "owner",
  "group",
  "content",
  "contentBase64",
  "setuid",
  "setgid",
  "sticky",
  "name",
  "version",
  "enabled",
  "running",
  "image",
  "args",
  "env",
  "mounts",
  "source",
  "target",
  "readOnly",
  "restart",
  "run",
  "verify",
  "__proto__",
  "constructor",
  "prototype",
  "node",
  "serial",
  "resources",
  "key",
  "value",
  "permanent",
  "interface",
  "addresses",
  "listenPort",
  "mtu",
  "peers",
  "publicKey",
  "endpoint",
  "allowedIps",
  "persistentKeepalive",
  "family",
  "table",
  "rules",
  "contentSha256",
  "size",
  "restartOn",
  "reload",
  "fstype",
  "options",
];

const NUMBERS = [
  0,
  -1,
  1.5,
  1,
  2,
  3,
  576,
  1279,
  1280,
  51820,
  65536,
  4294967295,
  1e21,
  Number.MAX_SAFE_INTEGER + 2,
];

/** The field that names what a resource manages (its key), by type. */
const KEY_FIELD: Record<string, string> = {
  file: "path",
  directory: "path",
  package: "name",
  service: "name",
  container: "name",
  overlay: "interface",
  firewall: "table",
  sysctl: "key",
  mount: "target",
};

type Json = unknown;

/** One mutation case: the text handed to the parse, and whether the trusted parse reads it. */
export interface FuzzCase {
  text: string;
  trusted: boolean;
}

/** The `index`-th case of a run seeded with `seed` (deterministic). */
export function fuzzCase(seed: number, index: number): FuzzCase {
  const random = prng((seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const all = seeds();
  const start = Math.floor(random() * all.length);
  const value = structuredClone(all[start]) as Json;
  const trusted = start === all.length - 1 ? random() < 0.7 : random() < 0.1;

  const randomString = (): string => {
    const r = random();
    if (r < 0.5) return pick(STRINGS);
    if (r < 0.8) return pick(STRINGS) + pick(STRINGS);
    const base = pick(STRINGS);
    const at = Math.floor(random() * (base.length + 1));
    return base.slice(0, at) + pick(STRINGS) + base.slice(at);
  };
  const randomValue = (depth = 0): Json => {
    const r = random();
    if (r < 0.45) return randomString();
    if (r < 0.55) return pick(NUMBERS);
    if (r < 0.65) return random() < 0.5;
    if (r < 0.7) return null;
    if (r < 0.85 && depth < 2) return [randomValue(depth + 1), randomValue(depth + 1)];
    if (depth < 2) return { [pick(KEYS)]: randomValue(depth + 1) };
    return randomString();
  };
  /** Every container (object or array) in the value, with the value itself. */
  const containers = (v: Json, out: (Record<string, Json> | Json[])[] = []) => {
    if (Array.isArray(v)) {
      out.push(v);
      v.forEach((x) => containers(x, out));
    } else if (v !== null && typeof v === "object") {
      out.push(v as Record<string, Json>);
      Object.values(v).forEach((x) => containers(x, out));
    }
    return out;
  };

  /**
   * A twin: a resource declared again under a new id, its key as it was, or spelled
   * otherwise (a sysctl's separators swapped), or changed: what two resources of one
   * declaration may not both hold (a port, a setting, a path) comes from here.
   */
  const twin = () => {
    const resources = (value as { resources?: unknown }).resources;
    if (!Array.isArray(resources) || resources.length === 0) return;
    const original = pick(resources);
    if (original === null || typeof original !== "object" || Array.isArray(original)) return;
    const copy = structuredClone(original) as Record<string, Json>;
    copy.id = `${String(copy.id)}-2`;
    const field = Object.hasOwn(KEY_FIELD, String(copy.type))
      ? KEY_FIELD[String(copy.type)]
      : undefined;
    const key = field === undefined ? undefined : copy[field];
    if (field !== undefined && typeof key === "string") {
      const r = random();
      if (r < 0.3) {
        const at = Math.floor(random() * key.length);
        const swap: Record<string, string> = { ".": "/", "/": "." };
        copy[field] = key.slice(0, at) + key.slice(at).replace(/[./]/, (c) => swap[c]);
      } else if (r < 0.7) copy[field] = `${key}2`;
    }
    resources.splice(Math.floor(random() * (resources.length + 1)), 0, copy);
  };

  const steps = 1 + Math.floor(random() * 3);
  for (let step = 0; step < steps; step++) {
    if (random() < 0.15) {
      twin();
      continue;
    }
    const target = pick(containers(value));
    const keys = Array.isArray(target) ? target.map((_, i) => i) : Object.keys(target);
    const r = random();
    if (keys.length > 0 && r < 0.45) {
      const key = pick(keys as (string | number)[]);
      const old = (target as Record<string | number, Json>)[key];
      (target as Record<string | number, Json>)[key] = typeof old === "string" && random() < 0.6
        ? (random() < 0.5 ? old + randomString() : randomString() + old)
        : typeof old === "number" && random() < 0.6
        ? pick(NUMBERS)
        : randomValue();
    } else if (keys.length > 0 && r < 0.6) {
      const key = pick(keys as (string | number)[]);
      if (Array.isArray(target)) target.splice(key as number, 1);
      else delete (target as Record<string, Json>)[key as string];
    } else if (r < 0.8) {
      if (Array.isArray(target)) {
        target.push(structuredClone(pick(target.length ? target : [randomValue()])));
      } else {Object.defineProperty(target, pick(KEYS), {
          value: randomValue(),
          enumerable: true,
          writable: true,
          configurable: true,
        });}
    } else if (Array.isArray(target) && target.length > 1) {
      target.reverse();
    } else if (!Array.isArray(target)) {
      (target as Record<string, Json>)[pick(KEYS)] = randomValue();
    }
  }
  let text = JSON.stringify(value);
  // Text-level mutations: a duplicate key, an escaped lone surrogate, a cut.
  const t = random();
  if (t < 0.08) {
    const at = text.indexOf('"', Math.floor(random() * text.length));
    const m = /^"(type|id|path|mode|name|owner)":("[^"]*"|true|false|\d+)/.exec(text.slice(at));
    if (m) {
      text = text.slice(0, at) + `"${m[1]}":${JSON.stringify(randomString())},` + text.slice(at);
    }
  } else if (t < 0.12) {
    text = text.replace(/"(\/[^"]*)"/, `"$1\\u${pick(["d800", "dc00", "202e", "0085"])}"`);
  } else if (t < 0.14) {
    text = text.slice(0, Math.floor(random() * text.length));
  }
  return { text, trusted };
}

/** Whether `path` is `root` or lies below it. */
const within = (path: string, root: string) => path === root || path.startsWith(root + "/");

/** An own-path pattern as a regular expression for one component at a time. */
const ownParts = OWN.map((p) =>
  p.split("/").slice(1).map((c) =>
    new RegExp(
      `^${c.split("*").map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`,
      "s",
    )
  )
);

/** A host as the WHATWG URL parser writes it (its own canonical form), or `undefined`. */
function urlHost(host: string): string | undefined {
  try {
    return new URL(`http://${host}/`).hostname;
  } catch {
    return undefined;
  }
}

/** An address of a CIDR block as a family and a number (the URL parser reads it). */
function addressBits(text: string): { family: 4 | 6; bits: bigint } | undefined {
  if (text.includes(":")) {
    const host = urlHost(`[${text}]`);
    if (host === undefined) return undefined;
    const [head, tail] = host.slice(1, -1).split("::");
    const h = head ? head.split(":") : [];
    const t = tail ? tail.split(":") : [];
    const words = tail === undefined
      ? h
      : [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
    return { family: 6, bits: words.reduce((a, w) => (a << 16n) | BigInt(parseInt(w, 16)), 0n) };
  }
  const host = urlHost(text);
  if (host === undefined || !/^\d+\.\d+\.\d+\.\d+$/.test(host)) return undefined;
  return { family: 4, bits: host.split(".").reduce((a, n) => (a << 8n) | BigInt(n), 0n) };
}

/** A CIDR block as its first and last address. */
function block(text: string) {
  const [address, prefix] = text.split("/");
  const a = addressBits(address)!;
  const width = BigInt((a.family === 4 ? 32 : 128) - Number(prefix ?? (a.family === 4 ? 32 : 128)));
  const first = (a.bits >> width) << width;
  return {
    family: a.family,
    bits: a.bits,
    prefix: Number(prefix),
    first,
    last: first + (1n << width) - 1n,
  };
}

/** One integer as the kernel reads it (0x hex, 0 octal, decimal), or `undefined`. */
function kernelInt(value: string | number): number | undefined {
  const t = String(value).trim();
  const sign = t.startsWith("-") ? -1 : 1;
  const u = t.replace(/^-/, "");
  if (/^0[xX][0-9a-fA-F]{1,12}$/.test(u)) return sign * parseInt(u.slice(2), 16);
  if (/^0[0-7]{0,12}$/.test(u)) return sign * parseInt(u, 8);
  if (/^[1-9][0-9]{0,12}$/.test(u)) return sign * Number(u);
  return undefined;
}

/** Settings that run a program as root, with the values that do. */
function runsProgram(name: string, value: string | number): boolean {
  if (name === "kernel.core_pattern") return /^\s*[|@]/.test(String(value));
  return ["kernel.modprobe", "kernel.poweroff_cmd", "kernel.hotplug"].includes(name) ||
    /^(kernel\.usermodehelper|fs\.binfmt_misc)\../.test(name);
}

/** Protections, with the values that keep them on (a Map: no name reaches Object.prototype). */
const KEEPS_ON = new Map<string, (n: number) => boolean>(Object.entries({
  "kernel.randomize_va_space": (n: number) => n >= 2,
  "kernel.kptr_restrict": (n: number) => n >= 1,
  "kernel.dmesg_restrict": (n: number) => n >= 1,
  "fs.suid_dumpable": (n: number) => n === 0,
  "fs.protected_symlinks": (n: number) => n >= 1,
  "fs.protected_hardlinks": (n: number) => n >= 1,
  "fs.protected_fifos": (n: number) => n >= 1,
  "fs.protected_regular": (n: number) => n >= 1,
  "kernel.yama.ptrace_scope": (n: number) => n >= 1,
  "kernel.unprivileged_bpf_disabled": (n: number) => n >= 1,
  "kernel.perf_event_paranoid": (n: number) => n >= 2,
  "vm.mmap_min_addr": (n: number) => n >= 4096,
  "vm.unprivileged_userfaultfd": (n: number) => n === 0,
}));

/** Values the kernel never lowers again. */
const ONE_WAY_VALUES = new Map<string, number>([
  ["kernel.modules_disabled", 1],
  ["kernel.kexec_load_disabled", 1],
  ["kernel.yama.ptrace_scope", 3],
  ["kernel.unprivileged_bpf_disabled", 1],
  ["kernel.io_uring_disabled", 2],
]);

/** Services that reboot, power off, suspend or isolate the node (both inits). */
const STOPS_NODE = new Set([
  "systemd-reboot",
  "systemd-kexec",
  "systemd-poweroff",
  "systemd-halt",
  "systemd-soft-reboot",
  "systemd-suspend",
  "systemd-hibernate",
  "systemd-hybrid-sleep",
  "systemd-suspend-then-hibernate",
  "emergency",
  "rescue",
  "debug-shell",
  "killprocs",
  "mount-ro",
  "savecache",
]);

/** Why a peer endpoint is not in the one spelling `wg show` prints, or `undefined`. */
function endpointBroken(endpoint: string): string | undefined {
  const cut = endpoint.lastIndexOf(":");
  const host = endpoint.slice(0, cut);
  const port = endpoint.slice(cut + 1);
  if (!/^[1-9]\d{0,4}$/.test(port) || Number(port) > 65535) return `port of ${endpoint}`;
  if (host.startsWith("[")) {
    const canonical = urlHost(host);
    if (canonical !== host) return `${endpoint} is not as wg prints it (${canonical})`;
    // IPv4 in IPv6 form: ::ffff:a.b.c.d and ::a.b.c.d (wg prints them dotted).
    if (/^\[::(ffff:)?[0-9a-f]{1,4}:[0-9a-f]{1,4}\]$/.test(host)) return `${endpoint} is IPv4`;
    return undefined;
  }
  const canonical = urlHost(host);
  if (canonical !== undefined && /^\d+\.\d+\.\d+\.\d+$/.test(canonical)) {
    return canonical === host ? undefined : `${endpoint} means ${canonical}`;
  }
  const labels = host.split(".");
  if (
    host.length > 253 || !/^[A-Za-z]/.test(labels[labels.length - 1]) ||
    !labels.every((l) => /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(l))
  ) return `${endpoint} has no valid host`;
  return undefined;
}

/** The invariants of a parsed declaration; returns what is broken (empty: nothing). */
export function brokenInvariants(resources: Resource[], trusted: boolean): string[] {
  const broken: string[] = [];
  const encoder = new TextEncoder();
  const checkString = (s: string, what: string) => {
    if (!s.isWellFormed()) broken.push(`${what} is not well-formed`);
  };
  const checkPath = (p: string, what: string, managed: boolean) => {
    checkString(p, what);
    if (!p.startsWith("/") || posix.normalize(p) !== p || p.endsWith("/")) {
      broken.push(`${what} ${JSON.stringify(p)} is not absolute and normalised`);
    }
    if (p.split("/").includes("..")) broken.push(`${what} has ..`);
    // deno-lint-ignore no-control-regex
    if (/[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/.test(p)) {
      broken.push(`${what} has a control`);
    }
    if (encoder.encode(p).length > 4095) broken.push(`${what} is over 4095 bytes`);
    if (p.split("/").some((c) => encoder.encode(c).length > 255)) {
      broken.push(`${what} has a long name`);
    }
    if (!managed) return;
    if (!ROOTS.some((r) => within(p, r))) broken.push(`${what} ${p} is outside the roots`);
    if (ROOTS.some((r) => within(r, p))) broken.push(`${what} ${p} is or contains a root`);
    const names = p.split("/").slice(1);
    for (const parts of ownParts) {
      const n = Math.min(parts.length, names.length);
      if (parts.slice(0, n).every((re, i) => re.test(names[i]))) {
        broken.push(`${what} ${p} is, or is above, an own path`);
        break;
      }
    }
  };
  const commandWord = (s: string, what: string) => {
    checkString(s, what);
    if (s.startsWith("-") || /[\0\n\r]/.test(s)) {
      broken.push(`${what} ${JSON.stringify(s)} is unsafe`);
    }
  };
  const ids = new Set<string>();
  const settings = new Set<string>();
  const ports = new Set<number>();
  const keys = new Set<string>();
  for (const r of resources) {
    if (ids.has(r.id)) broken.push(`duplicate id ${r.id}`);
    commandWord(r.id, "id");
    for (const [i, id] of ((r as { restartOn?: string[] }).restartOn ?? []).entries()) {
      if (!ids.has(id)) broken.push(`restartOn ${id} of ${r.id} names no earlier resource`);
      if ((r as { restartOn: string[] }).restartOn.indexOf(id) !== i) {
        broken.push("restartOn twice");
      }
    }
    ids.add(r.id);
    switch (r.type) {
      case "file":
      case "directory":
        checkPath(r.path, `${r.type} path`, true);
        if (!/^0[0-7]{3}$/.test(r.mode)) broken.push(`mode ${r.mode}`);
        for (const who of [r.owner, r.group]) {
          checkString(who, "owner/group");
          if (/^\d+$/.test(who) && Number(who) > 4294967294) broken.push(`id ${who}`);
        }
        if (r.type === "file" && r.content !== undefined) checkString(r.content, "content");
        if (r.type === "file" && (r.size === 0) !== (r.contentSha256 === EMPTY)) {
          broken.push(`a reference of size ${r.size} with digest ${r.contentSha256}`);
        }
        break;
      case "package":
        commandWord(r.name, "package name");
        if (r.version !== undefined) commandWord(r.version, "package version");
        break;
      case "service": {
        commandWord(r.name, "service name");
        const base = r.name.split(/[.@]/)[0];
        if (base === "nox-mesh-host") broken.push(`own service ${r.name}`);
        if (/\.(target|mount|device|swap|slice|scope|automount)$/.test(r.name)) {
          broken.push(`unit type of ${r.name}`);
        }
        if (!trusted && STOPS_NODE.has(base) && (r.running || r.enabled)) {
          broken.push(`${r.name} stops the node, started or enabled outside the bundle`);
        }
        break;
      }
      case "sysctl": {
        const name = r.key.replaceAll("/", ".");
        if (settings.has(name)) broken.push(`setting ${name} declared twice`);
        settings.add(name);
        if (/[\0\n\r]/.test(String(r.value))) broken.push(`value of ${name} is not one line`);
        if (!trusted && runsProgram(name, r.value)) broken.push(`${name} runs a program`);
        const n = kernelInt(r.value);
        const keepsOn = KEEPS_ON.get(name);
        if (!trusted && keepsOn && (n === undefined || !keepsOn(n))) {
          broken.push(`${name} = ${r.value} turns a protection off`);
        }
        const oneWay = ONE_WAY_VALUES.has(name) && n === ONE_WAY_VALUES.get(name);
        if (oneWay !== (r.permanent === true)) {
          broken.push(
            `${name} = ${r.value} ${oneWay ? "one-way, not" : "is not one-way, yet"} permanent`,
          );
        }
        break;
      }
      case "overlay": {
        if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$/.test(r.interface)) broken.push("interface name");
        if (r.listenPort !== undefined) {
          if (ports.has(r.listenPort)) broken.push(`listenPort ${r.listenPort} twice`);
          ports.add(r.listenPort);
        }
        const v6 = new Map<bigint, number>();
        for (const a of r.addresses) {
          const b = block(a);
          if (b.family !== 6) continue;
          if (b.bits >> 118n === 0x3fan) broken.push(`link-local address ${a}`);
          if (r.mtu !== undefined && r.mtu < 1280) {
            broken.push(`IPv6 address ${a} with mtu ${r.mtu}`);
          }
          if (v6.has(b.bits) && v6.get(b.bits) !== b.prefix) broken.push(`${a} with two prefixes`);
          v6.set(b.bits, b.prefix);
        }
        const peerKeys = new Set<string>();
        for (const peer of r.peers) {
          if (peerKeys.has(peer.publicKey)) broken.push("a peer twice");
          peerKeys.add(peer.publicKey);
          if (peer.endpoint !== undefined) {
            const why = endpointBroken(peer.endpoint);
            if (why) broken.push(`endpoint: ${why}`);
          }
        }
        const blocks = r.peers.flatMap((peer, i) =>
          peer.allowedIps.map((a) => ({ ...block(a), peer: i }))
        );
        for (const x of blocks) {
          for (const y of blocks) {
            if (
              x.peer < y.peer && x.family === y.family && x.first <= y.last && y.first <= x.last
            ) broken.push(`allowed-ips of peers ${x.peer} and ${y.peer} overlap`);
          }
        }
        break;
      }
      case "firewall":
        if (!/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/.test(r.table)) broken.push(`table ${r.table}`);
        if (/(^|[^\w$@.-])include\b/.test(r.rules.replace(/#[^\n]*|"[^"\n]*"/g, ""))) {
          broken.push("rules include a file");
        }
        if (r.rules.includes("\0")) broken.push("rules with a NUL");
        if (new TextEncoder().encode(r.rules).length > 256 * 1024) broken.push("rules too long");
        break;
      case "container":
        commandWord(r.name, "container name");
        if (!/^[a-z0-9][a-z0-9._/:-]*@sha256:[a-f0-9]{64}$/.test(r.image)) {
          broken.push(`image ${r.image}`);
        }
        for (const a of r.args) {
          if (/[\0\n\r]/.test(a) || !a.isWellFormed()) broken.push("container arg");
        }
        for (const [k, v] of Object.entries(r.env)) {
          if (/[\0\n\r]/.test(v) || !v.isWellFormed()) broken.push(`env ${k}`);
        }
        for (const m of r.mounts) {
          checkPath(m.source, "mount source", true);
          checkPath(m.target, "mount target", false);
          if (/[,"]/.test(m.source + m.target)) broken.push("mount with a comma or quote");
        }
        break;
      case "mount": {
        checkPath(r.target, "mount target", true);
        const unsafe = (p: string) => /[\s\\%'"]/.test(p);
        if (unsafe(r.target)) broken.push(`mount target ${r.target} needs escaping`);
        if (r.fstype === "bind") {
          checkPath(r.source, "bind source", true);
          if (unsafe(r.source)) broken.push(`bind source ${r.source} needs escaping`);
          if (within(r.source, r.target)) broken.push("a bind of a path below its target");
          const users = ["/home", "/tmp", "/var/tmp", "/dev/shm", "/run/user"];
          const config = ["/etc", "/usr", "/boot", "/root", "/var/lib", "/srv"];
          if (
            users.some((d) => within(r.source, d)) && config.some((d) => within(r.target, d))
          ) broken.push(`a bind of users' ${r.source} onto root's ${r.target}`);
        } else if (r.fstype === "tmpfs") {
          if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(r.source)) broken.push("tmpfs name");
        } else if (r.source.startsWith("/dev/")) {
          checkPath(r.source, "device", false);
          if (!/^[A-Za-z0-9._+:@/-]+$/.test(r.source)) broken.push(`device ${r.source}`);
          if (["/dev/shm", "/dev/mqueue", "/dev/pts", "/dev/fd"].some((d) => within(r.source, d))) {
            broken.push(`device ${r.source} where others write`);
          }
        } else if (!/^(UUID=[0-9A-Za-z-]{1,64}|LABEL=[A-Za-z0-9._+:@-]{1,64})$/.test(r.source)) {
          broken.push(`device source ${r.source}`);
        }
        const options = r.options ?? [];
        const flags = ["ro", "rw", "suid", "nosuid", "dev", "nodev", "exec", "noexec"];
        const atime = ["noatime", "relatime", "strictatime"];
        if (new Set(options).size !== options.length) broken.push("an option twice");
        for (const o of options) {
          const name = o.split("=")[0];
          if (
            ["user", "users", "owner", "group", "loop", "rbind", "bind", "remount", "move"]
              .includes(name) || /^(r?shared|r?slave|r?private|r?unbindable)$/.test(name)
          ) broken.push(`option ${o}`);
          if (!/^[a-z0-9_]+(=[A-Za-z0-9._:@/+-]*)?$/.test(o)) broken.push(`option ${o}`);
          const flag = flags.includes(o) || atime.includes(o) || o === "nodiratime";
          if (r.fstype === "bind" && !flag) broken.push(`filesystem option ${o} on a bind`);
          if ([...flags, ...atime, "nodiratime"].includes(name) && o.includes("=")) {
            broken.push(`flag ${o} with a value`);
          }
        }
        for (const [a, b] of [["ro", "rw"], ["suid", "nosuid"], ["dev", "nodev"]]) {
          if (options.includes(a) && options.includes(b)) broken.push(`${a} and ${b}`);
        }
        if (atime.filter((a) => options.includes(a)).length > 1) broken.push("two atime flags");
        const mode = options.find((o) => o.startsWith("mode="))?.slice(5);
        const open = mode === undefined || !/^[0-7]{1,4}$/.test(mode) ||
          (parseInt(mode, 8) & 0o022) !== 0;
        if (r.fstype === "tmpfs" && open && (options.includes("suid") || options.includes("dev"))) {
          broken.push("suid or dev on a tmpfs others write");
        }
        break;
      }
      case "action":
        if (!trusted) broken.push("an action outside the bundle");
        for (const a of [...r.run, ...r.verify]) if (a.includes("\0")) broken.push("action NUL");
        checkPath(r.run[0], "action program", false);
        checkPath(r.verify[0], "action program", false);
        break;
      default:
        broken.push(`unknown type ${(r as { type: string }).type}`);
    }
    const key = r.type === "sysctl" ? "" : `${r.type}:${canonicalJson(keyOf(r))}`;
    if (key && keys.has(key)) broken.push(`two resources manage ${key}`);
    keys.add(key);
  }
  // Nothing lies below a mount's target (or binds a path at or below it) declared before it.
  resources.forEach((r, i) => {
    const below = r.type === "file" || r.type === "directory"
      ? [r.path]
      : r.type === "mount"
      ? [r.target]
      : [];
    const atOrBelow = r.type === "mount" && r.fstype === "bind" ? [r.source] : [];
    resources.slice(i + 1).forEach((m) => {
      if (m.type !== "mount") return;
      if (below.some((p) => p !== m.target && within(p, m.target))) {
        broken.push(`${r.id} lies inside the mount ${m.id}, declared after it`);
      }
      if (atOrBelow.some((p) => within(p, m.target))) {
        broken.push(`${r.id} binds a path in the mount ${m.id}, declared after it`);
      }
    });
  });
  return broken;
}

/** What a resource manages, in the oracle's words (sysctl: checked above). */
function keyOf(r: Resource): unknown {
  switch (r.type) {
    case "file":
    case "directory":
      return ["path", r.path];
    case "mount":
      return ["mount", r.target];
    case "service":
      return r.name.replace(/\.service$/, "");
    case "firewall":
      return [r.family, r.table];
    case "overlay":
      return r.interface;
    case "action":
    case "sysctl":
      return r.id;
    default:
      return r.name;
  }
}

/** A case the oracle rejects. */
export interface Finding {
  seed: number;
  index: number;
  text: string;
  trusted: boolean;
  why: string;
}

/** Run `cases` cases from `seed`; returns the findings and how the parse answered. */
export async function fuzz(
  cases: number,
  seed: number,
): Promise<{ findings: Finding[]; accepted: number; refused: number }> {
  const findings: Finding[] = [];
  let accepted = 0, refused = 0;
  for (let index = 0; index < cases; index++) {
    const { text, trusted } = fuzzCase(seed, index);
    const parse = trusted ? parseTrustedDeclaration : parseDeclaration;
    const started = performance.now();
    try {
      const declaration = await parse(text, FUZZ_OPTIONS).finally(async () => {
        if (performance.now() - started <= SLOW_MS) return;
        const slow = await slowParse(text, trusted);
        if (slow !== undefined) {
          findings.push({ seed, index, text, trusted, why: `the parse took ${slow} ms` });
        }
      });
      accepted++;
      const broken = brokenInvariants(declaration.resources, trusted);
      // Nothing declared is dropped or changed: the parsed value is the text's value.
      // (Its digest, and which parse took it, are not part of the text.)
      const { digest: _, trusted: _trusted, ...value } = declaration;
      if (canonicalJson(value) !== canonicalJson(JSON.parse(text))) {
        broken.push("the parsed value is not the text's value (something was dropped or changed)");
      }
      if (broken.length > 0) findings.push({ seed, index, text, trusted, why: broken.join("; ") });
    } catch (error) {
      if (error instanceof DeclarationRefused && error.problems.length > 0) {
        refused++;
        continue;
      }
      const why = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      findings.push({ seed, index, text, trusted, why: `unexpected exception ${why}` });
    }
  }
  return { findings, accepted, refused };
}

/**
 * How long parsing `text` takes, in whole ms, when it is over `slowMs` ({@link SLOW_MS})
 * every time of three (one slow run is a loaded machine's pause, three are the parse); else
 * `undefined`.
 */
export async function slowParse(
  text: string,
  trusted: boolean,
  slowMs = SLOW_MS,
): Promise<number | undefined> {
  const parse = trusted ? parseTrustedDeclaration : parseDeclaration;
  let fastest = Infinity;
  for (let run = 0; run < 3 && fastest > slowMs; run++) {
    const started = performance.now();
    await parse(text, FUZZ_OPTIONS).catch(() => undefined);
    fastest = Math.min(fastest, performance.now() - started);
  }
  return fastest > slowMs ? Math.round(fastest) : undefined;
}

/** How a finding is shown: enough to replay it (`fuzzCase(seed, index)`). */
export function describe(f: Finding): string {
  const shown = f.text.length > 2000 ? f.text.slice(0, 2000) + "…" : f.text;
  return `seed ${f.seed} case ${f.index}${
    f.trusted ? " (trusted parse)" : ""
  }: ${f.why}\n  ${shown}`;
}

if (import.meta.main) {
  const cases = Number(Deno.args[0] ?? 100_000);
  const seed = Number(Deno.args[1] ?? Math.floor(Math.random() * 2 ** 31));
  if (!Number.isSafeInteger(cases) || cases < 1 || !Number.isSafeInteger(seed)) {
    console.error("usage: deno task fuzz [cases] [seed]");
    Deno.exit(64);
  }
  const started = performance.now();
  const { findings, accepted, refused } = await fuzz(cases, seed);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    `fuzz: seed ${seed}, ${cases} cases in ${seconds} s: ${accepted} accepted, ${refused} refused`,
  );
  for (const f of findings.slice(0, 20)) console.error(describe(f));
  if (findings.length > 0) {
    console.error(`${findings.length} findings; replay one with fuzzCase(seed, case)`);
    Deno.exit(1);
  }
}
