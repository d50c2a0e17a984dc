/**
 * Detect this machine's profile (src/profile.ts): os-release, architecture,
 * kernel, and each capability by looking and then by using it.
 */
import {
  type Capability,
  CAPABILITY_NAMES,
  type CapabilityName,
  type Profile,
} from "../../src/profile.ts";
import type { ProbeOptions } from "./_probe.ts";
import { detectAccounts } from "./accounts.ts";
import { detectContainers } from "./containers.ts";
import { detectGraphical } from "./graphical.ts";
import { detectInit } from "./init.ts";
import { detectNetwork } from "./network.ts";
import { detectKernel, detectOs } from "./os_release.ts";
import { detectPackages } from "./packages.ts";
import { detectNftables } from "../nftables/detect.ts";
import { detectWireguard } from "../wireguard/detect.ts";

/** Options of {@link detectProfile}. */
export interface DetectOptions extends ProbeOptions {
  /** Container runtimes to try, in order (default podman, docker). */
  runtimes?: readonly string[];
  /**
   * The capabilities to detect (default: every one); the others are recorded absent,
   * "not detected" (os/mod.ts detects only what the carried providers are confined to).
   */
  only?: readonly CapabilityName[];
}

/**
 * Detect the profile of this machine.
 *
 * @example
 * ```ts
 * const profile = await detectProfile();
 * profile.capabilities.containers.state; // "working" when podman answered
 * ```
 */
export async function detectProfile(options: DetectOptions = {}): Promise<Profile> {
  const os = await detectOs();
  const kernel = detectKernel();
  const detectors: Record<CapabilityName, () => Promise<Capability>> = {
    init: () => detectInit(options),
    packages: () => detectPackages(os, options),
    containers: () => detectContainers(options),
    graphical: () => detectGraphical(),
    network: () => detectNetwork(options),
    wireguard: () => detectWireguard(options),
    nftables: () => detectNftables(options),
    accounts: () => detectAccounts(options),
  };
  const skipped: Capability = { state: "absent", evidence: ["not detected (not asked for)"] };
  const found = await Promise.all(
    CAPABILITY_NAMES.map((name) =>
      !options.only || options.only.includes(name) ? detectors[name]() : skipped
    ),
  );
  return {
    detectedAt: new Date().toISOString(),
    ...(kernel.hostname ? { hostname: kernel.hostname } : {}),
    os,
    architecture: Deno.build.arch,
    ...(kernel.kernel ? { kernel: kernel.kernel } : {}),
    capabilities: Object.fromEntries(
      CAPABILITY_NAMES.map((name, i) => [name, found[i]]),
    ) as Record<CapabilityName, Capability>,
  };
}
