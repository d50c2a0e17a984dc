/**
 * The adapters this machine has, chosen from its detected profile: an adapter
 * is used only when the profile proved its tool working (a package manager
 * that answered, an init that answered, a runtime that answered). A per-OS
 * build narrows the choice to its own adapters.
 */
import { HostError } from "../src/errors.ts";
import type { Profile } from "../src/profile.ts";
import type { Providers } from "../src/providers.ts";
import { ADAPTERS } from "./adapters.ts";
import { posix } from "node:path";
import { commandRunner } from "./command-runner/mod.ts";
import { posixFileSystem } from "./posix-fs/mod.ts";
import { detectContainers } from "./detect/containers.ts";
import { detectInit } from "./detect/init.ts";
import { detectOs } from "./detect/os_release.ts";
import { detectPackages, isNative } from "./detect/packages.ts";
import type { DetectOptions } from "./detect/mod.ts";
import type { AdapterRegistry } from "./registry.ts";
import { nftables } from "./nftables/mod.ts";
import { detectNftables } from "./nftables/detect.ts";
import { sysctl } from "./sysctl/mod.ts";
import { withOwnPackage } from "./_own_package.ts";
import { wireguard } from "./wireguard/mod.ts";
import { detectWireguard } from "./wireguard/detect.ts";

export type { AdapterRegistry } from "./registry.ts";

/** A narrower choice among the adapters this build carries (tests; default: all of them). */
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
  packageManager?: string;
  /** The host's state directory: the container runtime's env files go in a private directory there. */
  stateDir?: string;
}

/**
 * The overlay, firewall and kernel-setting adapters: every build carries them
 * (WireGuard, nftables and sysctl are the same tools on every distribution).
 */
const NET_ADAPTERS = {
  overlay: ["kernel", "userspace"] as const,
  firewall: ["nftables"] as const,
  sysctl: ["sysctl"] as const,
};

/** The adapters this build carries, by name (packaging/<os>/adapters.ts in a per-OS build). */
export const CARRIED: Required<AdapterSet> = namesOf(ADAPTERS);

function namesOf(registry: AdapterRegistry): Required<AdapterSet> {
  const keys = <K extends string>(o: Partial<Record<K, unknown>>) => Object.keys(o) as K[];
  return {
    packages: keys(registry.packages),
    services: keys(registry.services),
    containers: keys(registry.containers),
    ...NET_ADAPTERS,
  };
}

/** The private directory, inside the state directory, for container env files. */
export const CONTAINER_ENV_DIR = "container-env";

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
  const set = narrowed(options.adapters);
  const env = options.env;
  const caps = profile.capabilities;
  const usable = <T extends string>(cap: typeof caps.init, allowed: readonly T[]) =>
    cap.state === "working" && allowed.includes(cap.provider as T) ? cap.provider as T : undefined;
  const providers: Providers = {
    // Between its verbs the file system adapter waits in the state directory when the
    // process was started where the permission set does not let it go back (a service in /).
    fs: posixFileSystem(options.stateDir ? { home: options.stateDir } : {}),
    commands: commandRunner(),
  };
  const chosen = options.packageManager;
  if (chosen !== undefined && !CARRIED.packages.includes(chosen as "pacman")) {
    throw new HostError(
      "config.package-manager",
      `the configured packageManager "${chosen}" is not one this build carries ` +
        `(${CARRIED.packages.join(", ") || "none"})`,
      { hint: "remove packageManager from host.json, or install the build for that OS" },
    );
  }
  const pm = chosen
    ? usable(caps.packages, set.packages.filter((m) => m === chosen))
    : isNative(caps.packages.provider ?? "", profile.os)
    ? usable(caps.packages, set.packages)
    : undefined;
  if (pm) {
    const stateDir = options.stateDir ? { stateDir: options.stateDir } : {};
    providers.packages = ADAPTERS.packages[pm]?.({ env, ...stateDir });
  }
  // The tarball is its own package manager for the host, whatever manages the rest.
  if (ADAPTERS.self) {
    // It stages an upgrade in the host's state directory for the launcher.
    const self = ADAPTERS.self({
      env,
      ...(options.stateDir ? { stateDir: options.stateDir } : {}),
    });
    providers.packages = withOwnPackage(self, providers.packages);
  }
  const init = usable(caps.init, set.services);
  if (init) providers.services = ADAPTERS.services[init]?.({ env });
  const runtime = usable(caps.containers, set.containers);
  const envDir = posix.join(options.stateDir ?? "/var/lib/mesh-host", CONTAINER_ENV_DIR);
  if (runtime) {
    providers.containers = ADAPTERS.containers[runtime]?.({ program: runtime, env, envDir });
  }
  // Absent from profiles recorded by an older host: then not used.
  const absent = { state: "absent" as const, evidence: [] };
  const wg = usable(caps.wireguard ?? absent, set.overlay);
  if (wg) providers.overlay = wireguard({ mode: wg, env });
  if (usable(caps.nftables ?? absent, set.firewall)) providers.firewall = nftables({ env });
  if (set.sysctl.includes("sysctl")) providers.sysctl = sysctl({ env });
  return providers;
}

/** The carried adapters, narrowed to `wanted` where given (never widened). */
function narrowed(wanted: AdapterSet = {}): Required<AdapterSet> {
  const within = <T extends string>(carried: readonly T[], asked?: readonly T[]) =>
    asked ? carried.filter((name) => asked.includes(name)) : carried;
  return {
    packages: within(CARRIED.packages, wanted.packages),
    services: within(CARRIED.services, wanted.services),
    containers: within(CARRIED.containers, wanted.containers),
    overlay: within(CARRIED.overlay, wanted.overlay),
    firewall: within(CARRIED.firewall, wanted.firewall),
    sysctl: within(CARRIED.sysctl, wanted.sysctl),
  };
}

/**
 * Detect what this machine's providers need (init, package manager, container
 * runtime, WireGuard, nftables; not the graphical session or the network) and
 * return its providers.
 */
export async function detectProviders(options: ProviderOptions = {}): Promise<Providers> {
  if (options.profile) return providersFor(options.profile, options);
  const os = await detectOs();
  const set = narrowed(options.adapters);
  const unused = { state: "absent" as const, evidence: ["not detected for choosing providers"] };
  const [init, packages, containers, wireguardCap, nftablesCap] = await Promise.all([
    detectInit(options),
    detectPackages(os, options),
    detectContainers({
      ...options,
      runtimes: options.runtimes ?? narrowed(options.adapters).containers,
    }),
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

export { detectProfile } from "./detect/mod.ts";
