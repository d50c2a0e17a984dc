/**
 * The overlay resource (DESIGN.md §17): one WireGuard interface holding
 * exactly the declared state. The node's own key pair is made on the node
 * (src/overlay_key.ts) and never declared; a declaration carrying a private key
 * is refused. Apply creates the interface (kernel or wireguard-go, whichever
 * the profile proved working), sets key, port and exactly the declared peers
 * (others removed), the declared addresses (others removed), the MTU, and
 * brings it up; the read-back (`wg show IF dump`, `ip -j addr show dev IF`)
 * must equal the declaration. The host marks what it creates with the link
 * alias "nox-mesh-host"; a link of that name without the mark is never touched.
 * No longer declared: the interface is deleted (if it still carries the mark).
 *
 * Everything about the kind is here: its schema, its key, its rules, its typed
 * diff, check, apply and release.
 */
import * as v from "valibot";
import { resourceId } from "../declaration/fields.ts";
import { ensureOverlayKey, isWireguardKey, readOverlayKey } from "../overlay_key.ts";
import type { OverlayDevice, OverlayLink, OverlayNetwork, OverlayPeer } from "../providers.ts";
import {
  blockRange,
  formatAddress,
  isCidr,
  normalCidr,
  parseCidr,
  parseV4,
  parseV6,
} from "./_cidr.ts";
import {
  type Change,
  change,
  type Diff,
  type KindContext,
  type Release,
  type ReleaseOptions,
  type ResourceKind,
  type RuleScope,
} from "./kind.ts";
import { NoProviderError, ResourceError } from "./kind.ts";

/** The alias the host gives every interface it creates. */
export const OVERLAY_MARK = "nox-mesh-host";

const NO_PRIVATE_KEY = v.optional(
  v.never(
    "a WireGuard private key is never declared: each node makes its own key and only its " +
      "public key leaves the machine (see `nox-mesh-host inventory`)",
  ),
);

/**
 * A list of CIDR blocks (`what`: "address", "block"), each checked in one loop: a list may
 * hold hundreds of thousands, and a schema per item costs more than the check itself.
 */
const cidrList = (what: string) =>
  v.pipe(
    v.custom<string[]>(Array.isArray, `is a list of CIDR ${what}s such as "10.60.0.7/24"`),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const input = dataset.value;
      let bad = 0;
      for (let i = 0; i < input.length; i++) {
        const item: unknown = input[i];
        if (typeof item === "string" && item.includes("/") && isCidr(item)) {
          continue;
        }
        if (++bad > MAX_LISTED) continue;
        addIssue({
          message: typeof item === "string"
            ? `${JSON.stringify(item)} is not a CIDR ${what} such as "10.60.0.7/24"`
            : `expected a CIDR ${what} (a string), got ${item === null ? "null" : typeof item}`,
          path: [{ type: "array", origin: "value", input, key: i, value: item }],
        });
      }
      if (bad > MAX_LISTED) {
        addIssue({ message: `and ${bad - MAX_LISTED} more items that are not CIDR ${what}s` });
      }
    }),
  );

/** The most problems one list or one check names (the parse lists at most 1000 in all). */
const MAX_LISTED = 1000;

const wireguardKey = v.pipe(
  v.string(),
  v.check(
    isWireguardKey,
    (i) => `${JSON.stringify(i.input)} is not a WireGuard key (base64 of exactly 32 bytes)`,
  ),
);

const port = (what: string) =>
  v.pipe(
    v.number(),
    v.safeInteger(`${what} is an integer`),
    v.minValue(1, `${what} is 1–65535`),
    v.maxValue(65535, `${what} is 1–65535`),
  );

/**
 * Interface names as Linux takes them (1–15 bytes, no "/", ":" or blanks, not "." or ".."),
 * and not starting with "-", which a tool would read as an option.
 */
export const INTERFACE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$/;

/** A DNS name: labels of letters, digits and inner "-", the last one starting with a letter. */
const HOST_NAME =
  /^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/**
 * Why `text` is not a peer endpoint in its one spelling, or `undefined` when it is: an
 * IPv4 address as four decimal numbers, an IPv6 address in brackets as `wg show` prints it
 * (lower case, zeros compressed), or a DNS name; then ":" and a port. Any other spelling
 * either means another address than it reads as (glibc reads 010.0.0.1 as 8.0.0.1, 127.1
 * as 127.0.0.1, 0x7f.0.0.1 as 127.0.0.1) or never equals what the read-back sees.
 *
 * @example
 * ```ts
 * endpointProblem("[2001:DB8::1]:51820"); // "… write it as \"[2001:db8::1]:51820\" …"
 * ```
 */
export function endpointProblem(text: string): string | undefined {
  const quoted = JSON.stringify(text);
  const m = /^(.*):([0-9]+)$/s.exec(text);
  if (!m || m[1] === "") {
    return `${quoted} is not an endpoint: an address or host name, ":" and a port, such as ` +
      `"198.51.100.7:51820", "[2001:db8::7]:51820" or "peer.example.org:51820"`;
  }
  const [, host, port] = m;
  if (!/^[1-9][0-9]{0,4}$/.test(port) || Number(port) > 65535) {
    return `${quoted}: the port is 1–65535, written without leading zeros`;
  }
  if (host.startsWith("[") || host.includes(":")) {
    const inner = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : undefined;
    const address = inner === undefined ? undefined : parseV6(inner);
    if (address === undefined) {
      return `${quoted}: ${host} is not an IPv6 address in brackets, such as [2001:db8::7]`;
    }
    const word = (i: number) => Number((address >> BigInt(112 - 16 * i)) & 0xffffn);
    if (
      [0, 1, 2, 3, 4].every((i) => word(i) === 0) && (word(5) === 0xffff || word(5) === 0) &&
      (word(5) === 0xffff || word(6) !== 0)
    ) {
      return `${quoted} is an IPv4 address written as IPv6 (wg prints it otherwise); write the ` +
        `IPv4 address: "${formatAddress(4, address & 0xffffffffn)}:${port}"`;
    }
    const one = formatAddress(6, address);
    if (one !== inner) {
      return `${quoted} is not written as wg prints it, so the read-back would never match; ` +
        `write it as "[${one}]:${port}" (lower case, zeros compressed)`;
    }
    return undefined;
  }
  if (parseV4(host) !== undefined) return undefined;
  if (!HOST_NAME.test(host) || host.length > 253) {
    return /^(0[xX][0-9a-fA-F]*|[0-9]+)(\.(0[xX][0-9a-fA-F]*|[0-9]+))*\.?$/.test(host)
      ? `${quoted}: ${host} is not an IPv4 address in its one spelling, four decimal numbers ` +
        "0–255 without leading zeros (the resolver would read 010 as octal 8, 127.1 as " +
        "127.0.0.1 and 0x7f as 127): write the address you mean that way"
      : `${quoted}: ${host} is neither an IPv4 address nor a host name (labels of letters, ` +
        `digits and inner "-" joined by single dots, the last starting with a letter)`;
  }
  return undefined;
}

const PeerSchema = v.strictObject({
  publicKey: wireguardKey,
  endpoint: v.optional(
    v.pipe(
      v.string(),
      v.maxLength(300, "an endpoint is at most 300 characters"),
      v.check((s) => endpointProblem(s) === undefined, (i) => `${endpointProblem(i.input)}`),
    ),
  ),
  allowedIps: cidrList("block"),
  persistentKeepalive: v.optional(
    v.pipe(
      v.number(),
      v.safeInteger("persistentKeepalive is whole seconds"),
      v.minValue(0, "persistentKeepalive is 0–65535 seconds"),
      v.maxValue(65535, "persistentKeepalive is 0–65535 seconds"),
    ),
  ),
  privateKey: NO_PRIVATE_KEY,
  presharedKey: v.optional(v.never("preshared keys are not supported (they would be secrets)")),
});

/** Resource: a WireGuard interface holding exactly the declared state. */
export const OverlaySchema = v.strictObject({
  type: v.literal("overlay"),
  id: resourceId,
  interface: v.pipe(
    v.string(),
    v.regex(
      INTERFACE_NAME,
      (i) =>
        `${
          JSON.stringify(i.input)
        } is not an interface name: 1–15 characters of letters, digits and _ . - ` +
        `(not starting with "." or "-")`,
    ),
  ),
  addresses: cidrList("address"),
  listenPort: v.optional(port("listenPort")),
  mtu: v.optional(
    v.pipe(
      v.number(),
      v.safeInteger("mtu is an integer"),
      v.minValue(576, "mtu is 576–9000"),
      v.maxValue(9000, "mtu is 576–9000"),
    ),
  ),
  peers: v.array(PeerSchema),
  privateKey: NO_PRIVATE_KEY,
  private_key: NO_PRIVATE_KEY,
});

/** An overlay (WireGuard) resource. */
export type OverlayResource = v.InferOutput<typeof OverlaySchema>;

/** What two overlay resources may not both manage: the interface. */
export function overlayKey(resource: Pick<OverlayResource, "interface">): string {
  return `overlay:${resource.interface}`;
}

/** The smallest MTU IPv6 works on: below it the kernel takes every IPv6 address away. */
const IPV6_MIN_MTU = 1280;

/**
 * Rules across the fields of one overlay: no peer twice, no block routed to two peers, and
 * addresses the interface can hold and the read-back can see. Each costs n·log n at most.
 */
export function overlayProblems(resource: OverlayResource): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  const keys = new Map<string, number>();
  resource.peers.forEach((peer, i) => {
    const first = keys.get(peer.publicKey);
    if (first !== undefined) {
      problems.push({
        path: `peers[${i}].publicKey`,
        message: `the same peer as peers[${first}]`,
      });
    } else keys.set(peer.publicKey, i);
  });
  for (const p of allowedIpsOverlaps(resource.peers)) problems.push(p);

  const v6 = new Map<bigint, number>();
  let firstV6: number | undefined;
  resource.addresses.forEach((text, i) => {
    const c = parseCidr(text)!;
    if (c.family !== 6) return;
    firstV6 ??= i;
    if (c.address >> 118n === 0x3fan) {
      problems.push({
        path: `addresses[${i}]`,
        message: `${text} is link-local (fe80::/10): the kernel gives every interface its own, ` +
          "and the read-back leaves link scope to it, so this address would never read back; " +
          "declare a global or unique-local (fd00::/8) address",
      });
    }
    const same = v6.get(c.address);
    if (same !== undefined && parseCidr(resource.addresses[same])!.prefix !== c.prefix) {
      problems.push({
        path: `addresses[${i}]`,
        message:
          `${text} is the address of addresses[${same}] (${
            resource.addresses[same]
          }) with another prefix; an interface holds an IPv6 address once, so the two could ` +
          "never both hold: declare it once",
      });
    } else if (same === undefined) v6.set(c.address, i);
  });
  if (firstV6 !== undefined && resource.mtu !== undefined && resource.mtu < IPV6_MIN_MTU) {
    problems.push({
      path: "mtu",
      message: `${resource.mtu} is below ${IPV6_MIN_MTU}, the smallest MTU IPv6 works on, and ` +
        `addresses[${firstV6}] is IPv6: the kernel would take it away; declare mtu ` +
        `${IPV6_MIN_MTU} or more`,
    });
  }
  return problems;
}

/**
 * Blocks of allowed-ips routed to two peers (WireGuard routes each address to one). Blocks
 * are nested or apart, never partly overlapping: sorted by first address, widest first,
 * one sweep per family keeps the blocks that enclose the current one on a stack, and each
 * entry knows the nearest entry below it that belongs to another peer. n·log n for n
 * blocks; IPv4 addresses are numbers, IPv6 ones eight UTF-16 units (both compare with <).
 */
function allowedIpsOverlaps(
  peers: OverlayResource["peers"],
): { path: string; message: string }[] {
  const v4: Block<number>[] = [];
  const v6: Block<string>[] = [];
  let order = 0;
  peers.forEach((peer, i) =>
    peer.allowedIps.forEach((text, index) => {
      const r = blockRange(text)!;
      const o = order++;
      if (r.family === 4) v4.push({ text, first: r.first, last: r.last, peer: i, index, order: o });
      else v6.push({ text, first: r.first, last: r.last, peer: i, index, order: o });
    })
  );
  return [...sweep(v4), ...sweep(v6)];
}

/** One block of allowed-ips, its first and last address as keys that compare with <. */
interface Block<K extends number | string> {
  text: string;
  first: K;
  last: K;
  peer: number;
  /** Its index in the peer's allowedIps. */
  index: number;
  /** Declared order, across peers. */
  order: number;
}

/** The sweep of {@link allowedIpsOverlaps} over the blocks of one family. */
function sweep<K extends number | string>(blocks: Block<K>[]): { path: string; message: string }[] {
  // By first address; of blocks that start together, the wider (the later last) first.
  blocks.sort((a, b) =>
    a.first < b.first
      ? -1
      : a.first > b.first
      ? 1
      : a.last > b.last
      ? -1
      : a.last < b.last
      ? 1
      : a.order - b.order
  );
  const at = (b: Block<K>) => `peers[${b.peer}].allowedIps[${b.index}]`;
  const stack: { block: Block<K>; other: Block<K> | undefined }[] = [];
  const reported = new Map<string, { path: string; message: string }>();
  let more = 0;
  for (const block of blocks) {
    while (stack.length > 0 && stack[stack.length - 1].block.last < block.first) stack.pop();
    const top = stack[stack.length - 1];
    // The nearest enclosing block of another peer: the top, or the one below it it knows.
    const other = top === undefined
      ? undefined
      : top.block.peer !== block.peer
      ? top.block
      : top.other;
    if (other !== undefined) {
      const [later, earlier] = other.order < block.order ? [block, other] : [other, block];
      if (reported.size >= MAX_LISTED) more++;
      else if (!reported.has(at(later))) {
        reported.set(at(later), {
          path: at(later),
          message: `${normalCidr(later.text)} overlaps ${normalCidr(earlier.text)} of ` +
            `${at(earlier)}; WireGuard routes each address to one peer only`,
        });
      }
    }
    stack.push({ block, other });
  }
  const found = [...reported.values()];
  if (more > 0) {
    found.push({
      path: "peers",
      message: `and up to ${more} more blocks that overlap another peer's (not listed)`,
    });
  }
  return found;
}

/** One difference between the declaration and the interface. */
export type OverlayChange =
  | { change: "create"; mode: string }
  | { change: "recreate"; why: string }
  | { change: "key" }
  | { change: "port"; from: number; to: number }
  | { change: "peer-added"; publicKey: string }
  | { change: "peer-removed"; publicKey: string }
  | { change: "peer-changed"; publicKey: string; what: string[] }
  | { change: "address-added"; address: string }
  | { change: "address-removed"; address: string }
  | { change: "mtu"; from: number; to: number }
  | { change: "up" };

const short = (key: string) => `${key.slice(0, 8)}…`;

/** A change in words. */
export function describeOverlayChange(c: OverlayChange): string {
  switch (c.change) {
    case "create":
      return `create the interface (${c.mode} WireGuard)`;
    case "recreate":
      return `recreate the interface (${c.why})`;
    case "key":
      return "set this node's private key";
    case "port":
      return `listen port ${c.from} -> ${c.to}`;
    case "peer-added":
      return `peer ${short(c.publicKey)} added`;
    case "peer-removed":
      return `peer ${short(c.publicKey)} removed`;
    case "peer-changed":
      return `peer ${short(c.publicKey)} changed: ${c.what.join(", ")}`;
    case "address-added":
      return `address ${c.address} added`;
    case "address-removed":
      return `address ${c.address} removed`;
    case "mtu":
      return `mtu ${c.from} -> ${c.to}`;
    case "up":
      return "bring the interface up";
  }
}

function network(ctx: KindContext): OverlayNetwork {
  const overlay = ctx.providers.overlay;
  if (!overlay) {
    throw new NoProviderError(
      "overlay",
      "working WireGuard: the kernel's, or wireguard-go with wg (see the profile's wireguard row)",
    );
  }
  return overlay;
}

function notOurs(name: string, link: OverlayLink): ResourceError {
  const what = link.kind === "wireguard" || link.kind === "tun"
    ? `a ${link.kind} link`
    : `a ${link.kind || "network"} link, not WireGuard,`;
  return new ResourceError(
    "resource.overlay-not-ours",
    `${what} named "${name}" exists but was not created by this host (its alias is ` +
      `${link.alias ? JSON.stringify(link.alias) : "not set"}, not "${OVERLAY_MARK}"); ` +
      `the host never touches it`,
    { hint: "delete or rename that link by hand, or declare another interface name" },
  );
}

function routeSet(list: readonly string[]): string[] {
  return [...new Set(list.map((s) => normalCidr(s, true)))].sort();
}

function peerDifferences(want: OverlayPeer, have: OverlayPeer): string[] {
  const what: string[] = [];
  const a = routeSet(want.allowedIps), b = routeSet(have.allowedIps);
  if (a.join(",") !== b.join(",")) {
    what.push(`allowed-ips ${b.join(",") || "(none)"} -> ${a.join(",") || "(none)"}`);
  }
  // A declared endpoint given as address:port must be the one in use; a host name is
  // resolved by the tool, and an undeclared one is whatever the peer roamed from.
  if (
    want.endpoint !== undefined && /^(\[[0-9a-fA-F:.]+\]|[0-9.]+):/.test(want.endpoint) &&
    want.endpoint !== have.endpoint
  ) {
    what.push(`endpoint ${have.endpoint ?? "(none)"} -> ${want.endpoint}`);
  }
  const ka = want.persistentKeepalive ?? 0, kb = have.persistentKeepalive ?? 0;
  if (ka !== kb) what.push(`persistent-keepalive ${kb || "off"} -> ${ka || "off"}`);
  return what;
}

/** The differences between the declaration and what the device and link hold. */
async function differences(
  ctx: KindContext,
  resource: OverlayResource,
  link: OverlayLink,
  device: OverlayDevice,
): Promise<OverlayChange[]> {
  const diff: OverlayChange[] = [];
  const key = ctx.host.stateDir ? await readOverlayKey(ctx.host.stateDir) : undefined;
  if (!key || key.publicKey !== device.publicKey) diff.push({ change: "key" });
  if (resource.listenPort !== undefined && resource.listenPort !== device.listenPort) {
    diff.push({ change: "port", from: device.listenPort, to: resource.listenPort });
  }
  const present = new Map(device.peers.map((p) => [p.publicKey, p]));
  for (const peer of resource.peers) {
    const have = present.get(peer.publicKey);
    if (!have) diff.push({ change: "peer-added", publicKey: peer.publicKey });
    else {
      const what = peerDifferences(peer, have);
      if (what.length) diff.push({ change: "peer-changed", publicKey: peer.publicKey, what });
    }
  }
  const declaredKeys = new Set(resource.peers.map((p) => p.publicKey));
  for (const peer of device.peers) {
    if (!declaredKeys.has(peer.publicKey)) {
      diff.push({ change: "peer-removed", publicKey: peer.publicKey });
    }
  }
  const want = new Set(resource.addresses.map((a) => normalCidr(a)));
  const have = new Set(link.addresses.map((a) => normalCidr(a)));
  for (const a of want) if (!have.has(a)) diff.push({ change: "address-added", address: a });
  for (const a of have) if (!want.has(a)) diff.push({ change: "address-removed", address: a });
  if (resource.mtu !== undefined && resource.mtu !== link.mtu) {
    diff.push({ change: "mtu", from: link.mtu, to: resource.mtu });
  }
  if (!link.up) diff.push({ change: "up" });
  return diff;
}

/** An overlay difference as the engine carries it: its kind, and its words. */
type OverlayDiffChange = Change<OverlayChange["change"]>;

function found(exists: boolean, diff: OverlayChange[]): Diff<OverlayDiffChange> {
  return { exists, changes: diff.map((d) => change(d.change, describeOverlayChange(d))) };
}

/** The overlay kind. */
export const overlayKind: ResourceKind<OverlayResource, OverlayDiffChange> = {
  type: "overlay",
  schema: OverlaySchema,
  needs: "overlay",
  mayCutLink: true,

  key: overlayKey,

  rules(resource: OverlayResource, at: string, scope: RuleScope): void {
    for (const p of overlayProblems(resource)) {
      scope.problems.push({ ...p, path: `${at}.${p.path}` });
    }
    if (resource.listenPort !== undefined) {
      const first = scope.claim(`udp port ${resource.listenPort}`, `${at}.listenPort`);
      if (first !== undefined) {
        scope.problems.push({
          path: `${at}.listenPort`,
          message: `UDP port ${resource.listenPort} is also ${first}; one port is held by one ` +
            "interface, so the two could never both be set: give each overlay its own port",
        });
      }
    }
  },

  async check(ctx: KindContext, resource: OverlayResource): Promise<Diff<OverlayDiffChange>> {
    const overlay = network(ctx);
    const link = await overlay.link(resource.interface);
    if (link === null) return found(false, [{ change: "create", mode: overlay.mode }]);
    if (link.alias !== OVERLAY_MARK) throw notOurs(resource.interface, link);
    const device = await overlay.device(resource.interface);
    if (device === null) {
      return found(true, [{ change: "recreate", why: "it is no longer a WireGuard device" }]);
    }
    return found(true, await differences(ctx, resource, link, device));
  },

  async apply(ctx: KindContext, resource: OverlayResource): Promise<void> {
    const overlay = network(ctx);
    const name = resource.interface;
    if (!ctx.host.stateDir) {
      throw new ResourceError(
        "resource.overlay-no-key",
        "this host has no state directory to keep its WireGuard key in",
      );
    }
    const key = await ensureOverlayKey(ctx.host.stateDir);
    // Look again right before acting: never touch a link that is not ours.
    let link = await overlay.link(name);
    if (link !== null && link.alias !== OVERLAY_MARK) throw notOurs(name, link);
    if (link !== null && await overlay.device(name) === null) {
      await overlay.remove(name);
      link = null;
    }
    if (link === null) {
      await overlay.create(name, OVERLAY_MARK);
      link = await overlay.link(name);
      if (link === null) {
        throw new ResourceError(
          "resource.overlay-create",
          `the interface "${name}" did not appear`,
        );
      }
    }
    const device = await overlay.device(name);
    const declared = new Set(resource.peers.map((p) => p.publicKey));
    await overlay.configure(name, {
      privateKeyFile: key.path,
      ...(resource.listenPort === undefined ? {} : { listenPort: resource.listenPort }),
      peers: resource.peers.map((p) => ({
        publicKey: p.publicKey,
        allowedIps: routeSet(p.allowedIps),
        ...(p.endpoint === undefined ? {} : { endpoint: p.endpoint }),
        persistentKeepalive: p.persistentKeepalive ?? 0,
      })),
      removePeers: (device?.peers ?? []).map((p) => p.publicKey).filter((k) => !declared.has(k)),
    });
    const want = resource.addresses.map((a) => normalCidr(a));
    const have = link.addresses.map((a) => normalCidr(a));
    await overlay.setAddresses(
      name,
      want.filter((a) => !have.includes(a)),
      have.filter((a) => !want.includes(a)),
    );
    await overlay.setLink(name, { ...(resource.mtu ? { mtu: resource.mtu } : {}), up: true });
  },

  async release(
    ctx: KindContext,
    { interface: name }: OverlayResource,
    { dryRun }: ReleaseOptions,
  ): Promise<Release> {
    const overlay = network(ctx);
    const link = await overlay.link(name);
    if (link === null) return { outcome: "removed", detail: "already gone" };
    if (link.alias !== OVERLAY_MARK) {
      return {
        outcome: "forgotten",
        detail: `the link "${name}" no longer carries the host's mark; left in place`,
      };
    }
    if (!dryRun) await overlay.remove(name);
    return { outcome: "removed" };
  },
};
