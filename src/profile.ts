/**
 * The machine's profile (R7): what this machine can be asked to do, detected,
 * never assumed. OS-agnostic: os/ detects, this module names the shape and
 * prints it. Each capability is one of four states, and "working" is only
 * ever claimed after using the thing (the runtime answered a query, the init
 * answered) — never from a package being installed.
 */

/** How far a capability was proven. */
export type CapabilityState = "absent" | "present" | "running" | "working";

/** The states, weakest first. */
export const CAPABILITY_STATES: readonly CapabilityState[] = [
  "absent",
  "present",
  "running",
  "working",
];

/** The capabilities a profile reports. */
export type CapabilityName =
  | "init"
  | "packages"
  | "containers"
  | "graphical"
  | "network"
  | "wireguard"
  | "nftables"
  | "accounts";

/** The capability names, in the order they are printed. */
export const CAPABILITY_NAMES: readonly CapabilityName[] = [
  "init",
  "packages",
  "containers",
  "graphical",
  "network",
  "wireguard",
  "nftables",
  "accounts",
];

/** One capability: its state, what provides it, and how that was established. */
export interface Capability {
  state: CapabilityState;
  /** The tool or system that provides it ("systemd", "pacman", "podman", "wayland" …). */
  provider?: string;
  version?: string;
  /** Sentences saying how the state was established, or why nothing more could be. */
  evidence: string[];
  /** What else was learnt (e.g. network interfaces and routes). */
  details?: Record<string, unknown>;
}

/** The operating system, from os-release. */
export interface OsInfo {
  /** os-release ID ("arch", "alpine", "debian"; "linux" when unknown). */
  id: string;
  versionId?: string;
  prettyName?: string;
  /** os-release ID_LIKE words. */
  like: string[];
}

/** The machine's profile. */
export interface Profile {
  detectedAt: string;
  hostname?: string;
  os: OsInfo;
  /** Machine architecture as the kernel names it ("x86_64", "aarch64"). */
  architecture: string;
  kernel?: string;
  capabilities: Record<CapabilityName, Capability>;
}

/** The stronger of two states. */
export function stronger(a: CapabilityState, b: CapabilityState): CapabilityState {
  return CAPABILITY_STATES.indexOf(a) >= CAPABILITY_STATES.indexOf(b) ? a : b;
}

/** A capability that was looked for and not found. */
export function absent(...evidence: string[]): Capability {
  return { state: "absent", evidence };
}

/**
 * The profile as lines for people.
 *
 * @example
 * ```ts
 * console.log(profileText(profile)); // "os           Arch Linux (arch rolling)\n…"
 * ```
 */
export function profileText(profile: Profile): string {
  const os = profile.os;
  const rows: [string, string][] = [
    ["os", `${os.prettyName ?? os.id} (${[os.id, os.versionId].filter(Boolean).join(" ")})`],
    ["architecture", profile.architecture],
  ];
  if (profile.kernel) rows.push(["kernel", profile.kernel]);
  if (profile.hostname) rows.push(["hostname", profile.hostname]);
  const lines = rows.map(([k, v]) => `${k.padEnd(13)}${v}\n`);
  for (const name of CAPABILITY_NAMES) {
    const c = profile.capabilities[name];
    if (!c) continue; // a profile recorded by an older host
    const head = [c.state, c.provider, c.version].filter(Boolean).join(" ");
    lines.push(`${name.padEnd(13)}${head}\n`);
    for (const sentence of c.evidence) lines.push(`${" ".repeat(15)}${sentence}\n`);
  }
  return lines.join("");
}
