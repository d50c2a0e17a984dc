/**
 * apk (Alpine Linux): the package verbs on apk's command line. The command
 * lines and the outputs parsed here were checked against a real apk-tools
 * 2.14.10 (tests/fixtures/apk/). Never removes a package (no `apk del`).
 *
 * Versions: apk's `NAME=VERSION` selects one exact build, so a declared version
 * is the full apk version with its build number (`0.2.0-r1`); one without
 * `-rN` is refused, naming the builds the repositories offer.
 *
 * Provided names (`cmd:x`, `so:libx.so.1`, virtual names): `apk info -e`
 * answers with the package that provides the name; {@link Apk.installed}
 * returns that package, so such a declaration is satisfied once a provider is
 * installed. A version cannot be declared for a provided name.
 *
 * World file semantics: `apk add NAME` puts NAME in /etc/apk/world, and
 * `apk add NAME=VERSION` pins it there at that version, so a later
 * `apk upgrade` keeps the declared version. A package no longer declared is
 * forgotten: its world entry stays as the host left it.
 */
import { HostError } from "../../src/errors.ts";
import {
  type InstalledPackage,
  type PackageManager,
  PackageNotFoundError,
} from "../../src/providers.ts";
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
  /** A version apk cannot select exactly: no build number, or on a provided name. */
  async function refuseVersion(name: string, version: string): Promise<void> {
    if (PROVIDED_NAME.test(name)) {
      throw new HostError(
        "package.version",
        `apk: ${name} is a name packages provide, and a version (${version}) can only be ` +
          "declared for a package's own name",
        { hint: "declare the providing package with its version, or drop the version" },
      );
    }
    if (/-r\d+$/.test(version)) return;
    const policy = await runProgram(argv("policy", name), run);
    const builds = parseApkPolicy(policy.stdout).filter((v) => v.startsWith(`${version}-r`));
    throw new HostError(
      "package.version",
      `apk: version ${version} of ${name} has no build number (-rN); apk installs exact builds ` +
        `only (${builds.length ? `offered: ${builds.join(", ")}` : "no build of it is offered"})`,
      { hint: `declare the full apk version, e.g. ${builds.at(-1) ?? `${version}-r0`}` },
    );
  }

  return {
    name: "apk",
    argv,

    async installed(name: string): Promise<InstalledPackage | null> {
      refuseOption("package name", name);
      // -e prints the name of each installed package; with -v, "name-version".
      // For a provided name it prints the package providing it.
      const result = await runProgram(argv("-v", "info", "-e", name), run);
      if (result.code === 0) {
        return parseApkInfoExists(result.stdout, name) ?? parseApkProvider(result.stdout);
      }
      if (result.code === 1 && result.stdout.trim() === "") return null;
      throw programFailed(result);
    },

    async install(name: string, version?: string): Promise<void> {
      refuseOption("package name", name);
      if (version !== undefined) await refuseVersion(name, version);
      const target = version === undefined ? name : `${name}=${version}`;
      const result = await runProgram(argv("add", "--no-progress", target), run);
      if (result.code === 0) return;
      const problem = apkSolverProblem(result.stderr + result.stdout, name);
      if (problem?.kind === "missing-dependency") {
        throw new HostError(
          "package.dependency-missing",
          `apk: ${target} needs ${problem.missing}, which no configured repository offers ` +
            `(required by ${problem.requiredBy})`,
          {
            hint: `add the repository that offers ${problem.missing} to /etc/apk/repositories ` +
              "(and run apk update), or declare a build whose dependencies are available",
          },
        );
      }
      if (problem?.kind !== "not-found") throw programFailed(result);
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

    // apk's version is pkgver-rN; the launcher records pkgver.
    upstreamVersion: (version) => version.replace(/-r\d+$/, ""),
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

/** Names apk resolves through a package's `provides`: `cmd:`, `so:`, `pc:`, … */
const PROVIDED_NAME = /^[a-z0-9]+:/;

/**
 * The package `apk -v info -e NAME` answered with when NAME is only provided
 * (the first line: `hello-1.0-r0` for `cmd:hellocmd`).
 */
export function parseApkProvider(stdout: string): InstalledPackage | null {
  const line = stdout.split("\n").find((l) => l.trim() !== "");
  return line === undefined ? null : splitNameVersion(line);
}

/** The versions `apk policy NAME` lists (two-space indented `VERSION:` lines). */
export function parseApkPolicy(stdout: string): string[] {
  return [...stdout.matchAll(/^ {2}(\S+):$/gm)].map((m) => m[1]);
}

/** Why apk's solver refused: what was asked is not offered, or a dependency of it is missing. */
export type ApkSolverProblem =
  | { kind: "not-found" }
  | { kind: "missing-dependency"; missing: string; requiredBy: string };

/**
 * Read apk's "unable to select packages" report for a request of `name`. An
 * entry `X (no such package):` required by `world[…]` means what was asked is
 * not offered; one required only by packages (`brokendep-1.0-r0[libmissing]`)
 * is a missing dependency. `breaks: world[NAME=V]` is a version not offered.
 * `null` when the output is no solver refusal.
 */
export function apkSolverProblem(output: string, name: string): ApkSolverProblem | null {
  if (!/unable to select packages/i.test(output)) return null;
  const entries = [...output.matchAll(/^ {2}(\S+) \(no such package\):\n {4}required by: (.+)$/gm)];
  for (const [, missing, requiredBy] of entries) {
    if (missing === name || /(^| )world\[/.test(requiredBy)) return { kind: "not-found" };
  }
  const [first] = entries;
  if (first) return { kind: "missing-dependency", missing: first[1], requiredBy: first[2].trim() };
  return { kind: "not-found" };
}

/** Whether apk's output says the solver found no package (or no such version) to select. */
export function isApkNotFound(output: string, name = ""): boolean {
  return apkSolverProblem(output, name)?.kind === "not-found";
}

/** apk package files: <name>-<version>.apk, or in the cache <name>-<version>.<hash>.apk. */
const APK_FILE = (name: string, version: string) =>
  new RegExp(`^${escapeRegExp(name)}-${escapeRegExp(version)}(\\.[0-9a-f]+)?\\.apk$`);
