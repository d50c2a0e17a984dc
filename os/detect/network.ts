/**
 * The network position: interfaces and addresses (`ip address show`), default
 * routes (`ip route show default`, `ip -6 route show default`), and what they
 * say about where this machine sits. The text forms are read, so iproute2 and
 * busybox's ip both do. (/proc and /sys are out of reach: Deno grants them only
 * to --allow-all, which the host never has.) Nothing is sent: the state stops
 * at "running" (an interface is up, with a default route); only the link
 * proves the network working.
 */
import type { Capability } from "../../src/profile.ts";
import { type ProbeOptions, query, ran, whyNot } from "./_probe.ts";

/** One network interface. */
export interface Interface {
  name: string;
  up: boolean;
  loopback: boolean;
  addresses: { address: string; family: "IPv4" | "IPv6"; prefix: number; scope: Scope }[];
}

/** What kind of address it is. */
export type Scope = "loopback" | "link-local" | "private" | "shared" | "public";

/** A default route. */
export interface DefaultRoute {
  family: "IPv4" | "IPv6";
  device: string;
  via?: string;
}

/**
 * Where the machine sits: no interface up, up without a way out, only private
 * addresses behind its default route, a public address, or unknown.
 */
export type Position = "offline" | "isolated" | "private" | "public" | "unknown";

/** Parse `ip address show` (iproute2 or busybox text form). */
export function parseIpAddress(text: string): Interface[] {
  const interfaces: Interface[] = [];
  let current: Interface | undefined;
  for (const line of text.split("\n")) {
    const head = /^\d+:\s+([^:@\s]+)(?:@\S+)?:\s+<([^>]*)>/.exec(line);
    if (head) {
      const flags = head[2].split(",");
      current = {
        name: head[1],
        up: flags.includes("UP") && !flags.includes("NO-CARRIER"),
        loopback: flags.includes("LOOPBACK"),
        addresses: [],
      };
      interfaces.push(current);
      continue;
    }
    const inet = /^\s+(inet6?)\s+([0-9a-fA-F.:]+)\/(\d+)/.exec(line);
    if (inet && current) {
      const family = inet[1] === "inet" ? "IPv4" : "IPv6";
      current.addresses.push({
        address: inet[2],
        family,
        prefix: Number(inet[3]),
        scope: scopeOf(inet[2], family),
      });
    }
  }
  return interfaces;
}

/** Parse `ip [-6] route show default` lines ("default via GW dev DEV …"). */
export function parseDefaultRoutes(text: string, family: "IPv4" | "IPv6"): DefaultRoute[] {
  const routes: DefaultRoute[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("default")) continue;
    if (/\b(unreachable|prohibit|blackhole)\b/.test(line)) continue;
    const device = /\bdev\s+(\S+)/.exec(line)?.[1];
    const via = /\bvia\s+(\S+)/.exec(line)?.[1];
    if (device) routes.push({ family, device, ...(via ? { via } : {}) });
  }
  return routes;
}

/** Classify an address. */
export function scopeOf(address: string, family: "IPv4" | "IPv6"): Scope {
  if (family === "IPv4") {
    const [a, b] = address.split(".").map(Number);
    if (a === 127) return "loopback";
    if (a === 169 && b === 254) return "link-local";
    if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168)) {
      return "private";
    }
    if (a === 100 && b >= 64 && b <= 127) return "shared";
    return "public";
  }
  const lower = address.toLowerCase();
  if (lower === "::1") return "loopback";
  if (/^fe[89ab]/.test(lower)) return "link-local";
  if (/^f[cd]/.test(lower)) return "private";
  return /^[23]/.test(lower) ? "public" : "private";
}

/** Where the machine sits, from its interfaces and default routes. */
export function positionOf(interfaces: Interface[], routes: DefaultRoute[]): Position {
  const up = interfaces.filter((i) => i.up && !i.loopback);
  if (up.length === 0) return "offline";
  if (routes.length === 0) return "isolated";
  const scopes = up.flatMap((i) => i.addresses.map((a) => a.scope));
  return scopes.includes("public") ? "public" : "private";
}

/** Detect the network position. */
export async function detectNetwork(options: ProbeOptions = {}): Promise<Capability> {
  const shown = await query(["ip", "address", "show"], options);
  if (!ran(shown) || shown.code !== 0) {
    return {
      state: "absent",
      evidence: [`interfaces unknown: ${whyNot(shown)}`],
      details: { position: "unknown" },
    };
  }
  const interfaces = parseIpAddress(shown.stdout);
  const routes: DefaultRoute[] = [];
  for (const family of ["IPv4", "IPv6"] as const) {
    const r = await query(
      ["ip", ...(family === "IPv6" ? ["-6"] : []), "route", "show", "default"],
      options,
    );
    if (ran(r) && r.code === 0) routes.push(...parseDefaultRoutes(r.stdout, family));
  }
  const position = positionOf(interfaces, routes);
  const details = { position, interfaces, defaultRoutes: routes };
  const up = interfaces.filter((i) => i.up && !i.loopback);
  const evidence = [
    `${up.length} interface(s) up besides loopback${
      up.length ? `: ${up.map((i) => i.name).join(", ")}` : ""
    }`,
    routes.length
      ? `default route via ${
        routes.map((r) => `${r.device}${r.via ? ` (${r.via})` : ""}`).join(", ")
      }`
      : "no default route",
    `position: ${position}`,
  ];
  if (interfaces.every((i) => i.loopback)) {
    return { state: "absent", evidence: ["no network interface besides loopback"], details };
  }
  if (up.length === 0 || routes.length === 0) return { state: "present", evidence, details };
  return {
    state: "running",
    evidence: [
      ...evidence,
      "not claimed working: the host sends nothing to prove it (its link does)",
    ],
    details,
  };
}
