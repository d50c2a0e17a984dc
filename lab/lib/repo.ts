import { createHash } from "node:crypto";
import { join } from "node:path";
import { CACHE_DIR } from "./base.ts";
import { LabError } from "./errors.ts";
import { exists, run, tail } from "./_run.ts";

/**
 * The lab's pacman repository "noxlab" (mounted at /lab/repo in systemd machines).
 * Until the packaging issue lands it holds a test package, noxlab-hello, in two
 * versions: the database offers TEST_PACKAGE.latest; the older file stays beside it
 * for exact-version installs (`pacman -U /lab/repo/<file>`).
 */
export const TEST_PACKAGE = {
  name: "noxlab-hello",
  versions: ["1.0-1", "1.1-1"],
  latest: "1.1-1",
} as const;

function pkgbuild(version: string): string {
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

/** Builds the repository once (cached by recipe) and returns its directory. */
export async function ensureRepo(log: (line: string) => void = () => {}): Promise<string> {
  const recipe = TEST_PACKAGE.versions.map(pkgbuild).join("\n");
  const key = `repo-${createHash("sha256").update(recipe).digest("hex").slice(0, 16)}`;
  const dir = join(CACHE_DIR, key);
  if (await exists(join(dir, "noxlab.db.tar.gz"))) return dir;
  await Deno.mkdir(CACHE_DIR, { recursive: true });
  const lock = await Deno.open(join(CACHE_DIR, `${key}.lock`), { create: true, write: true });
  try {
    await lock.lock(true);
    if (await exists(join(dir, "noxlab.db.tar.gz"))) return dir;
    log(`building the lab pacman repository ${key} with makepkg`);
    const work = await Deno.makeTempDir({ prefix: "noxlab-repo-" });
    try {
      await Deno.chmod(work, 0o777);
      const out = join(work, "out");
      await Deno.mkdir(out, { mode: 0o777 });
      await Deno.chmod(out, 0o777);
      for (const version of TEST_PACKAGE.versions) await makepkg(work, out, version);
      const files = TEST_PACKAGE.versions.map((v) =>
        join(out, `${TEST_PACKAGE.name}-${v}-any.pkg.tar.gz`)
      );
      await run(["repo-add", "-q", join(out, "noxlab.db.tar.gz"), ...files], {
        what: "repo-add",
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

async function makepkg(work: string, out: string, version: string): Promise<void> {
  const build = join(work, version);
  await Deno.mkdir(build, { mode: 0o777 });
  await Deno.chmod(build, 0o777);
  await Deno.writeTextFile(join(build, "PKGBUILD"), pkgbuild(version));
  // makepkg refuses root: build as nobody.
  const r = await run([
    "setpriv",
    "--reuid=nobody",
    "--regid=nogroup",
    "--clear-groups",
    "env",
    `HOME=${build}`,
    `PKGDEST=${out}`,
    "PKGEXT=.pkg.tar.gz",
    "sh",
    "-c",
    'cd "$1" && makepkg -f --nodeps --noconfirm',
    "lab-makepkg",
    build,
  ], { check: false, what: "makepkg" });
  if (r.code !== 0) {
    throw new LabError(
      "base-build-failed",
      `makepkg of the lab test package ${version} failed (exit ${r.code}); is makepkg ` +
        `installed (sh lab/setup.sh)?\n${tail(r.stderr + r.stdout)}`,
    );
  }
}
