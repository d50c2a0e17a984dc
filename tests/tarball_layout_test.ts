/**
 * One tarball layout (os/tarball_layout.ts): the tarball packaging lays out holds only
 * paths inside it, and the launcher's tarball path (launcher/pkg/tarball.sh: POSIX sh,
 * which cannot import it) spells the same paths in each place it knows them: packing the
 * installation, checking a staged tarball's listing, switching to it, and reading the
 * VERSION file (and install-init, where it finds the init files; the launcher, where it
 * finds its include). The scripts' paths are read out of their text; a launcher that drops
 * or adds one is caught.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { TARBALL_LAYOUT, TARBALL_PREFIX } from "../os/tarball_layout.ts";
import { tarballEntries } from "../packaging/make_package.ts";
import type { BuildResult } from "../packaging/build.ts";
import { readTarball } from "../os/tarball-self/_ustar.ts";

const LAUNCHER = new URL("../launcher/pkg/tarball.sh", import.meta.url).pathname;
const NAME = "nox-mesh-host";

/** The body of sh function `name` (from `name() {` to the `}` that closes it at column 0). */
function body(text: string, name: string): string {
  const found = new RegExp(`\\n${name}\\(\\) \\{\\n([\\s\\S]*?)\\n\\}\\n`).exec(text);
  assert.ok(found, `the launcher has no function ${name}`);
  return found[1];
}

/** Expand the launcher's `$name`, `"$name"` and `$program` (bin/$name) in `s`. */
function expand(s: string): string {
  return s.replaceAll('"$name"', NAME).replaceAll("$program", `bin/${NAME}`)
    .replaceAll("$name", NAME);
}

/** The words of a `for VAR in "A" "B" …; do` line in `text` (for VAR). */
function forWords(text: string, variable: string): string[] {
  const line = new RegExp(`\\bfor ${variable} in (.*); do`).exec(text)?.[1];
  assert.ok(line, `no "for ${variable} in" loop`);
  return [...line.matchAll(/"([^"]+)"/g)].map((m) => expand(m[1]));
}

/** The patterns of the case arm that ends with `) ;;` and starts with `first` in `text`. */
function caseArm(text: string, first: string): string[] {
  const line = text.split("\n").map((l) => l.trim()).find((l) => l.startsWith(first));
  assert.ok(line, `no case arm starting ${first}`);
  const patterns = /^(.*?)\)/.exec(line)?.[1] ?? "";
  return patterns.split("|").map((p) => expand(p.trim()));
}

/** What the launcher's text says the layout is, place by place. */
function launcherLayout(text: string) {
  const layoutOk = body(text, "layout_ok");
  return {
    packed: forWords(body(text, "pack_installation"), "f"),
    switchedFiles: forWords(body(text, "switch_to"), "f"),
    switchedDirs: forWords(body(text, "switch_to"), "d"),
    stagedFiles: caseArm(layoutOk, 'bin/"$name" |'),
    stagedFileDirs: caseArm(layoutOk, 'lib/"$name"/?* |'),
    stagedDirs: caseArm(layoutOk, 'lib/"$name"/ |'),
    versionFile: [...body(text, "installed_version").matchAll(/"\$prefix\/([^"]+)"/g)]
      .map((m) => expand(m[1])),
  };
}

/** What the module says each of the launcher's places holds. */
function expected() {
  const bin = TARBALL_LAYOUT.binFiles.map((f) => `bin/${f}`);
  const dirs = [...TARBALL_LAYOUT.dirs];
  return {
    packed: [...bin, ...dirs],
    switchedFiles: bin,
    switchedDirs: dirs,
    stagedFiles: bin,
    stagedFileDirs: dirs.map((d) => `${d}/?*`),
    stagedDirs: [...dirs.map((d) => `${d}/`), ...dirs.map((d) => `${d}/?*/`)],
    versionFile: [TARBALL_LAYOUT.versionFile, TARBALL_LAYOUT.versionFile],
  };
}

Deno.test("the launcher's paths are the tarball layout's (packing, checking a stage, switching, VERSION)", async () => {
  assert.deepEqual(launcherLayout(await Deno.readTextFile(LAUNCHER)), expected());
});

Deno.test("the launcher looks for its package kind's include where the layout puts it", async () => {
  const launcher = await Deno.readTextFile(
    new URL("../launcher/nox-mesh-host-launch", import.meta.url),
  );
  const lib = /^lib=\$\{NOX_MESH_HOST_LAUNCH_LIB:-\$prefix\/([^}]+)\}$/m.exec(launcher)?.[1];
  assert.equal(lib, TARBALL_LAYOUT.launchDir);
});

Deno.test("install-init looks for the init files where the layout puts them (beside bin/, in its initDir)", async () => {
  const script = await Deno.readTextFile(
    new URL("../packaging/tarball/nox-mesh-host-install-init", import.meta.url),
  );
  const dirs = [...script.matchAll(/"\$\(dirname -- "\$0"\)\/\.\.\/([^"]+)"/g)].map((m) =>
    expand(m[1])
  );
  assert.deepEqual(dirs, [TARBALL_LAYOUT.initDir], "the directory it changes to");
});

Deno.test("the comparison above catches a launcher that drops or adds a path", async () => {
  const text = await Deno.readTextFile(LAUNCHER);
  const dropped = text.replace(
    'for d in "lib/$name" "share/$name"; do',
    'for d in "lib/$name"; do',
  );
  assert.notEqual(dropped, text);
  assert.notDeepEqual(launcherLayout(dropped), expected());
  const added = text.replace(
    'lib/"$name"/?* | share/"$name"/?*) ;;',
    'lib/"$name"/?* | share/"$name"/?* | etc/"$name"/?*) ;;',
  );
  assert.notEqual(added, text);
  assert.notDeepEqual(launcherLayout(added), expected());
});

Deno.test("the tarball packaging lays out holds only paths of the layout, and its reader takes them", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxln-layout-" });
  try {
    const b = {
      dir,
      version: "1.2.3",
      form: "compiled",
      arch: "x86_64",
    } as unknown as BuildResult;
    const paths = Object.keys(await tarballEntries(b));
    const bin = TARBALL_LAYOUT.binFiles.map((f) => `bin/${f}`);
    for (const path of paths) {
      assert.ok(
        bin.includes(path) || TARBALL_LAYOUT.dirs.some((d) => path.startsWith(`${d}/`)),
        `${path} lies outside the layout`,
      );
    }
    assert.ok(paths.includes(TARBALL_LAYOUT.versionFile));
    assert.deepEqual(bin.filter((p) => paths.includes(p)), bin, "every program file");
    assert.equal(TARBALL_PREFIX, "/usr/local");
    // Its reader accepts an archive of exactly these paths (GNU tar, as packaging makes it).
    const top = join(dir, "tree");
    for (const path of paths) {
      await Deno.mkdir(join(top, path, ".."), { recursive: true });
      await Deno.writeTextFile(join(top, path), "x\n");
    }
    const archive = join(dir, "t.tar.gz");
    const tar = await new Deno.Command("tar", {
      args: ["-czf", archive, "--format=gnu", "--owner=0", "--group=0", "-C", top, "--", ...paths],
    }).output();
    assert.ok(tar.success, new TextDecoder().decode(tar.stderr));
    const entries = await readTarball(await Deno.readFile(archive), { maxBytes: 1 << 20 });
    assert.deepEqual(
      entries.filter((e) => e.kind === "file").map((e) => e.path).sort(),
      [...paths].sort(),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
