/**
 * The host as its real packages, built from this checkout by packaging/ (the
 * code behind `deno task package arch|tarball|alpine`), in the bundled form (no denort
 * here). Cached under the lab cache by a hash of every source they are made
 * from, so a warm run builds nothing and a changed checkout rebuilds.
 *
 * Builds:
 * - `current`: this checkout's VERSION (what machines install);
 * - `next`: the same code stamped with a higher version (an upgrade);
 * - `broken`: a higher version whose program crashes on start (a bad upgrade),
 *   made from lab/lib/clients/broken_host.ts with the same permission set; its Arch
 *   package carries a runtime file of its own (the pinned deno with a line appended after
 *   its image: it runs the same, and its digest differs), so a rollback shows that the
 *   runtime came back with the package.
 */
import { createHash } from "node:crypto";
import { join, relative } from "node:path";
import { build } from "../../packaging/build.ts";
import {
  ALPINE_ARCHES,
  packageArch,
  packageTarball,
  stageAlpine,
} from "../../packaging/make_package.ts";
import { alpinePackageFiles } from "./alpine_files.ts";
import { packageDebian } from "../../packaging/debian/recipe.ts";
import { VERSION } from "../../src/version.ts";
import { CACHE_DIR, type MachineArch } from "./base.ts";
import { CHECKOUT } from "./bundle.ts";
import { exists } from "./_process.ts";
import { labKeys, labMinisign, withLabGpg } from "./keys.ts";
import { LabError } from "./errors.ts";

/** Which build. */
export type HostBuild = "current" | "next" | "broken";

/** The version each build carries (pacman's pkgver; pkgrel is always 1). */
export const HOST_VERSIONS: Readonly<Record<HostBuild, string>> = {
  current: VERSION,
  next: `${VERSION}.1`,
  broken: `${VERSION}.2`,
};

/** pacman's full version of a build, as `pacman -Q` prints it and a declaration pins it. */
export function pacmanVersion(which: HostBuild): string {
  return `${HOST_VERSIONS[which]}-1`;
}

const SOURCES = ["mod.ts", "deno.json", "deno.lock", "src", "os", "packaging", "launcher"];
const BROKEN_ENTRY = "lab/lib/clients/broken_host.ts";
/** This file: how the builds are made (the broken build's own runtime copy) is part of them. */
const RECIPE = "lab/lib/host_builds.ts";

let sourceKey: Promise<string> | undefined;
const built = new Map<string, Promise<string>>();

/** A hash of every file the host's packages are made from, and of the key that signs them. */
function hashSources(): Promise<string> {
  sourceKey ??= (async () => {
    const hash = createHash("sha256");
    hash.update(`signed by ${(await labKeys()).fingerprint}\0`);
    const files: string[] = [];
    const walk = async (path: string): Promise<void> => {
      const info = await Deno.stat(path);
      if (!info.isDirectory) return void files.push(path);
      for await (const entry of Deno.readDir(path)) await walk(join(path, entry.name));
    };
    for (const s of [...SOURCES, BROKEN_ENTRY, RECIPE]) await walk(join(CHECKOUT, s));
    for (const file of files.sort()) {
      hash.update(relative(CHECKOUT, file)).update("\0").update(await Deno.readFile(file));
    }
    return hash.digest("hex").slice(0, 16);
  })();
  return sourceKey;
}

/** Builds once per source hash (per process and across runs), under a lock. */
async function cached(
  name: string,
  make: (dir: string) => Promise<string>,
  log: (line: string) => void,
): Promise<string> {
  const key = `host-${await hashSources()}`;
  const id = `${key}/${name}`;
  let promise = built.get(id);
  if (!promise) {
    promise = (async () => {
      const dir = join(CACHE_DIR, key, name);
      const done = join(dir, "ready");
      if (await exists(done)) return (await Deno.readTextFile(done)).trim();
      await Deno.mkdir(join(CACHE_DIR, key), { recursive: true });
      const lock = await Deno.open(join(CACHE_DIR, key, `${name}.lock`), {
        create: true,
        write: true,
      });
      try {
        await lock.lock(true);
        if (await exists(done)) return (await Deno.readTextFile(done)).trim();
        log(`building nox-mesh-host ${name} with packaging/ (once for these sources)`);
        await Deno.remove(dir, { recursive: true }).catch(() => {});
        await Deno.mkdir(dir, { recursive: true });
        const file = await make(dir);
        await Deno.writeTextFile(done, `${file}\n`);
        return file;
      } finally {
        lock.close();
      }
    })();
    built.set(id, promise);
    promise.catch(() => built.delete(id));
  }
  return await promise;
}

/** The architecture of the host's Arch packages in the lab (this machine's). */
export const PACKAGE_ARCH: string = Deno.build.arch;

/** The file name of a build's Arch package. */
export function packageFileName(which: HostBuild): string {
  return `nox-mesh-host-${pacmanVersion(which)}-${PACKAGE_ARCH}.pkg.tar.gz`;
}

/** Where an Arch package installs the runtime it carries. */
export const CARRIED_RUNTIME = "/usr/lib/nox-mesh-host/deno";

/**
 * The Arch package file of a build (nox-mesh-host-<version>-1-<arch>.pkg.tar.gz), signed by
 * the lab packager key (FILE.sig beside it).
 */
export function hostPackage(which: HostBuild, log: (line: string) => void): Promise<string> {
  return cached(`arch-${which}`, async (dir) => {
    const b = await build({
      os: "arch",
      form: "bundled",
      out: join(dir, "build"),
      version: HOST_VERSIONS[which],
      runtimeCache: join(CACHE_DIR, "runtime"),
      ...(which === "broken" ? { entry: join(CHECKOUT, BROKEN_ENTRY) } : {}),
    });
    if (which === "broken") await ownRuntimeCopy(join(b.dir, "deno"));
    const keys = await labKeys(log);
    return await withLabGpg(keys, (sign) => packageArch(b, 1, { sign }));
  }, log);
}

/**
 * The Debian package of a build (nox-mesh-host_<version>-1_<arch>.deb; the broken build's
 * carries a runtime file of its own, as its Arch package does). The lab's apt repository
 * signs its indexes (lib/apt_repo.ts), as a Debian repository does; a .deb itself is not.
 */
export function hostDeb(which: HostBuild, log: (line: string) => void): Promise<string> {
  return cached(`debian-${which}`, async (dir) => {
    const b = await build({
      os: "debian",
      form: "bundled",
      out: join(dir, "build"),
      version: HOST_VERSIONS[which],
      runtimeCache: join(CACHE_DIR, "runtime"),
      ...(which === "broken" ? { entry: join(CHECKOUT, BROKEN_ENTRY) } : {}),
    });
    if (which === "broken") await ownRuntimeCopy(join(b.dir, "deno"));
    return await packageDebian(b);
  }, log);
}

/** The file name of a build's Debian package (as apt keeps it in its cache). */
export function debFileName(which: HostBuild): string {
  const arch = Deno.build.arch === "aarch64" ? "arm64" : "amd64";
  return `nox-mesh-host_${HOST_VERSIONS[which]}-1_${arch}.deb`;
}

/**
 * Replaces the build's runtime (a hard link into the runtime cache) with a copy that has a
 * line appended after the ELF image: the same program, another file.
 */
async function ownRuntimeCopy(deno: string): Promise<void> {
  const copy = `${deno}.own`;
  await Deno.copyFile(deno, copy);
  const line = new TextEncoder().encode("\nnoxlab: the broken build's own copy of the runtime\n");
  await Deno.writeFile(copy, line, { append: true });
  await Deno.rename(copy, deno);
}

/** The sha256 (hex) of the runtime a build's Arch (or Debian) package carries, read from it. */
export async function carriedRuntimeDigest(
  which: HostBuild,
  log: (line: string) => void,
  kind: "pacman" | "apt" = "pacman",
): Promise<string> {
  const pkg = kind === "apt" ? await hostDeb(which, log) : await hostPackage(which, log);
  const read = kind === "apt"
    ? 'dpkg-deb --fsys-tarfile "$1" | tar -xOf - "./$2" | sha256sum'
    : 'bsdtar -xOf "$1" "$2" | sha256sum';
  const out = await new Deno.Command("sh", {
    args: ["-c", read, "sh", pkg, CARRIED_RUNTIME.slice(1)],
    stdin: "null",
  }).output();
  const digest = new TextDecoder().decode(out.stdout).split(" ")[0];
  if (!out.success || !/^[0-9a-f]{64}$/.test(digest)) {
    throw new LabError("command-failed", `cannot read ${CARRIED_RUNTIME} from ${pkg}`);
  }
  return digest;
}

/**
 * The tarball of a build (the current one by default; for this machine's architecture, or
 * aarch64 with the arm64 runtime); SHA256SUMS, its minisign signature SHA256SUMS.minisig
 * (the lab release key) and that key's minisign.pub lie beside it.
 */
export function hostTarball(
  log: (line: string) => void,
  which: HostBuild = "current",
  arch: MachineArch = "native",
): Promise<string> {
  const name = arch === "aarch64" ? `tarball-${which}-aarch64` : `tarball-${which}`;
  return cached(name, async (dir) => {
    const b = await build({
      os: "tarball",
      form: "bundled",
      ...(arch === "aarch64" ? { arch: "aarch64" as const } : {}),
      out: join(dir, "build"),
      version: HOST_VERSIONS[which],
      runtimeCache: join(CACHE_DIR, "runtime"),
      ...(which === "broken" ? { entry: join(CHECKOUT, BROKEN_ENTRY) } : {}),
    });
    return await packageTarball(b, undefined, { minisign: labMinisign(await labKeys(log)) });
  }, log);
}

/**
 * The files the Alpine package of the current build installs (every subpackage's too), for
 * this machine's architecture: the package staged for both architectures by packaging/
 * (`deno task package alpine`), then its APKBUILD's build() and package() run as abuild runs
 * them (lib/alpine_files.ts). Returns the directory holding them as an Alpine root would.
 */
export function hostAlpineFiles(log: (line: string) => void): Promise<string> {
  return cached("alpine-files-current", async (dir) => {
    const builds = [];
    for (const arch of ALPINE_ARCHES) {
      builds.push(
        await build({
          os: "alpine",
          form: "bundled",
          arch,
          out: join(dir, `build-${arch}`),
          runtimeCache: join(CACHE_DIR, "runtime"),
        }),
      );
    }
    const staged = await stageAlpine(builds);
    const arch = Deno.build.arch === "aarch64" ? "aarch64" : "x86_64";
    return await alpinePackageFiles(staged, arch, join(dir, "root"));
  }, log);
}
