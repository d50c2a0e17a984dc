/**
 * pacman (Arch Linux and derivatives): the package verbs on pacman's command
 * line. Never removes a package (no -R anywhere) and never refreshes the sync
 * database alone (no -Sy without -u: a partial upgrade). Every location pacman uses
 * can be moved, so tests run a real pacman against an isolated root.
 */
import {
  type InstalledPackage,
  type PackageManager,
  PackageNotFoundError,
} from "../../src/providers.ts";
import { escapeRegExp, type FileSearch, findPackageFile, whereNot } from "../_package_files.ts";
import { mustRun, programFailed, refuseOption, runProgram, type RunVia } from "../_run.ts";

/** Where pacman works; every field is optional and maps to one pacman option. */
export interface PacmanOptions {
  /** The program (default "pacman"). */
  program?: string;
  /** --config FILE */
  config?: string;
  /** --root DIR (installation root) */
  root?: string;
  /** --dbpath DIR */
  dbPath?: string;
  /** --cachedir DIR (also searched for package files). */
  cacheDir?: string;
  /** --logfile FILE */
  logFile?: string;
  /** --gpgdir DIR */
  gpgDir?: string;
  /** --hookdir DIR */
  hookDir?: string;
  /**
   * Directories searched for `<name>-<version>-<arch>.pkg.tar*` when a declared
   * version is in no repository (default: pacman's cache, /var/cache/pacman/pkg).
   */
  fileDirs?: readonly string[];
  /** Extra environment, and an argv prefix to run the tool elsewhere (tests: a lab machine). */
  env?: Record<string, string>;
  via?: readonly string[];
}

/** The pacman adapter: {@link PackageManager} plus installing a given package file. */
export interface Pacman extends PackageManager {
  /** Install (or up/downgrade to) exactly this package file: `pacman -U`. */
  installFile(path: string): Promise<void>;
  /** The argv of a pacman run with this adapter's locations. */
  argv(...args: string[]): string[];
}

const QUIET = ["--noconfirm", "--noprogressbar"];

/**
 * Create the pacman adapter.
 *
 * @example
 * ```ts
 * const pacman = archPacman({ root: "/tmp/r", dbPath: "/tmp/r/var/lib/pacman" });
 * await pacman.installed("bash"); // { name: "bash", version: "5.2.026-2" } or null
 * ```
 */
export function archPacman(options: PacmanOptions = {}): Pacman {
  const run: RunVia = { env: options.env, via: options.via };
  const argv = (...args: string[]) => [...pacmanGlobals(options), ...args];
  const fileDirs = options.fileDirs ??
    [options.cacheDir ?? "/var/cache/pacman/pkg"];

  async function installFile(path: string): Promise<void> {
    await mustRun(argv("-U", "--needed", ...QUIET, "--", path), run);
  }

  return {
    name: "pacman",
    argv,
    installFile,

    async installed(name: string): Promise<InstalledPackage | null> {
      refuseOption("package name", name);
      const result = await runProgram(argv("-Q", "--", name), run);
      if (result.code === 0) return parsePacmanQuery(result.stdout, name);
      if (result.code === 1 && /package '.*' was not found/.test(result.stderr)) return null;
      throw programFailed(result);
    },

    async install(name: string, version?: string): Promise<void> {
      refuseOption("package name", name);
      const target = version === undefined ? name : `${name}=${version}`;
      const result = await runProgram(argv("-S", "--needed", ...QUIET, "--", target), run);
      if (result.code === 0) return;
      if (!/target not found/.test(result.stderr)) throw programFailed(result);
      let search: FileSearch | undefined;
      if (version !== undefined) {
        search = await findPackageFile(fileDirs, name, version, PACMAN_FILE);
        if (search.file) return await installFile(search.file);
      }
      throw new PackageNotFoundError(
        `pacman: no configured repository offers ${target}` +
          (search ? `, and ${whereNot(fileDirs, search)}` : "") +
          " (as far as this machine's sync database knows: the host never refreshes it " +
          "alone, since pacman -Sy then -S is a partial upgrade, which Arch does not support)",
        "check the name and version and the repositories in pacman.conf; upgrade the machine " +
          '(pacman -Syu), or declare the package with "upgrade": "full" so the host does; or ' +
          "place the package file in one of those directories",
      );
    },

    // No refresh(): on Arch, refreshing the sync database without upgrading is
    // how partial upgrades start. The only refresh is the full upgrade.
    async upgradeAll(): Promise<void> {
      await mustRun(argv("-Syu", ...QUIET), run);
    },

    // pacman's version is [epoch:]pkgver-pkgrel; the launcher records pkgver.
    upstreamVersion: (version) => version.replace(/-\d+(\.\d+)?$/, ""),
  };
}

/** pacman's package file names: <name>-<pkgver>-<pkgrel>-<arch>.pkg.tar[.<compression>]. */
const PACMAN_FILE = (name: string, version: string) =>
  new RegExp(`^${escapeRegExp(name)}-${escapeRegExp(version)}-[^-/]+\\.pkg\\.tar(\\.[a-z0-9]+)?$`);

/** The options pacman is given before the operation. */
export function pacmanGlobals(options: PacmanOptions): string[] {
  const pairs: [string, string | undefined][] = [
    ["--config", options.config],
    ["--root", options.root],
    ["--dbpath", options.dbPath],
    ["--cachedir", options.cacheDir],
    ["--logfile", options.logFile],
    ["--gpgdir", options.gpgDir],
    ["--hookdir", options.hookDir],
  ];
  return [
    options.program ?? "pacman",
    ...pairs.flatMap(([flag, value]) => (value === undefined ? [] : [flag, value])),
  ];
}

/** Parse `pacman -Q NAME` output ("name version"); `null` if it names another package. */
export function parsePacmanQuery(stdout: string, name: string): InstalledPackage | null {
  for (const line of stdout.split("\n")) {
    const [found, version, ...rest] = line.trim().split(/\s+/);
    if (found === name && version && rest.length === 0) return { name, version };
  }
  return null;
}
