/**
 * apk (Alpine Linux): the package verbs on apk's command line, written from
 * apk-tools' documented CLI (apk-info(8), apk-add(8), apk-world(5),
 * apk-package(5)). Never removes a package (no `apk del`).
 *
 * World file semantics: `apk add NAME` puts NAME in /etc/apk/world, and
 * `apk add NAME=VERSION` pins it there at that version, so a later
 * `apk upgrade` keeps the declared version. A package no longer declared is
 * forgotten: its world entry stays as the host left it.
 */
import {
  type InstalledPackage,
  type PackageManager,
  PackageNotFoundError,
} from "../../src/ports.ts";
import { escapeRegExp, type FileSearch, findPackageFile, whereNot } from "../_package_files.ts";
import { mustRun, programFailed, refuseOption, runProgram, type RunVia } from "../_run.ts";

/** Where apk works; every field is optional and maps to one apk option. */
export interface ApkOptions {
  /** The program (default "apk"). */
  program?: string;
  /** --root DIR */
  root?: string;
  /** --repositories-file FILE */
  repositoriesFile?: string;
  /** --keys-dir DIR */
  keysDir?: string;
  /** --cache-dir DIR */
  cacheDir?: string;
  /**
   * Directories searched for `<name>-<version>.apk` (or the cache's
   * `<name>-<version>.<hash>.apk`) when no repository offers the declared version
   * (default: /etc/apk/cache, apk's cache).
   */
  fileDirs?: readonly string[];
  /** Extra environment, and an argv prefix to run the tool elsewhere (tests: a lab machine). */
  env?: Record<string, string>;
  via?: readonly string[];
}

/** The apk adapter: {@link PackageManager} plus its argv builder (for tests). */
export interface Apk extends PackageManager {
  argv(...args: string[]): string[];
}

/**
 * Create the apk adapter.
 *
 * @example
 * ```ts
 * const apk = alpineApk();
 * await apk.install("wireguard-tools", "1.0.20210914-r4");
 * ```
 */
export function alpineApk(options: ApkOptions = {}): Apk {
  const run: RunVia = { env: options.env, via: options.via };
  const argv = (...args: string[]) => [...apkGlobals(options), ...args];
  const fileDirs = options.fileDirs ?? [options.cacheDir ?? "/etc/apk/cache"];
  return {
    name: "apk",
    argv,

    async installed(name: string): Promise<InstalledPackage | null> {
      refuseOption("package name", name);
      // -e prints the name of each installed package; with -v, "name-version".
      const result = await runProgram(argv("-v", "info", "-e", name), run);
      if (result.code === 0) return parseApkInfoExists(result.stdout, name);
      if (result.code === 1 && result.stdout.trim() === "") return null;
      throw programFailed(result);
    },

    async install(name: string, version?: string): Promise<void> {
      refuseOption("package name", name);
      const target = version === undefined ? name : `${name}=${version}`;
      const result = await runProgram(argv("add", "--no-progress", target), run);
      if (result.code === 0) return;
      if (!isApkNotFound(result.stderr + result.stdout)) throw programFailed(result);
      let search: FileSearch | undefined;
      if (version !== undefined) {
        search = await findPackageFile(fileDirs, name, version, APK_FILE);
        if (search.file) {
          await mustRun(argv("add", "--no-progress", search.file), run);
          return;
        }
      }
      throw new PackageNotFoundError(
        `apk: no configured repository offers ${target}` +
          (search ? `, and ${whereNot(fileDirs, search)}` : ""),
        "check the name and version, /etc/apk/repositories, or place the package file in one " +
          "of those directories",
      );
    },

    // Refreshing the indexes alone is safe on Alpine: `apk add` resolves against
    // them and upgrades what the new package needs.
    async refresh(): Promise<void> {
      await mustRun(argv("update", "--no-progress"), run);
    },

    async upgradeAll(): Promise<void> {
      await mustRun(argv("upgrade", "--update-cache", "--no-progress"), run);
    },
  };
}

/** The options apk is given before the applet. */
export function apkGlobals(options: ApkOptions): string[] {
  const pairs: [string, string | undefined][] = [
    ["--root", options.root],
    ["--repositories-file", options.repositoriesFile],
    ["--keys-dir", options.keysDir],
    ["--cache-dir", options.cacheDir],
  ];
  return [
    options.program ?? "apk",
    ...pairs.flatMap(([flag, value]) => (value === undefined ? [] : [flag, value])),
  ];
}

/**
 * Split apk's "name-version" at the last "-" followed by a digit (apk-package(5)).
 *
 * @example
 * ```ts
 * splitNameVersion("py3-foo-2-1.2.3-r0"); // { name: "py3-foo-2", version: "1.2.3-r0" }
 * ```
 */
export function splitNameVersion(text: string): InstalledPackage | null {
  const line = text.trim();
  let split = -1;
  for (const match of line.matchAll(/-\d/g)) split = match.index;
  if (split <= 0) return null;
  return { name: line.slice(0, split), version: line.slice(split + 1) };
}

/** Parse `apk -v info -e NAME` output ("name-version" per installed package). */
export function parseApkInfoExists(stdout: string, name: string): InstalledPackage | null {
  for (const line of stdout.split("\n")) {
    const found = splitNameVersion(line);
    if (found?.name === name) return found;
  }
  return null;
}

/** Whether apk's output says the solver found no package (or no such version) to select. */
export function isApkNotFound(output: string): boolean {
  return /unable to select packages/i.test(output) || /\(no such package\)/i.test(output);
}

/** apk package files: <name>-<version>.apk, or in the cache <name>-<version>.<hash>.apk. */
const APK_FILE = (name: string, version: string) =>
  new RegExp(`^${escapeRegExp(name)}-${escapeRegExp(version)}(\\.[0-9a-f]+)?\\.apk$`);
