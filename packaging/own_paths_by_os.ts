/**
 * Each build's own paths, and their union for a program built for none: a distribution's
 * from its facts (os/distros/<id>.ts: where its package installs the host, root's PATH, its
 * init), derived by packaging/own_paths.ts; the tarball's from packaging/tarball/own_paths.ts.
 */
import { DISTRIBUTIONS } from "../os/distros/mod.ts";
import type { PackagedBuild } from "../os/provider.ts";
import { ownPathsOf } from "./own_paths.ts";
import { OWN_PATHS as tarball } from "./tarball/own_paths.ts";

/** The own paths of each packaged build. */
export const OWN_PATHS_BY_OS: Readonly<Record<PackagedBuild, readonly string[]>> = Object
  .fromEntries([
    ...DISTRIBUTIONS.map((d) => [
      d.id,
      ownPathsOf({ binDir: d.install.binDir, rootPath: d.install.rootPath, inits: [d.init] }),
    ]),
    ["tarball", tarball],
  ]);

/** Every build's own paths at once: what `deno task host` (built for no one OS) refuses. */
export const ALL_OWN_PATHS: readonly string[] = [
  ...new Set(Object.values(OWN_PATHS_BY_OS).flat()),
];
