/**
 * Declarations at the size limit (8 MiB, 10,000 resources), one per shape a hostile sender
 * could choose to make a check slow: many blocks of allowed-ips (the overlap check), many
 * peers, many services naming unknown ids in restartOn (issue 22's two quadratic checks),
 * and every other shape whose size is its own: long paths, big contents, big rules, many
 * env names, many mounts, deep nesting, many unknown keys, many duplicate ids. Used by
 * tests/declaration_limits_test.ts (a generous bound) and tests/bench/parse_bench.ts (the
 * figures).
 */
import { DEFAULT_LIMITS } from "../src/declaration/limits.ts";

const LIMIT = DEFAULT_LIMITS.maxBytes;
const KEY = "jxlJGHqZrWSspB9nXdeICdFGe/vy5BAdrIbdgxYWOBA=";

/** A shape: its name, and its declaration's text (at most the byte limit). */
export interface Shape {
  name: string;
  /** What the parse answers: accepted, or refused (with this many problems at least). */
  expect: "accepted" | "refused";
  text: () => string;
}

/** `{"version":1,"resources":[ITEMS]}` with as many items as fit under the limit. */
function fill(
  item: (i: number) => string,
  max = Infinity,
  head = '{"version":1,"resources":[',
): string {
  const parts: string[] = [];
  let size = head.length + 2;
  for (let i = 0; i < max; i++) {
    const next = item(i);
    if (size + next.length + 1 > LIMIT) break;
    parts.push(next);
    size += next.length + 1;
  }
  return `${head}${parts.join(",")}]}`;
}

/** Items of a list inside one resource, as many as fit beside `before` and `after`. */
function fillList(before: string, item: (i: number) => string, after: string): string {
  const parts: string[] = [];
  let size = before.length + after.length;
  for (let i = 0;; i++) {
    const next = item(i);
    if (size + next.length + 1 > LIMIT) break;
    parts.push(next);
    size += next.length + 1;
  }
  return `${before}${parts.join(",")}${after}`;
}

const ipv4 = (i: number) => `${10 + (i >>> 24)}.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`;
const ipv6 = (i: number) => `fd00::${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}`;
const peerKey = (i: number) => {
  const bytes = new Uint8Array(32);
  new DataView(bytes.buffer).setUint32(0, i);
  return bytes.toBase64();
};
const overlayHead = '{"version":1,"resources":[{"type":"overlay","id":"o","interface":"wg0",' +
  '"addresses":["10.0.0.1/8"],"peers":[';

/** Every shape, each at the limit. */
export const SHAPES: readonly Shape[] = [
  {
    // Issue 22: 2 peers × 8,000 blocks took 12 s; at 8 MiB, hours.
    name: "overlay: 2 peers, IPv4 allowed-ips to the limit",
    expect: "accepted",
    text: () =>
      fillList(
        `${overlayHead}{"publicKey":"${KEY}","allowedIps":["11.0.0.0/8"]},` +
          `{"publicKey":"${peerKey(1)}","allowedIps":[`,
        (i) => `"${ipv4(i)}/32"`,
        "]}]}]}",
      ),
  },
  {
    name: "overlay: 2 peers, IPv6 allowed-ips to the limit, every one inside the other's",
    expect: "refused",
    text: () =>
      fillList(
        `${overlayHead}{"publicKey":"${KEY}","allowedIps":["fd00::/16"]},` +
          `{"publicKey":"${peerKey(1)}","allowedIps":[`,
        (i) => `"${ipv6(i)}/128"`,
        "]}]}]}",
      ),
  },
  {
    // Issue 22: 16,000 peers (1.4 MiB) took 9 s.
    name: "overlay: peers to the limit, one block each",
    expect: "accepted",
    text: () =>
      fillList(
        overlayHead,
        (i) =>
          `{"publicKey":"${peerKey(i)}","endpoint":"198.51.100.7:${1 + (i % 65535)}",` +
          `"allowedIps":["${ipv4(i + 1)}/32"]}`,
        "]}]}",
      ),
  },
  {
    // Issue 22: 8,000 services × 64 unknown ids (5.9 MiB) took 82 s before refusing.
    name: "services: restartOn naming 64 unknown ids each, to the limit",
    expect: "refused",
    text: () => {
      const ids = JSON.stringify(Array.from({ length: 64 }, (_, j) => `u${j}`));
      return fill(
        (i) =>
          `{"type":"service","id":"s${i}","name":"s${i}","enabled":true,"running":true,` +
          `"restartOn":${ids}}`,
        DEFAULT_LIMITS.maxResources,
      );
    },
  },
  {
    name: "services: restartOn naming 64 earlier ids each, to the limit",
    expect: "accepted",
    text: () =>
      fill(
        (i) =>
          `{"type":"service","id":"s${i}","name":"s${i}","enabled":true,"running":true,` +
          `"restartOn":${
            JSON.stringify(Array.from({ length: Math.min(i, 64) }, (_, j) => `s${i - j - 1}`))
          }}`,
        DEFAULT_LIMITS.maxResources,
      ),
  },
  {
    name: "overlays: 10,000 resources, one listen port each",
    expect: "accepted",
    text: () =>
      fill(
        (i) =>
          `{"type":"overlay","id":"o${i}","interface":"wg${i}","addresses":["${
            ipv4(i * 4 + 1)
          }/30"],"listenPort":${1 + i},"peers":[]}`,
        DEFAULT_LIMITS.maxResources,
      ),
  },
  {
    name: "files: long paths (4,000 bytes), to the limit",
    expect: "accepted",
    text: () =>
      fill((i) =>
        `{"type":"file","id":"f${i}","path":"/srv/${i}${"/abcdefghij".repeat(360)}",` +
        `"content":"x","mode":"0644","owner":"root","group":"root"}`
      ),
  },
  {
    name: "mounts: a mount, then files 2,000 directories deep inside it, to the limit",
    expect: "accepted",
    text: () =>
      fill(
        (i) =>
          i === 0
            ? '{"type":"mount","id":"m","target":"/srv/m","source":"tmpfs","fstype":"tmpfs"}'
            : `{"type":"file","id":"f${i}","path":"/srv/m${"/a".repeat(2000)}/f${i}",` +
              `"content":"x","mode":"0644","owner":"root","group":"root"}`,
        DEFAULT_LIMITS.maxResources,
      ),
  },
  {
    name: "mounts: files 2,000 directories deep, then a mount at every depth above them",
    expect: "refused",
    text: () =>
      fill(
        (i) =>
          i < 950
            ? `{"type":"file","id":"f${i}","path":"/srv${"/a".repeat(2000)}/f${i}",` +
              `"content":"x","mode":"0644","owner":"root","group":"root"}`
            : `{"type":"mount","id":"m${i}","target":"/srv${"/a".repeat(i - 949)}",` +
              '"source":"tmpfs","fstype":"tmpfs"}',
      ),
  },
  {
    name: "files: 10,000 resources with short paths",
    expect: "accepted",
    text: () =>
      fill(
        (i) =>
          `{"type":"file","id":"f${i}","path":"/etc/app/f${i}.conf","content":"a = 1\\n",` +
          `"mode":"0640","owner":"root","group":"root"}`,
        DEFAULT_LIMITS.maxResources,
      ),
  },
  {
    name: "files: base64 content to the limit (2 MiB of text each)",
    expect: "accepted",
    text: () =>
      fill((i) =>
        `{"type":"file","id":"f${i}","path":"/srv/f${i}","contentBase64":"${
          "QUJD".repeat(Math.floor(LIMIT / 16) - 100)
        }","mode":"0644","owner":"root","group":"root"}`
      ),
  },
  {
    name: "files: text content full of escapes",
    expect: "accepted",
    text: () =>
      fill((i) =>
        `{"type":"file","id":"f${i}","path":"/srv/f${i}","content":"${
          '\\"\\\\\\n\\u00e9'.repeat(90_000)
        }","mode":"0644","owner":"root","group":"root"}`
      ),
  },
  {
    name: "firewall: rules of 256 KiB to the limit",
    expect: "accepted",
    text: () =>
      fill((i) =>
        `{"type":"firewall","id":"t${i}","family":"inet","table":"t${i}","rules":"${
          "chain c { tcp dport 22 accept }\\n".repeat(Math.floor(256 * 1024 / 33) - 1)
        }"}`
      ),
  },
  {
    name: "sysctls: 10,000 settings, both spellings",
    expect: "accepted",
    text: () =>
      fill(
        (i) => `{"type":"sysctl","id":"k${i}","key":"net${i % 2 ? "." : "/"}x${i}.y","value":${i}}`,
        DEFAULT_LIMITS.maxResources,
      ),
  },
  {
    name: "container: 10,000 env names",
    expect: "accepted",
    text: () =>
      `{"version":1,"resources":[{"type":"container","id":"c","name":"c","image":` +
      `"x@sha256:${"a".repeat(64)}","args":[],"mounts":[],"restart":"no","env":{${
        Array.from({ length: 10_000 }, (_, i) => `"E${i}":"${"v".repeat(700)}"`).join(",")
      }}}]}`,
  },
  {
    name: "container: env names to the limit",
    expect: "refused",
    text: () =>
      fillList(
        `{"version":1,"resources":[{"type":"container","id":"c","name":"c","image":` +
          `"x@sha256:${"a".repeat(64)}","args":[],"mounts":[],"restart":"no","env":{`,
        (i) => `"E${i}":"${i}"`,
        "}}]}",
      ),
  },
  {
    name: "container: mounts to the limit",
    expect: "accepted",
    text: () =>
      fillList(
        `{"version":1,"resources":[{"type":"container","id":"c","name":"c","image":` +
          `"x@sha256:${"a".repeat(64)}","args":[],"env":{},"restart":"no","mounts":[`,
        (i) => `{"source":"/srv/m/${i}","target":"/m/${i}","readOnly":true}`,
        "]}]}",
      ),
  },
  {
    name: "JSON: arrays nested to the limit",
    expect: "refused",
    text: () => {
      const depth = Math.floor((LIMIT - 64) / 2);
      return `{"version":1,"resources":[{"type":"file","id":"f","content":${"[".repeat(depth)}${
        "]".repeat(depth)
      }}]}`;
    },
  },
  {
    name: "JSON: unknown keys to the limit",
    expect: "refused",
    text: () => fillList('{"version":1,"resources":[],', (i) => `"k${i}":0`, "}"),
  },
  {
    name: "ids: 10,000 resources with one id",
    expect: "refused",
    text: () =>
      fill(
        (i) => `{"type":"sysctl","id":"same","key":"net.x${i}","value":1}`,
        DEFAULT_LIMITS.maxResources,
      ),
  },
];
