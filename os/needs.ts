/**
 * What each build needs from its permission set, derived from the providers it carries
 * (their descriptors: os/<folder>/provider.ts, listed in os/provider_list.ts) and the profile's
 * own detection (os/detect/needs.ts). packaging/derive_providers.ts writes the permission sets'
 * allow-run and allow-read lines and the `host` task from it; tests hold the rest of
 * packaging/<os>/permissions to it.
 */
import { PROFILE_NEEDS } from "./detect/needs.ts";
import type { Build, Needs, PackagedBuild, ProviderDescriptor } from "./provider.ts";
import { distributionsOf, selects } from "./provider.ts";
import { type Distribution, DISTRIBUTIONS } from "./distros/mod.ts";
import { PROVIDERS } from "./provider_list.ts";

/** Where a program is found on one distribution (one allow-run line). */
export interface Spelling {
  path: string;
  /** The distribution that places it there (its id). */
  on: string;
}

/** What one build needs from its permission set, beyond the managed roots. */
export interface OsNeeds {
  /** Programs run, by name, each with what it is run for. */
  run: Record<string, string>;
  /** Each program's spellings on the build's distributions, in order (none for the checkout). */
  at: Record<string, Spelling[]>;
  /** Paths read (lstat, readDir, read), each with the reason. */
  read: Record<string, string>;
  /** --allow-sys kinds. */
  sys: Record<string, string>;
}

/** The descriptors the build carries, in the list's order. */
export function carriedBy(
  build: Build,
  list: readonly ProviderDescriptor[] = PROVIDERS,
  distros: readonly Distribution[] = DISTRIBUTIONS,
): ProviderDescriptor[] {
  return list.filter((p) => selects(p.builds, build, distros));
}

/**
 * The needs of a build: its providers' (in the list's order), then the profile's. A name or
 * path two of them need once, with both reasons. Where each program lies is its
 * distributions' to say (os/distros/).
 *
 * @example
 * ```ts
 * needsOf("arch").at.pacman; // [{ path: "/usr/bin/pacman", on: "arch" }]
 * ```
 */
export function needsOf(
  build: Build,
  list: readonly ProviderDescriptor[] = PROVIDERS,
  distros: readonly Distribution[] = DISTRIBUTIONS,
): OsNeeds {
  const needs: OsNeeds = { run: {}, at: {}, read: {}, sys: {} };
  const join = (had: string | undefined, why: string) =>
    had === undefined || had === why ? why : `${had}; ${why}`;
  const sources: [string, Needs][] = [
    ...carriedBy(build, list, distros).map((p): [string, Needs] => [`os/${p.folder}`, p]),
    ["os/detect/needs.ts", PROFILE_NEEDS],
  ];
  for (const [from, source] of sources) {
    for (const [name, program] of Object.entries(source.programs ?? {})) {
      needs.run[name] = join(needs.run[name], program.why);
      if (build !== "checkout") needs.at[name] = spellings(name, build, from, distros);
    }
    for (const [path, why] of Object.entries(source.reads ?? {})) {
      needs.read[path] = join(needs.read[path], why);
    }
    for (const [kind, why] of Object.entries(source.sys ?? {})) {
      needs.sys[kind] = join(needs.sys[kind], why);
    }
  }
  return needs;
}

/**
 * A program's spellings on the build's distributions, in their order; a distribution's own
 * build needs its distribution to place it, the tarball one of them.
 */
function spellings(
  name: string,
  build: PackagedBuild,
  from: string,
  distros: readonly Distribution[],
): Spelling[] {
  const on = distributionsOf(build, distros);
  const out: Spelling[] = [];
  for (const distro of on) {
    const paths = distro.programs[name] ?? [];
    if (paths.length === 0 && build !== "tarball") {
      throw new Error(
        `${from} runs ${name}, and the ${build} build carries it, but ${distro.name} places no ` +
          `${name} (os/distros/${distro.id}.ts programs)`,
      );
    }
    for (const path of paths) {
      if (!out.some((s) => s.path === path)) out.push({ path, on: distro.id });
    }
  }
  if (out.length === 0) {
    throw new Error(`${from} runs ${name}, which no distribution places (os/distros/)`);
  }
  return out;
}

/** Needs by packaged build (the names of packaging/<os>/). */
export const NEEDS: Readonly<Record<PackagedBuild, OsNeeds>> = Object.fromEntries(
  [...DISTRIBUTIONS.map((d) => d.id), "tarball" as const].map((b) => [b, needsOf(b)]),
) as Record<PackagedBuild, OsNeeds>;
