/**
 * The files the Alpine package installs, made here without abuild or apk (neither is in
 * Debian): the staged APKBUILD (packaging/make_package.ts stageAlpine) is sourced and its
 * `build()` and `package()` run as abuild runs them, for one architecture (`CARCH`), over
 * its staged sources (tar sources unpacked into `srcdir` first, as abuild's default
 * unpack does). Nothing is split off: the result holds the main package and every
 * subpackage (-openrc, -doc, the completions), as on a machine where all are installed.
 * What abuild adds beyond `package()` (the split, .PKGINFO, signing) is not made here: the
 * recordings of tests/fixtures/apk/split/ stand for it.
 */
import { join } from "node:path";
import { LabError } from "./errors.ts";
import { run } from "./_process.ts";

/**
 * Runs the staged APKBUILD in `staged` for `arch` and leaves what `package()` installed in
 * `pkgdir` (which must not exist yet). Returns `pkgdir`.
 */
export async function alpinePackageFiles(
  staged: string,
  arch: "x86_64" | "aarch64",
  pkgdir: string,
): Promise<string> {
  const work = await Deno.makeTempDir({ prefix: "noxlab-abuild-" });
  try {
    const srcdir = join(work, "src");
    await Deno.mkdir(srcdir);
    const recipe = await Deno.readTextFile(join(staged, "APKBUILD"));
    const sources = recipe.match(/^source="([^"]*)"/m)?.[1].trim().split(/\s+/) ?? [];
    if (sources.length === 0) throw new LabError("usage", `${staged}/APKBUILD names no source`);
    for (const name of sources) {
      await Deno.copyFile(join(staged, name), join(srcdir, name));
      if (name.endsWith(".tar")) {
        await run(["tar", "-xf", join(srcdir, name), "-C", srcdir], { what: `unpack ${name}` });
      }
    }
    const script = `set -e
cd "$srcdir"
. "$1"
build
package
`;
    const r = await run(["sh", "-c", script, "abuild", join(staged, "APKBUILD")], {
      check: false,
      clearEnv: true,
      env: {
        PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        srcdir,
        pkgdir,
        startdir: staged,
        CARCH: arch,
      },
      what: "the APKBUILD's build() and package()",
    });
    if (r.code !== 0) {
      throw new LabError(
        "command-failed",
        `the staged APKBUILD's build() and package() failed for ${arch} (exit ${r.code}): ` +
          (r.stderr || r.stdout).trim(),
      );
    }
    return pkgdir;
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}
