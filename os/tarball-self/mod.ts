/**
 * The host's own package on a tarball installation (DESIGN.md §12): there is no package
 * manager for the host itself, so it is its own. `installed("nox-mesh-host")` reads the
 * VERSION file the tarball ships (lib/nox-mesh-host/VERSION), or the version staged for
 * the launcher; `install(name, version, file)` takes the tarball a declaration names by
 * digest, checks its digest and size, reads it strictly (./_ustar.ts) and STAGES it in
 * the state directory (./_stage.ts). The host never writes its own installation (the
 * permission set denies it): the launcher unpacks the stage before it next starts the
 * host. Only the tarball build carries it (./provider.ts); every other
 * package goes to the machine's own manager.
 */
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
import { readRolledBackFrom, ROLLED_BACK_FROM_FILE } from "../../src/launcher_files.ts";
import { notOwn } from "../_own_package.ts";
import { readTarball, TarballRefused } from "./_ustar.ts";
import { dropStage, readRecord, REFUSED_RECORD, stage, STAGE_DIR, stagedIn } from "./_stage.ts";
import { TARBALL_LAYOUT, TARBALL_PREFIX } from "../tarball_layout.ts";

export { REFUSED_RECORD, STAGE_DIR, STAGE_RECORD, STAGE_TARBALL } from "./_stage.ts";

/** Options of {@link tarballSelf}. */
export interface TarballSelfOptions {
  /** Where the tarball was unpacked (`tar -xz -C PREFIX`). Default /usr/local. */
  prefix?: string;
  /**
   * The version to report when the installation has no VERSION file (a tarball older
   * than the file): the running program's. Default: this program's VERSION.
   */
  runningVersion?: string;
  /** The host's state directory, where an upgrade is staged. Default /var/lib/mesh-host. */
  stateDir?: string;
}

/** The version file the tarball ships, relative to its prefix. */
export const VERSION_FILE: string = TARBALL_LAYOUT.versionFile;

const VERSION_TEXT = /^[A-Za-z0-9][A-Za-z0-9._:+~-]{0,63}$/;

/**
 * The tarball "package manager" of the host itself.
 *
 * @example
 * ```ts
 * const self = tarballSelf({ prefix: "/usr/local" });
 * await self.installed("nox-mesh-host"); // { name: "nox-mesh-host", version: "0.1.0" }
 * ```
 *
 * Long because: a provider is one object of verbs over the tarball's own install; each verb is
 * short.
 */
export function tarballSelf(
  { prefix = TARBALL_PREFIX, runningVersion = VERSION, stateDir = "/var/lib/mesh-host" }:
    TarballSelfOptions = {},
): PackageManager {
  /** What the installation's files say (the launcher has not applied a stage yet). */
  async function unpacked(name: string): Promise<InstalledPackage | null> {
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
  }

  return {
    name: "tarball",

    async installed(name: string): Promise<InstalledPackage | null> {
      if (name !== PROGRAM) notOwn(name);
      const staged = await stagedIn(stateDir);
      if (staged === null) return await unpacked(name);
      return {
        name,
        version: staged.version,
        pending: `${PROGRAM} ${staged.version} is staged in ${
          posix.join(stateDir, STAGE_DIR)
        } and takes effect when the launcher next starts the host`,
      };
    },

    // Long because: an install's steps in order (the version already there, the checksum, unpack,
    // stage), each refusing with its reason; none may be skipped.
    async install(name: string, version?: string, file?: PackageFile): Promise<void> {
      if (name !== PROGRAM) notOwn(name);
      // The installed version declared again: a stage of another one is stale.
      if (version !== undefined && (await unpacked(name))?.version === version) {
        await dropStage(stateDir);
        return;
      }
      if (version === undefined || file === undefined) {
        throw new PackageNotFoundError(
          `${PROGRAM} on a tarball installation has no repository to install it from`,
          "declare the next version's tarball by digest: version, contentSha256 and size " +
            "(deno task mesh put FILE prints the digest)",
        );
      }
      // A version the launcher rolled back from crashed here: staging it again would undo
      // the rollback in a loop (the package kind refuses it first; this adapter trusts no
      // caller for it). A person removes its line from rolled-back-from to allow it.
      if ((await readRolledBackFrom(stateDir)).has(version)) {
        const record = posix.join(stateDir, ROLLED_BACK_FROM_FILE);
        throw new HostError(
          "package.rolled-back",
          `${PROGRAM} ${version} failed to start on this machine and the launcher rolled it ` +
            `back (${record} lists it): not staged again`,
          {
            hint: `declare a fixed version; to try this one again, remove its line from ${record}`,
          },
        );
      }
      // What the launcher refused once is never staged again (no loop): a person decides.
      const refusedAt = posix.join(stateDir, REFUSED_RECORD);
      const refused = await readRecord(refusedAt);
      if (refused?.sha256 === file.sha256) {
        throw new HostError(
          "package.upgrade-refused",
          `the launcher refused the staged tarball of ${PROGRAM} ${refused.version} (sha256 ` +
            `${file.sha256}): ${refused.reason ?? "no reason recorded"}`,
          {
            hint: `declare another tarball; to stage this one again, remove ${refusedAt}`,
          },
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
      // Verified, all of it, before anything is written; the launcher unpacks it.
      await stage(stateDir, bytes, { sha256: file.sha256, version });
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
