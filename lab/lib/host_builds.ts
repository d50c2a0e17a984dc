/**
 * The host as its real packages, built from this checkout by packaging/ (the
 * code behind `deno task package arch|tarball`), in the bundled form (no denort
 * here). Cached under the lab cache by a hash of every source they are made
 * from, so a warm run builds nothing and a changed checkout rebuilds.
 *
 * Builds:
 * - `current`: this checkout's VERSION (what machines install);
 * - `next`: the same code stamped with a higher version (an upgrade);
 * - `broken`: a higher version whose program crashes on start (a bad upgrade),
 *   made from lab/lib/clients/broken_host.ts with the same permission set.
 */
import { createHash } from "node:crypto";
import { join, relative } from "node:path";
import { build } from "../../packaging/build.ts";
import { packageArch, packageTarball } from "../../packaging/package.ts";
import { VERSION } from "../../src/version.ts";
import { CACHE_DIR } from "./base.ts";
import { CHECKOUT } from "./bundle.ts";
import { exists } from "./_run.ts";
import { labKeys, labMinisign, withLabGpg } from "./keys.ts";

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
    for (const s of [...SOURCES, BROKEN_ENTRY]) await walk(join(CHECKOUT, s));
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

/**
 * The Arch package file of a build (nox-mesh-host-<version>-1-any.pkg.tar.gz), signed by
 * the lab packager key (FILE.sig beside it).
 */
export function hostPackage(which: HostBuild, log: (line: string) => void): Promise<string> {
  return cached(`arch-${which}`, async (dir) => {
    const b = await build({
      os: "arch",
      form: "bundled",
      out: join(dir, "build"),
      version: HOST_VERSIONS[which],
      ...(which === "broken" ? { entry: join(CHECKOUT, BROKEN_ENTRY) } : {}),
    });
    const keys = await labKeys(log);
    return await withLabGpg(keys, (sign) => packageArch(b, 1, { sign }));
  }, log);
}

/**
 * The tarball of a build (the current one by default); SHA256SUMS, its minisign signature
 * SHA256SUMS.minisig (the lab release key) and that key's minisign.pub lie beside it.
 */
export function hostTarball(
  log: (line: string) => void,
  which: HostBuild = "current",
): Promise<string> {
  return cached(`tarball-${which}`, async (dir) => {
    const b = await build({
      os: "tarball",
      form: "bundled",
      out: join(dir, "build"),
      version: HOST_VERSIONS[which],
      runtimeCache: join(CACHE_DIR, "runtime"),
      ...(which === "broken" ? { entry: join(CHECKOUT, BROKEN_ENTRY) } : {}),
    });
    return await packageTarball(b, undefined, { minisign: labMinisign(await labKeys(log)) });
  }, log);
}
