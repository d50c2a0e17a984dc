/**
 * The providers this machine has, chosen from its detected profile among the ones this
 * build carries (./carried.ts), by what each descriptor says (os/provider.ts): a provider
 * confined to a capability is used only when the profile proved that capability working
 * with it (a package manager that answered, an init that answered, a runtime that
 * answered); the others always.
 */
import { HostError } from "../src/errors.ts";
import type { Profile } from "../src/profile.ts";
import type { Providers } from "../src/providers.ts";
import { CARRIED } from "./carried.ts";
import { type DetectOptions, detectProfile } from "./detect/mod.ts";
import { isNative } from "./detect/packages.ts";
import type { OpenContext, Port, ProviderDescriptor } from "./provider.ts";

export type { Build, Port, ProviderDescriptor } from "./provider.ts";

/** A narrower choice among the providers this build carries, by port and name (tests). */
export type AdapterSet = Partial<Record<Port, readonly string[]>>;

/** Options of {@link detectProviders}. */
export interface ProviderOptions extends Omit<DetectOptions, "only"> {
  /** A profile already detected (otherwise it is detected now). */
  profile?: Profile;
  adapters?: AdapterSet;
  /**
   * A package manager to use although it is not the OS's own (host.json
   * `packageManager`). Without it, only the OS's own manager is used: pacman
   * that happens to be installed on a Debian machine does not manage its packages.
   */
  packageManager?: string;
  /** The host's state directory (the container runtime's env files, apk's own cache …). */
  stateDir?: string;
  /** The descriptors to choose from (default: the ones this build carries). */
  from?: readonly ProviderDescriptor[];
  /** The host's own program (see OpenContext.self). */
  self?: string;
}

/**
 * The providers for a profile: one per port, from the carried descriptors, each used when
 * its confinement holds (and wrapped by a carried descriptor with `over`).
 *
 * @example
 * ```ts
 * const providers = providersFor(await detectProfile());
 * providers.packages?.name; // "pacman" on Arch
 * ```
 */
export function providersFor(profile: Profile, options: ProviderOptions = {}): Providers {
  refuseUncarriedManager(options.packageManager, options.from ?? CARRIED);
  const from = narrowed(options);
  const context = {
    env: options.env,
    ...(options.stateDir ? { stateDir: options.stateDir } : {}),
    ...(options.self ? { self: options.self } : {}),
  };
  const chosen: Partial<Record<Port, unknown>> = {};
  // The ones that fill a port first (the first in the list whose confinement holds), then
  // the ones that wrap what was chosen.
  for (const p of [...from.filter((p) => !p.over), ...from.filter((p) => p.over)]) {
    if (!p.over && chosen[p.port] !== undefined) continue;
    const name = chosenName(p, profile, options);
    if (name === undefined) continue;
    chosen[p.port] = open(p, { ...context, name }, chosen[p.port]);
  }
  if (!chosen.fs) throw new Error("this build carries no file system provider");
  return chosen as Providers;
}

/** A descriptor's factory (and its wrapping of what its port already has). */
function open(p: ProviderDescriptor, context: OpenContext, before: unknown): unknown {
  const own = p.open(context);
  // deno-lint-ignore no-explicit-any
  return p.over ? p.over(own as any, before as any) : own;
}

/** The carried descriptors, each with its names narrowed to `options.adapters` (never widened). */
function narrowed(options: ProviderOptions): ProviderDescriptor[] {
  const wanted = options.adapters ?? {};
  return (options.from ?? CARRIED).flatMap((p) => {
    const asked = wanted[p.port];
    if (!asked || p.over) return [p];
    const names = p.names.filter((n) => asked.includes(n));
    return names.length ? [{ ...p, names }] : [];
  });
}

/** The name a descriptor is used under for this profile, or undefined when it is not used. */
function chosenName(
  p: ProviderDescriptor,
  profile: Profile,
  options: ProviderOptions,
): string | undefined {
  if (!p.confine) return p.names[0];
  // Absent from profiles recorded by an older host: then not used.
  const cap = profile.capabilities[p.confine.capability];
  const name = cap?.provider;
  if (cap?.state !== "working" || name === undefined || !p.names.includes(name)) return undefined;
  if (!p.confine.native) return name;
  const configured = options.packageManager;
  if (configured !== undefined) return name === configured ? name : undefined;
  return isNative(name, profile.os) ? name : undefined;
}

/** host.json's packageManager must name a manager this build carries. */
function refuseUncarriedManager(
  configured: string | undefined,
  from: readonly ProviderDescriptor[],
): void {
  if (configured === undefined) return;
  const managers = from.filter((p) => p.confine?.native).flatMap((p) => p.names);
  if (managers.includes(configured)) return;
  throw new HostError(
    "config.package-manager",
    `the configured packageManager "${configured}" is not one this build carries ` +
      `(${managers.join(", ") || "none"})`,
    { hint: "remove packageManager from host.json, or install the build for that OS" },
  );
}

/**
 * Detect what this machine's providers are confined to (the capabilities of the carried
 * descriptors: not the graphical session or the network) and return its providers.
 */
export async function detectProviders(options: ProviderOptions = {}): Promise<Providers> {
  if (options.profile) return providersFor(options.profile, options);
  const from = narrowed(options);
  const confined = from.flatMap((p) => p.confine ? [p.confine] : []);
  const profile = await detectProfile({
    ...options,
    only: [...new Set(confined.map((c) => c.capability))],
    runtimes: options.runtimes ??
      from.filter((p) => p.confine?.capability === "containers").flatMap((p) => p.names),
  });
  return providersFor(profile, options);
}

export { detectProfile } from "./detect/mod.ts";
