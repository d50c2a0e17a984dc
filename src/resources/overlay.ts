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
import { type Cidr, formatCidr, normalCidr, overlaps, parseCidr } from "./_cidr.ts";
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

const cidr = (what: string) =>
  v.pipe(
    v.string(),
    v.check(
      (s) => parseCidr(s) !== undefined && s.includes("/"),
      (i) => `${JSON.stringify(i.input)} is not a CIDR ${what} such as "10.60.0.7/24"`,
    ),
  );

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

const PeerSchema = v.strictObject({
  publicKey: wireguardKey,
  endpoint: v.optional(
    v.pipe(
      v.string(),
      v.regex(
        /^(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9][A-Za-z0-9.-]{0,252}):([1-9][0-9]{0,4})$/,
        (i) => `${JSON.stringify(i.input)} is not an endpoint such as "198.51.100.7:51820"`,
      ),
      v.check((s) => Number(s.slice(s.lastIndexOf(":") + 1)) <= 65535, "the port is 1–65535"),
    ),
  ),
  allowedIps: v.array(cidr("block")),
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
  addresses: v.array(cidr("address")),
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

/** Rules across the fields of one overlay: no peer twice, no block routed to two peers. */
export function overlayProblems(resource: OverlayResource): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  const keys = new Map<string, number>();
  const blocks: { cidr: Cidr; at: string; peer: number }[] = [];
  resource.peers.forEach((peer, i) => {
    const first = keys.get(peer.publicKey);
    if (first !== undefined) {
      problems.push({
        path: `peers[${i}].publicKey`,
        message: `the same peer as peers[${first}]`,
      });
    } else keys.set(peer.publicKey, i);
    peer.allowedIps.forEach((text, j) => {
      const c = parseCidr(text)!;
      const at = `peers[${i}].allowedIps[${j}]`;
      const clash = blocks.find((b) => b.peer !== i && overlaps(b.cidr, c));
      if (clash) {
        problems.push({
          path: at,
          message: `${text} overlaps ${formatCidr(clash.cidr)} of ${clash.at}; ` +
            `WireGuard routes each address to one peer only`,
        });
      }
      blocks.push({ cidr: c, at, peer: i });
    });
  });
  return problems;
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
  const key = ctx.stateDir ? await readOverlayKey(ctx.stateDir) : undefined;
  if (!key || key.publicKey !== device.publicKey) diff.push({ change: "key" });
  if (resource.listenPort !== undefined && resource.listenPort !== device.listenPort) {
    diff.push({ change: "port", from: device.listenPort, to: resource.listenPort });
  }
  const held = new Map(device.peers.map((p) => [p.publicKey, p]));
  for (const peer of resource.peers) {
    const have = held.get(peer.publicKey);
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
    if (!ctx.stateDir) {
      throw new ResourceError(
        "resource.overlay-no-key",
        "this host has no state directory to keep its WireGuard key in",
      );
    }
    const key = await ensureOverlayKey(ctx.stateDir);
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
