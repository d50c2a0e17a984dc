/**
 * WireGuard interfaces (the `OverlayNetwork` port): made in the kernel
 * (`ip link add … type wireguard`) or by the userspace `wireguard-go`, then
 * driven the same way: `wg set` for key, port and peers, `ip` for the link and
 * its addresses; read back with `wg show IF dump` and `ip -d -j addr show dev IF`.
 * Verbs only; which mode is used is the profile's finding (os/mod.ts).
 */
import type {
  OverlayConfig,
  OverlayDevice,
  OverlayLink,
  OverlayNetwork,
  OverlayPeer,
} from "../../src/providers.ts";
import { mustRun, refuseOption, runProgram, type RunVia } from "../_run.ts";

/** Options of {@link wireguard}. */
export interface WireguardOptions extends RunVia {
  /** How interfaces are made: the kernel's module, or wireguard-go. */
  mode: "kernel" | "userspace";
  /** How long one program may take (default 30 s). */
  timeoutMs?: number;
}

interface IpAddr {
  ifname?: string;
  flags?: string[];
  mtu?: number;
  ifalias?: string;
  linkinfo?: { info_kind?: string };
  addr_info?: { family?: string; local?: string; prefixlen?: number; scope?: string }[];
}

/** The argv that makes an interface, per mode (tested as command lines). */
export function createArgv(mode: "kernel" | "userspace", name: string): string[] {
  refuseOption("interface", name);
  return mode === "kernel"
    ? ["ip", "link", "add", "dev", name, "type", "wireguard"]
    : ["wireguard-go", name];
}

/** The `wg set` argv for a configuration (the key is passed as a file path). */
export function setArgv(name: string, config: OverlayConfig): string[] {
  refuseOption("interface", name);
  const argv = ["wg", "set", name, "private-key", config.privateKeyFile];
  if (config.listenPort !== undefined) argv.push("listen-port", String(config.listenPort));
  for (const key of config.removePeers) argv.push("peer", key, "remove");
  for (const peer of config.peers) {
    argv.push("peer", peer.publicKey, "allowed-ips", peer.allowedIps.join(","));
    if (peer.endpoint !== undefined) argv.push("endpoint", peer.endpoint);
    argv.push("persistent-keepalive", String(peer.persistentKeepalive ?? 0));
  }
  return argv;
}

/** Parse `wg show IF dump`; the first line's private key is dropped at once. */
export function parseDump(text: string): OverlayDevice {
  const [head, ...rest] = text.split("\n").filter((l) => l.trim() !== "");
  const [, publicKey, port] = (head ?? "").split("\t");
  const peers: OverlayPeer[] = rest.map((line) => {
    const [key, , endpoint, allowed, , , , keepalive] = line.split("\t");
    return {
      publicKey: key,
      ...(endpoint && endpoint !== "(none)" ? { endpoint } : {}),
      allowedIps: allowed && allowed !== "(none)" ? allowed.split(",") : [],
      ...(keepalive && keepalive !== "off" ? { persistentKeepalive: Number(keepalive) } : {}),
    };
  });
  return { publicKey: publicKey ?? "", listenPort: Number(port ?? 0), peers };
}

/** Parse `ip -d -j addr show dev IF` (one link). */
export function parseLink(text: string): OverlayLink | null {
  const [link] = JSON.parse(text || "[]") as IpAddr[];
  if (!link) return null;
  return {
    kind: link.linkinfo?.info_kind ?? "",
    ...(link.ifalias ? { alias: link.ifalias } : {}),
    up: (link.flags ?? []).includes("UP"),
    mtu: link.mtu ?? 0,
    addresses: (link.addr_info ?? [])
      .filter((a) => a.scope !== "link" && a.local !== undefined)
      .map((a) => `${a.local}/${a.prefixlen}`),
  };
}

/**
 * The WireGuard adapter.
 *
 * @example
 * ```ts
 * const wg = wireguard({ mode: "userspace" });
 * await wg.create("wg0", "nox-mesh-host");
 * ```
 *
 * Long because: a provider is one object of verbs over wireguard-go and wg; each verb is short.
 */
export function wireguard(options: WireguardOptions): OverlayNetwork {
  const { mode, timeoutMs = 30_000 } = options;
  const run = (argv: string[], hint?: string) =>
    mustRun(argv, { env: options.env, via: options.via, timeoutMs, hint });
  const ask = (argv: string[]) =>
    runProgram(argv, { env: options.env, via: options.via, timeoutMs });
  return {
    mode,

    async link(name) {
      refuseOption("interface", name);
      const r = await ask(["ip", "-d", "-j", "addr", "show", "dev", name]);
      if (r.code !== 0) {
        if (/does not exist|Cannot find device/i.test(r.stderr)) return null;
        await run(["ip", "-d", "-j", "addr", "show", "dev", name]); // throws, naming it
      }
      return parseLink(r.stdout);
    },

    async device(name) {
      refuseOption("interface", name);
      const r = await ask(["wg", "show", name, "dump"]);
      // Never echo the output: its first line holds the private key.
      if (r.code !== 0) return null;
      return parseDump(r.stdout);
    },

    async create(name, alias) {
      await run(
        createArgv(mode, name),
        mode === "userspace" ? "wireguard-go needs /dev/net/tun and /run/wireguard" : undefined,
      );
      try {
        await run(["ip", "link", "set", "dev", name, "alias", alias]);
      } catch (error) {
        await ask(["ip", "link", "del", "dev", name]);
        throw error;
      }
    },

    async remove(name) {
      refuseOption("interface", name);
      await run(["ip", "link", "del", "dev", name]);
    },

    async configure(name, config) {
      await run(setArgv(name, config));
    },

    async setAddresses(name, add, remove) {
      refuseOption("interface", name);
      for (const a of remove) await run(["ip", "address", "del", a, "dev", name]);
      for (const a of add) await run(["ip", "address", "replace", a, "dev", name]);
    },

    async setLink(name, settings) {
      refuseOption("interface", name);
      const mtu = settings.mtu === undefined ? [] : ["mtu", String(settings.mtu)];
      await run(["ip", "link", "set", "dev", name, ...mtu, "up"]);
    },
  };
}
