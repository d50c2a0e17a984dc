/**
 * Detect this machine's profile (src/profile.ts): os-release, architecture,
 * kernel, and each capability by looking and then by using it.
 */
import type { Profile } from "../../src/profile.ts";
import type { ProbeOptions } from "./_probe.ts";
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
  const [init, packages, containers, graphical, network, wireguard, nftables] = await Promise.all([
    detectInit(options),
    detectPackages(os, options),
    detectContainers(options),
    detectGraphical(),
    detectNetwork(options),
    detectWireguard(options),
    detectNftables(options),
  ]);
  return {
    detectedAt: new Date().toISOString(),
    ...(kernel.hostname ? { hostname: kernel.hostname } : {}),
    os,
    architecture: Deno.build.arch,
    ...(kernel.kernel ? { kernel: kernel.kernel } : {}),
    capabilities: { init, packages, containers, graphical, network, wireguard, nftables },
  };
}
