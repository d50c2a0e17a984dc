import { createHash } from "node:crypto";
import { join } from "node:path";
import { CACHE_DIR } from "./base.ts";
import { LabError } from "./errors.ts";
import { exists, run, tail } from "./_process.ts";
import { makepkgAsNobody, repoAdd, signFile } from "../../packaging/make_package.ts";
import { labKeys, withLabGpg } from "./keys.ts";

/**
 * The lab's pacman repository "noxlab" (mounted at /lab/repo in systemd machines).
 * The cached part, built once with makepkg, holds:
 * - the test package noxlab-hello in two versions: the database offers
 *   TEST_PACKAGE.latest; the older file stays beside it for exact-version installs;
 * - `podman`, a STAND-IN: it installs only a marker file (PODMAN_STAND_IN.marker). The
 *   machines' real podman (and runc, conmon) comes from their Debian image; the stand-in
 *   lets the shipped Arch bundle's `package podman` be installed by a real pacman
 *   from a real repository (scenario substrate).
 * Each lab adds the host's own packages (lab/lib/host_builds.ts) to its copy.
 * Every package carries a detached signature (FILE.sig) by the lab packager key
 * (lab/lib/keys.ts) and the database is signed, as on Arch's mirrors.
 */
export const TEST_PACKAGE = {
  name: "noxlab-hello",
  versions: ["1.0-1", "1.1-1"],
  latest: "1.1-1",
} as const;

/** The lab's stand-in for Arch's podman package (see ensureRepo). */
export const PODMAN_STAND_IN = {
  version: "4.3.1-1",
  marker: "/usr/share/noxlab/podman-stand-in",
} as const;

function podmanPkgbuild(): string {
  const [pkgver, pkgrel] = PODMAN_STAND_IN.version.split("-");
  return `pkgname=podman
pkgver=${pkgver}
pkgrel=${pkgrel}
pkgdesc="nox-mesh-host lab STAND-IN for podman: a marker only; podman itself is the machine image's (Debian)"
arch=(any)
license=(MIT)
options=(!strip)
package() {
  mkdir -p "$pkgdir${PODMAN_STAND_IN.marker.replace(/\/[^/]+$/, "")}"
  printf 'lab stand-in for podman %s: podman itself comes with the machine image\\n' \
    "$pkgver-$pkgrel" > "$pkgdir${PODMAN_STAND_IN.marker}"
}
`;
}

/** The repository's name (its database is `<name>.db.tar.gz`). */
export const REPO_NAME = "noxlab";

function helloPkgbuild(version: string): string {
  const [pkgver, pkgrel] = version.split("-");
  return `pkgname=${TEST_PACKAGE.name}
pkgver=${pkgver}
pkgrel=${pkgrel}
pkgdesc="nox-mesh-host lab test package"
arch=(any)
license=(MIT)
options=(!strip)
package() {
  mkdir -p "$pkgdir/usr/bin"
  printf '#!/bin/sh\\necho "noxlab-hello %s"\\n' "$pkgver-$pkgrel" > "$pkgdir/usr/bin/noxlab-hello"
  chmod 0755 "$pkgdir/usr/bin/noxlab-hello"
}
`;
}

/**
 * Builds the repository once (cached by recipe) and returns its directory. It offers no
 * `deno`: the host's Arch package carries its own runtime and depends on none.
 */
export async function ensureRepo(log: (line: string) => void = () => {}): Promise<string> {
  const keys = await labKeys(log);
  const recipe = [
    ...TEST_PACKAGE.versions.map(helloPkgbuild),
    podmanPkgbuild(),
    `signed by ${keys.fingerprint}`,
  ].join("\n");
  const key = `repo-${createHash("sha256").update(recipe).digest("hex").slice(0, 16)}`;
  const dir = join(CACHE_DIR, key);
  const db = join(dir, `${REPO_NAME}.db.tar.gz`);
  if (await exists(db)) return dir;
  await Deno.mkdir(CACHE_DIR, { recursive: true });
  const lock = await Deno.open(join(CACHE_DIR, `${key}.lock`), { create: true, write: true });
  try {
    await lock.lock(true);
    if (await exists(db)) return dir;
    log(
      `building the lab pacman repository ${key} with makepkg (noxlab-hello, the podman stand-in)`,
    );
    const work = await Deno.makeTempDir({ prefix: "noxlab-repo-" });
    try {
      await Deno.chmod(work, 0o777);
      const out = join(work, "out");
      await Deno.mkdir(out, { mode: 0o777 });
      await Deno.chmod(out, 0o777);
      for (const version of TEST_PACKAGE.versions) {
        await makepkg(work, out, `hello-${version}`, helloPkgbuild(version), ".pkg.tar.gz");
      }
      await makepkg(work, out, "podman", podmanPkgbuild(), ".pkg.tar.gz");
      // repo-add keeps one entry per name, the last file given: sorted, so that it is the
      // latest version's (readDir's order is the file system's, which differs by machine: a
      // fresh Debian root's put 1.0-1 last).
      const files = [...Deno.readDirSync(out)].map((e) => join(out, e.name))
        .filter((f) => /\.pkg\.tar(\.gz)?$/.test(f)).sort();
      await withLabGpg(keys, async (signer) => {
        for (const file of files) await signFile(file, signer);
        await repoAdd(join(out, `${REPO_NAME}.db.tar.gz`), files, signer);
      });
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      await run(["cp", "-r", out, dir], { what: "store the lab repository" });
    } finally {
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
    return dir;
  } finally {
    lock.close();
  }
}

/**
 * Copies the cached repository into `target` (a lab's share): package files as hard
 * links where the file system allows, the database as copies,
 * since repo-add rewrites them when a lab adds its own packages.
 */
export async function copyRepo(cached: string, target: string): Promise<void> {
  await Deno.mkdir(target, { recursive: true });
  for (const entry of Deno.readDirSync(cached)) {
    const from = join(cached, entry.name);
    const to = join(target, entry.name);
    if (entry.isSymlink) {
      await Deno.symlink(await Deno.readLink(from), to);
    } else if (/\.pkg\.tar(\.\w+)?$/.test(entry.name)) {
      await Deno.link(from, to).catch(() => Deno.copyFile(from, to));
    } else {
      await Deno.copyFile(from, to);
    }
  }
}

/**
 * Adds package files (already in `repoDir`, each with its .sig beside it) to the
 * repository's database and signs the database again.
 */
export async function addToRepo(repoDir: string, files: readonly string[]): Promise<void> {
  await withLabGpg(
    await labKeys(),
    (signer) => repoAdd(join(repoDir, `${REPO_NAME}.db.tar.gz`), files, signer),
  );
}

async function makepkg(
  work: string,
  out: string,
  name: string,
  pkgbuild: string,
  pkgext: string,
): Promise<void> {
  const build = join(work, name);
  await Deno.mkdir(build, { mode: 0o777 });
  await Deno.chmod(build, 0o777);
  await Deno.writeTextFile(join(build, "PKGBUILD"), pkgbuild);
  try {
    await makepkgAsNobody(build, out, {
      env: { PKGEXT: pkgext },
      args: ["--nodeps", "--noconfirm"],
    });
  } catch (error) {
    throw new LabError(
      "base-build-failed",
      `makepkg of the lab package ${name} failed; is makepkg installed (sh lab/setup.sh)?\n${
        tail((error as Error).message)
      }`,
    );
  }
}
