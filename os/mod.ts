/**
 * The adapters this machine has, chosen from its detected profile: an adapter
 * is used only when the profile proved its tool working (a package manager
 * that answered, an init that answered, a runtime that answered). A per-OS
 * build narrows the choice to its own adapters.
 */
import type { Profile } from "../src/profile.ts";
import type { Providers } from "../src/ports.ts";
import { alpineApk } from "./alpine_apk.ts";
import { archPacman } from "./arch_pacman.ts";
import { commandRunner } from "./command_runner.ts";
import { containerCli } from "./container_cli.ts";
import { openrc } from "./openrc.ts";
import { posixFileSystem } from "./posix_fs.ts";
import { detectContainers } from "./detect/containers.ts";
import { detectInit } from "./detect/init.ts";
import { detectOs } from "./detect/os_release.ts";
import { detectPackages, isNative } from "./detect/packages.ts";
import type { DetectOptions } from "./profile.ts";
import { systemd } from "./systemd.ts";
import { nftables } from "./nftables/mod.ts";
import { detectNftables } from "./nftables/detect.ts";
import { sysctl } from "./sysctl/mod.ts";
import { wireguard } from "./wireguard/mod.ts";
import { detectWireguard } from "./wireguard/detect.ts";

/** The adapters a build may use (default: every adapter here). */
export interface AdapterSet {
  packages?: readonly ("pacman" | "apk")[];
  services?: readonly ("systemd" | "openrc")[];
  containers?: readonly ("podman" | "docker")[];
  /** WireGuard: the kernel's, or wireguard-go. */
  overlay?: readonly ("kernel" | "userspace")[];
  firewall?: readonly "nftables"[];
  sysctl?: readonly "sysctl"[];
}

/** Options of {@link detectProviders}. */
export interface ProviderOptions extends DetectOptions {
  /** A profile already detected (otherwise it is detected now). */
  profile?: Profile;
  adapters?: AdapterSet;
  /**
   * A package manager to use although it is not the OS's own (host.json
   * `packageManager`). Without it, only the OS's own manager is used: pacman
   * that happens to be installed on a Debian machine does not manage its packages.
   */
  packageManager?: "pacman" | "apk";
}

/** Every adapter. */
export const ALL_ADAPTERS: Required<AdapterSet> = {
  packages: ["pacman", "apk"],
  services: ["systemd", "openrc"],
  containers: ["podman", "docker"],
  overlay: ["kernel", "userspace"],
  firewall: ["nftables"],
  sysctl: ["sysctl"],
};

/**
 * The providers for a profile: one per capability the profile proved working.
 *
 * @example
 * ```ts
 * const providers = providersFor(await detectProfile());
 * providers.packages?.name; // "pacman" on Arch
 * ```
 */
export function providersFor(profile: Profile, options: ProviderOptions = {}): Providers {
  const set = { ...ALL_ADAPTERS, ...options.adapters };
  const env = options.env;
  const caps = profile.capabilities;
  const usable = <T extends string>(cap: typeof caps.init, allowed: readonly T[]) =>
    cap.state === "working" && allowed.includes(cap.provider as T) ? cap.provider as T : undefined;
  const providers: Providers = { fs: posixFileSystem(), commands: commandRunner() };
  const chosen = options.packageManager;
  const pm = chosen
    ? usable(caps.packages, set.packages.filter((m) => m === chosen))
    : isNative(caps.packages.provider ?? "", profile.os)
    ? usable(caps.packages, set.packages)
    : undefined;
  if (pm === "pacman") providers.packages = archPacman({ env });
  if (pm === "apk") providers.packages = alpineApk({ env });
  const init = usable(caps.init, set.services);
  if (init === "systemd") providers.services = systemd({ env });
  if (init === "openrc") providers.services = openrc({ env });
  const runtime = usable(caps.containers, set.containers);
  if (runtime) providers.containers = containerCli({ program: runtime, env });
  // Absent from profiles recorded by an older host: then not used.
  const absent = { state: "absent" as const, evidence: [] };
  const wg = usable(caps.wireguard ?? absent, set.overlay);
  if (wg) providers.overlay = wireguard({ mode: wg, env });
  if (usable(caps.nftables ?? absent, set.firewall)) providers.firewall = nftables({ env });
  if (set.sysctl.includes("sysctl")) providers.sysctl = sysctl({ env });
  return providers;
}

/**
 * Detect what this machine's providers need (init, package manager, container
 * runtime, WireGuard, nftables; not the graphical session or the network) and
 * return its providers.
 */
export async function detectProviders(options: ProviderOptions = {}): Promise<Providers> {
  if (options.profile) return providersFor(options.profile, options);
  const os = await detectOs();
  const set = { ...ALL_ADAPTERS, ...options.adapters };
  const unused = { state: "absent" as const, evidence: ["not detected for choosing providers"] };
  const [init, packages, containers, wireguardCap, nftablesCap] = await Promise.all([
    detectInit(options),
    detectPackages(os, options),
    detectContainers({ ...options, runtimes: options.runtimes ?? options.adapters?.containers }),
    set.overlay.length ? detectWireguard(options) : unused,
    set.firewall.length ? detectNftables(options) : unused,
  ]);
  const profile: Profile = {
    detectedAt: new Date().toISOString(),
    os,
    architecture: Deno.build.arch,
    capabilities: {
      init,
      packages,
      containers,
      graphical: unused,
      network: unused,
      wireguard: wireguardCap,
      nftables: nftablesCap,
    },
  };
  return providersFor(profile, options);
}

export { detectProfile } from "./profile.ts";
