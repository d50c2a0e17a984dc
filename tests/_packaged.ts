/**
 * Test helper: the host (or a probe) built in the bundled form for one OS by
 * packaging/build.ts, installed at the paths of its permission set inside a sandbox
 * (tests/_sandbox.ts: a private mount namespace whose system directories are overlays), so
 * it runs exactly as installed, under its real permission set. Private to tests/.
 */
import { dirname, join } from "node:path";
import { build } from "../packaging/build.ts";
import { loadPermissionSet, type PermissionSet, type TargetOs } from "../packaging/permissions.ts";
import { place, type Sandbox } from "./_sandbox.ts";

/** A bundled build in `out`, and the names of the bundle's files. */
export interface Built {
  os: TargetOs;
  out: string;
  bundle: string[];
  /** The glibc loader and libraries the build carries (Alpine's and the tarball's), if any. */
  glibc?: string[];
}

/** Builds `entry` for `os` in the bundled form into `out`. */
export async function buildBundled(os: TargetOs, entry: string, out: string): Promise<Built> {
  const built = await build({ os, form: "bundled", out, entry });
  return { os, out, bundle: built.bundle!, ...(built.glibc ? { glibc: built.glibc.files } : {}) };
}

/**
 * Builds `entry` for `os` in the bundled form (or takes `prebuilt`) and installs it in the
 * sandbox at the set's paths.
 */
export async function installBuilt(
  s: Sandbox,
  os: TargetOs,
  entry: string,
  prebuilt?: Built,
): Promise<PermissionSet> {
  const built = prebuilt ?? await buildBundled(os, entry, join(s.dir, "build"));
  const out = built.out;
  const set = await loadPermissionSet(os);
  await place(s, set.binary, await Deno.readFile(join(out, "nox-mesh-host")), 0o755);
  // The bundle's entry at the set's path, its parts beside it, as the packages install them.
  for (const name of built.bundle!) {
    await place(s, join(dirname(set.bundle), name), await Deno.readFile(join(out, name)));
  }
  // Every package's shim runs the runtime it carries (a hard link: 95 MB); Alpine's and the
  // tarball's through the glibc loader and libraries beside it.
  await Deno.mkdir(s.upper(dirname(set.deno)), { recursive: true });
  await Deno.link(join(out, "deno"), s.upper(set.deno));
  if (set.glibc) {
    await Deno.mkdir(s.upper(set.glibc), { recursive: true });
    for (const name of built.glibc ?? []) {
      await Deno.link(join(out, "glibc", name), s.upper(join(set.glibc, name)));
    }
  }
  return set;
}
