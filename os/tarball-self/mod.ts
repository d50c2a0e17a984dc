/**
 * The host's own package on a tarball installation (DESIGN.md §12): there is no package
 * manager for the host itself, so it is its own. `installed("nox-mesh-host")` reads the
 * VERSION file the tarball ships (lib/nox-mesh-host/VERSION); `install(name, version,
 * file)` takes the tarball a declaration names by digest, checks its digest and size,
 * reads it strictly (./_ustar.ts), writes it beside the running installation and
 * switches to it by renames. Only the tarball build carries it
 * (packaging/tarball/adapters.ts); every other package goes to the machine's own manager.
 */
import { constants, fchmodSync, fchownSync } from "node:fs";
import { open } from "node:fs/promises";
import { posix } from "node:path";
import { sha256Hex } from "../../src/declaration/canonical.ts";
import { HostError } from "../../src/errors.ts";
import {
  type InstalledPackage,
  type PackageFile,
  type PackageManager,
  PackageNotFoundError,
} from "../../src/providers.ts";
import { PROGRAM, VERSION } from "../../src/version.ts";
import { LAYOUT, readTarball, TarballRefused, type TarEntry } from "./_ustar.ts";

/** Options of {@link tarballSelf}. */
export interface TarballSelfOptions {
  /** Where the tarball was unpacked (`tar -xz -C PREFIX`). Default /usr/local. */
  prefix?: string;
  /**
   * The version to report when the installation has no VERSION file (a tarball older
   * than the file): the running program's. Default: this program's VERSION.
   */
  runningVersion?: string;
}

/** The version file the tarball ships, relative to its prefix. */
export const VERSION_FILE = "lib/nox-mesh-host/VERSION";

const VERSION_TEXT = /^[A-Za-z0-9][A-Za-z0-9._:+~-]{0,63}$/;

function notOwn(name: string): never {
  throw new HostError(
    "package.no-manager",
    `package "${name}": this machine's package manager is not one this build carries; the ` +
      `tarball installs only ${PROGRAM} itself`,
    { hint: "install it by other means, or run a build of the host for this OS" },
  );
}

/** A directory synced, so the renames in it are durable. */
async function syncDirectory(path: string): Promise<void> {
  const dir = await open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/** A new file (never through a link: O_EXCL|O_NOFOLLOW), owned 0:0 with `mode`, synced. */
async function writeNew(path: string, data: Uint8Array, mode: number): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const file = await open(path, flags, 0o600);
  try {
    let done = 0;
    while (done < data.length) done += (await file.write(data, done)).bytesWritten;
    // Owner and mode on the open descriptor (fchown, fchmod), never by name.
    fchownSync(file.fd, 0, 0);
    fchmodSync(file.fd, mode);
    await file.sync();
  } finally {
    await file.close();
  }
}

/** A new directory (mkdir refuses an existing name or link), 0755 on its descriptor. */
async function makeDirectory(path: string): Promise<void> {
  await Deno.mkdir(path, { mode: 0o700 });
  const dir = await open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    fchownSync(dir.fd, 0, 0);
    fchmodSync(dir.fd, 0o755);
  } finally {
    await dir.close();
  }
}

async function removeIfThere(path: string): Promise<void> {
  await Deno.remove(path, { recursive: true }).catch((error) => {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  });
}

/** The staged name beside each place the tarball fills. */
function staged(place: string): string {
  return place.startsWith("bin/") ? `bin/.${place.slice(4)}.new` : `${place}.new`;
}

/**
 * Write the entries beside the running installation: each layout directory as
 * `DIR.new/`, each bin file as `bin/.NAME.new`. Stale staging is removed first.
 */
async function stage(prefix: string, entries: TarEntry[]): Promise<string[]> {
  const places = [
    ...LAYOUT.dirs,
    ...LAYOUT.binFiles.map((f) => `bin/${f}`),
  ].filter((place) => entries.some((e) => e.path === place || e.path.startsWith(`${place}/`)));
  for (const place of places) await removeIfThere(posix.join(prefix, staged(place)));
  for (const dir of ["bin", "lib", "share"]) {
    await Deno.mkdir(posix.join(prefix, dir), { recursive: true, mode: 0o755 });
  }
  for (const dir of LAYOUT.dirs.filter((d) => places.includes(d))) {
    await makeDirectory(posix.join(prefix, staged(dir)));
  }
  const made = new Set<string>(LAYOUT.dirs);
  const sorted = [...entries].sort((a, b) => a.path.localeCompare(b.path));
  for (const entry of sorted) {
    const top = LAYOUT.dirs.find((d) => entry.path === d || entry.path.startsWith(`${d}/`));
    if (top === undefined) {
      await writeNew(posix.join(prefix, staged(entry.path)), entry.data, entry.mode);
      continue;
    }
    const inside = entry.path.slice(top.length + 1);
    const parts = entry.kind === "directory" ? inside.split("/") : inside.split("/").slice(0, -1);
    for (let i = 1; i <= parts.length && parts[0] !== ""; i++) {
      const dir = `${top}/${parts.slice(0, i).join("/")}`;
      if (made.has(dir)) continue;
      await makeDirectory(posix.join(prefix, staged(top), parts.slice(0, i).join("/")));
      made.add(dir);
    }
    if (entry.kind === "file") {
      await writeNew(posix.join(prefix, staged(top), inside), entry.data, entry.mode);
    }
  }
  return places;
}

/**
 * Switch to the staged files, each place by rename(2) in its own directory: a bin file is
 * replaced atomically (a reader sees the old or the new file); a directory is renamed
 * away to `DIR.old` and the staged one into its place (two renames: for that moment the
 * directory is absent, and a crash there leaves the launcher's rollback to restore it).
 * share/ first, then lib/ (the runtime and bundle the run loop watches), then bin/.
 */
async function swap(prefix: string, places: string[]): Promise<void> {
  const order = [...places].sort((a, b) => rank(a) - rank(b));
  for (const place of order) {
    const target = posix.join(prefix, place);
    const next = posix.join(prefix, staged(place));
    if (place.startsWith("bin/")) {
      await Deno.rename(next, target);
      continue;
    }
    const old = `${target}.old`;
    await removeIfThere(old);
    const present = await Deno.lstat(target).then(() => true, () => false);
    if (present) await Deno.rename(target, old);
    await Deno.rename(next, target);
    await removeIfThere(old);
  }
  for (const dir of ["share", "lib", "bin"]) await syncDirectory(posix.join(prefix, dir));
}

function rank(place: string): number {
  return place.startsWith("share/") ? 0 : place.startsWith("lib/") ? 1 : 2;
}

/**
 * The tarball "package manager" of the host itself.
 *
 * @example
 * ```ts
 * const self = tarballSelf({ prefix: "/usr/local" });
 * await self.installed("nox-mesh-host"); // { name: "nox-mesh-host", version: "0.1.0" }
 * ```
 */
export function tarballSelf(
  { prefix = "/usr/local", runningVersion = VERSION }: TarballSelfOptions = {},
): PackageManager {
  return {
    name: "tarball",

    async installed(name: string): Promise<InstalledPackage | null> {
      if (name !== PROGRAM) notOwn(name);
      let text: string;
      try {
        text = (await Deno.readTextFile(posix.join(prefix, VERSION_FILE))).trim();
      } catch (error) {
        if (!(error instanceof Deno.errors.NotFound)) throw error;
        // A tarball older than the VERSION file: the program there is the one running.
        const program = await Deno.lstat(posix.join(prefix, "bin", PROGRAM)).catch(() => null);
        return program === null ? null : { name, version: runningVersion };
      }
      if (!VERSION_TEXT.test(text)) {
        throw new HostError(
          "package.unreadable",
          `${posix.join(prefix, VERSION_FILE)} holds ${
            JSON.stringify(text.slice(0, 80))
          }, not a version`,
          { hint: "unpack the tarball of the version you run again (tar -xz -C /usr/local)" },
        );
      }
      return { name, version: text };
    },

    async install(name: string, version?: string, file?: PackageFile): Promise<void> {
      if (name !== PROGRAM) notOwn(name);
      if (version === undefined || file === undefined) {
        throw new PackageNotFoundError(
          `${PROGRAM} on a tarball installation has no repository to install it from`,
          "declare the next version's tarball by digest: version, contentSha256 and size " +
            "(deno task mesh put FILE prints the digest)",
        );
      }
      const bytes = await file.bytes();
      // The content sources verified them already; this adapter trusts no caller for it.
      const digest = bytes.length === file.size ? await sha256Hex(bytes) : undefined;
      if (digest !== file.sha256) {
        throw new TarballRefused(
          `its bytes are not the declared ones (${
            digest === undefined ? `${bytes.length} bytes, not ${file.size}` : `sha256 ${digest}`
          }; declared sha256 ${file.sha256})`,
        );
      }
      const entries = await readTarball(bytes);
      const stamp = entries.find((e) => e.path === VERSION_FILE && e.kind === "file");
      const says = stamp ? new TextDecoder().decode(stamp.data).trim() : undefined;
      if (says !== version) {
        throw new TarballRefused(
          `it is declared as ${PROGRAM} ${version} and its ${VERSION_FILE} says ${
            says === undefined ? "nothing (it has none)" : JSON.stringify(says)
          }`,
        );
      }
      if (!entries.some((e) => e.path === `bin/${PROGRAM}` && e.kind === "file")) {
        throw new TarballRefused(`it has no bin/${PROGRAM}`);
      }
      const places = await stage(prefix, entries);
      await swap(prefix, places);
    },

    upgradeAll(): Promise<void> {
      return Promise.reject(
        new HostError(
          "package.no-manager",
          'upgrade: "full" needs the machine\'s package manager; the tarball installs only ' +
            `${PROGRAM} itself`,
          { hint: 'remove upgrade: "full" from the host\'s package resource' },
        ),
      );
    },

    upstreamVersion: (version: string) => version,
  };
}
