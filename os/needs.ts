/**
 * What each build needs from its permission set, derived from the providers it carries
 * (their descriptors: os/<folder>/provider.ts, listed in os/provider_list.ts) and the profile's
 * own detection (os/detect/needs.ts). packaging/derive_providers.ts writes the permission sets'
 * allow-run and allow-read lines and the `host` task from it; tests hold the rest of
 * packaging/<os>/permissions to it.
 */
import { PROFILE_NEEDS } from "./detect/needs.ts";
import type {
  Build,
  Distribution,
  Needs,
  PackagedBuild,
  Program,
  ProviderDescriptor,
} from "./provider.ts";
import { DISTRIBUTIONS } from "./provider.ts";
import { PROVIDERS } from "./provider_list.ts";

/** Where a program is found on one distribution (one allow-run line). */
export interface Spelling {
  path: string;
  on: Distribution;
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
): ProviderDescriptor[] {
  return list.filter((p) => p.builds.includes(build));
}

/**
 * The needs of a build: its providers' (in the list's order), then the profile's. A name or
 * path two of them need once, with both reasons.
 *
 * @example
 * ```ts
 * needsOf("arch").at.pacman; // [{ path: "/usr/bin/pacman", on: "arch" }]
 * ```
 */
export function needsOf(build: Build, list: readonly ProviderDescriptor[] = PROVIDERS): OsNeeds {
  const needs: OsNeeds = { run: {}, at: {}, read: {}, sys: {} };
  const join = (had: string | undefined, why: string) =>
    had === undefined || had === why ? why : `${had}; ${why}`;
  const sources: [string, Needs][] = [
    ...carriedBy(build, list).map((p): [string, Needs] => [`os/${p.folder}`, p]),
    ["os/detect/needs.ts", PROFILE_NEEDS],
  ];
  const found: Record<string, { from: string; at: Program["at"] }> = {};
  for (const [from, source] of sources) {
    for (const [name, program] of Object.entries(source.programs ?? {})) {
      const earlier = found[name];
      if (earlier && !samePaths(earlier.at, program.at)) {
        throw new Error(`${from} and ${earlier.from} say ${name} is found at different paths`);
      }
      found[name] = { from, at: program.at };
      needs.run[name] = join(needs.run[name], program.why);
      if (build !== "checkout") needs.at[name] = spellings(name, program.at, build, from);
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

/** Whether two sources place a program at the same paths on every distribution. */
function samePaths(a: Program["at"], b: Program["at"]): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<Distribution>;
  return [...keys].every((d) => (a[d] ?? []).join("\n") === (b[d] ?? []).join("\n"));
}

/** A program's spellings on the build's distributions; a single-distribution build needs one. */
function spellings(
  name: string,
  at: Program["at"],
  build: PackagedBuild,
  from: string,
): Spelling[] {
  const out: Spelling[] = [];
  for (const on of DISTRIBUTIONS[build]) {
    const paths = at[on] ?? [];
    if (paths.length === 0 && DISTRIBUTIONS[build].length === 1) {
      throw new Error(`${from}: ${name} is carried by the ${build} build but has no path on ${on}`);
    }
    for (const path of paths) if (!out.some((s) => s.path === path)) out.push({ path, on });
  }
  if (out.length === 0) throw new Error(`${from}: ${name} has no path for the ${build} build`);
  return out;
}

/** Needs by packaged build (the names of packaging/<os>/). */
export const NEEDS: Readonly<Record<PackagedBuild, OsNeeds>> = {
  arch: needsOf("arch"),
  alpine: needsOf("alpine"),
  tarball: needsOf("tarball"),
};
