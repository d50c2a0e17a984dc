/**
 * What a provider (one folder of os/) says about itself, once, in its `provider.ts`: the
 * port it fills, the programs it runs and the paths it reads (each with the reason), how
 * the profile confines it, its factory, and which builds carry it (Puppet's providers:
 * `commands`, `confine`, `defaultfor`). Everything else is derived from the list of
 * descriptors (os/provider_list.ts): the choice of providers (os/mod.ts), the needs per build
 * (os/needs.ts), the permission sets' allow-run and allow-read lines and the `host` task
 * (packaging/derive_providers.ts, `deno task providers`), and the providers each per-OS build
 * carries (packaging/build.ts). Where a program lies is not the provider's to say but each
 * distribution's (os/distros/): a descriptor names programs only.
 */
import type { CapabilityName } from "../src/profile.ts";
import type { Providers } from "../src/providers.ts";
import { type Distribution, DISTRIBUTIONS, type DistroId } from "./distros/mod.ts";

/** The builds the host ships as (the folders of packaging/): one per distribution, and the tarball. */
export type PackagedBuild = DistroId | "tarball";

/** A build, or the checkout itself (`deno task host`, the tests). */
export type Build = PackagedBuild | "checkout";

/** Every build that can carry a provider. */
export const EVERY_BUILD: readonly Build[] = [
  ...DISTRIBUTIONS.map((d) => d.id),
  "tarball",
  "checkout",
];

/**
 * Which builds carry a provider: a build by name; `every` build; or every distribution's
 * build whose init (`init:systemd`) or package manager (`packages:apt`) it is, so that a
 * distribution added to os/distros/ gets the providers that fit it without their
 * descriptors changing (Puppet's `defaultfor`, turned around). The tarball and the checkout
 * are named where they carry it.
 */
export type BuildSelector =
  | Build
  | "every"
  | `init:${Distribution["init"]}`
  | `packages:${string}`;

/** Whether a descriptor's `builds` select `build` (its distribution's facts: os/distros/). */
export function selects(
  selectors: readonly BuildSelector[],
  build: Build,
  distros: readonly Distribution[] = DISTRIBUTIONS,
): boolean {
  const distro = distros.find((d) => d.id === build);
  return selectors.some((s) =>
    s === build || s === "every" ||
    (distro !== undefined &&
      (s === `init:${distro.init}` || s === `packages:${distro.packages.name}`))
  );
}

/**
 * The distributions a packaged build runs on, whose program paths its allow-run lines name:
 * a distribution's own build on it alone, the tarball on every one (os/distros/mod.ts).
 */
export function distributionsOf(
  build: PackagedBuild,
  distros: readonly Distribution[] = DISTRIBUTIONS,
): Distribution[] {
  return build === "tarball" ? [...distros] : distros.filter((d) => d.id === build);
}

/** A port of src/providers.ts (`packages`, `services`, `fs` …). */
export type Port = keyof Providers;

/**
 * One program a provider (or the profile) runs, by the name it is run as: where it lies is
 * each distribution's to say (os/distros/, `programs`), never the provider's.
 */
export interface Program {
  /** What it is run for (the permission sets' comment; exact argv in the folder's README). */
  why: string;
}

/** What something needs from a permission set: programs, paths read, system information. */
export interface Needs {
  /** Programs run, by the name they are run as. */
  programs?: Readonly<Record<string, Program>>;
  /** Paths read (lstat, readDir, read), each with the reason; under a managed root or not. */
  reads?: Readonly<Record<string, string>>;
  /** --allow-sys kinds, each with the reason. */
  sys?: Readonly<Record<string, string>>;
}

/** What a provider's factory is given. */
export interface OpenContext {
  /** The name chosen among the descriptor's `names` ("podman" or "docker" …). */
  name: string;
  /** Extra environment for the programs it runs. */
  env?: Record<string, string>;
  /** The host's state directory, when configured. */
  stateDir?: string;
  /**
   * The host's own program (the permission set's `binary`), which the file system runs as
   * a directory's owner; unset from a checkout (its development shim).
   */
  self?: string;
}

/** When a provider is used: Puppet's `confine` and `defaultfor`. */
export interface Confine {
  /**
   * The profile's capability that must be "working" with one of the descriptor's names as
   * its provider (detected by os/detect/, or the folder's detect.ts).
   */
  capability: CapabilityName;
  /**
   * Used only where it is the OS's own (os-release; os/detect/packages.ts `isNative`),
   * unless host.json's `packageManager` names it; then only that one is used.
   */
  native?: true;
}

/** Everything about one provider (os/<folder>/provider.ts exports it as `PROVIDER`). */
export interface ProviderDescriptor<P extends Port = Port> extends Needs {
  /** Its folder under os/ (a per-OS build imports `os/<folder>/provider.ts`). */
  folder: string;
  /** The port it fills. */
  port: P;
  /** The names it answers to: the profile's provider names, and AdapterSet's (tests). */
  names: readonly string[];
  /** The builds that carry its code (an Arch build carries no apk code): {@link BuildSelector}. */
  builds: readonly BuildSelector[];
  /** When it is used; without it, always (when carried). */
  confine?: Confine;
  /** Its factory. */
  open(context: OpenContext): NonNullable<Providers[P]>;
  /**
   * Present when it does not replace the provider chosen for its port but wraps it (the
   * tarball's own package, in front of the machine's package manager).
   */
  over?(own: NonNullable<Providers[P]>, chosen: Providers[P]): NonNullable<Providers[P]>;
}
