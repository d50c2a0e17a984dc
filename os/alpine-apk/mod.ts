/**
 * apk (Alpine Linux): the package verbs on apk's command line. The command
 * lines and the outputs parsed here were checked against real apk-tools
 * 2.14.10 and 3.0.6 (tests/fixtures/apk/). Never removes a package (no `apk del`).
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
 *
 * The host's own package: apk keeps no package file once it installed it (its
 * cache is off by default, and the repositories keep only the newest build), so
 * the host installs itself with `--cache-dir <state>/rollback/.apk-cache`, where
 * apk leaves the very files it installs (the package and its subpackages) for
 * the launcher's rollback copy, and `--update-cache`, since apk reads the
 * repositories' indexes from that directory too.
 *
 * Indexes: apk fetches a repository's index again only when its saved copy is older
 * than its cache age, and `apk update` alone does not make apk-tools 2.14 fetch it (its
 * applet's cache age 0 means the 4-hour default; recorded from 2.14.10); only
 * `--update-cache` (-U) does, in 2.14 and 3.0 alike. So the refresh after a not-found is
 * `apk --update-cache update`: a package published within those four hours is found.
 */
import { posix } from "node:path";
import { HostError } from "../../src/errors.ts";
import {
  type InstalledPackage,
  type PackageManager,
  PackageNotFoundError,
} from "../../src/providers.ts";
import { escapeRegExp, type FileSearch, findPackageFile, whereNot } from "../_package_files.ts";
import { mustRun, programFailed, refuseOption, runProgram, type RunVia } from "../_run.ts";
import { PROGRAM } from "../../src/version.ts";

/**
 * Where, under the state directory, apk keeps the files of the host's own package
 * it installs (its --cache-dir); the launcher makes it, keeps those files as the
 * version's rollback copy and empties it (launcher/README.md).
 */
export const OWN_PACKAGE_CACHE = "rollback/.apk-cache";

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
  /**
   * The host's state directory: its own package is installed with
   * `--cache-dir <stateDir>/rollback/.apk-cache` when the launcher made that
   * directory and apk's own cache is off (unset: never).
   */
  stateDir?: string;
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
 *
 * Long because: a provider is one object of verbs over apk (STYLE.md: a provider in one place);
 * each verb is short.
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

  /**
   * The directory apk keeps the host's own package files in, when it installs them:
   * the launcher's, when it made it and apk's own cache (/etc/apk/cache, which the
   * launcher reads too) is off.
   */
  async function ownPackageCache(name: string): Promise<string | undefined> {
    if (name !== PROGRAM || !options.stateDir || options.cacheDir !== undefined) return undefined;
    const isDir = (path: string) =>
      Deno.stat(path).then((s) => s.isDirectory, (e) => {
        if (e instanceof Deno.errors.NotFound) return false;
        throw e;
      });
    if (await isDir(posix.join(options.root ?? "/", "etc/apk/cache"))) return undefined;
    const dir = posix.join(options.stateDir, OWN_PACKAGE_CACHE);
    return await isDir(dir) ? dir : undefined;
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
      const keep = await ownPackageCache(name);
      const result = await runProgram(
        keep
          ? argv("--cache-dir", keep, "add", "--update-cache", "--no-progress", target)
          : argv("add", "--no-progress", target),
        run,
      );
      if (result.code === 0) return;
      const problem = apkSolverProblem(result.stderr + result.stdout, name);
      if (problem === null) throw programFailed(result);
      if (problem.kind !== "not-found") throw solverError(target, problem);
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
    // them and upgrades what the new package needs. --update-cache: apk-tools 2.14's
    // `apk update` alone keeps an index fetched less than four hours ago.
    async refresh(): Promise<void> {
      await mustRun(argv("--update-cache", "update", "--no-progress"), run);
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

/**
 * Why apk's solver refused a request: what was asked is not offered (at that
 * version); a dependency of it is offered by no repository; a dependency is
 * offered only at a version it does not accept; another installed package
 * requires a version of it other than the one asked; a name several packages
 * provide; or a refusal of another shape, with apk's report.
 */
export type ApkSolverProblem =
  | { kind: "not-found" }
  | { kind: "missing-dependency"; missing: string; requiredBy: string }
  | { kind: "dependency-conflict"; needs: string; by: string; offered: string }
  | { kind: "held"; wanted: string; by: string; requires: string }
  | { kind: "conflict"; by: string; installed: string }
  | { kind: "ambiguous"; providers: string[] }
  | { kind: "other"; report: string };

/** One entry of apk's report: `  SUBJECT[ (TAG)]:` and its `    label: items` lines. */
interface SolverEntry {
  subject: string;
  tag?: string;
  labels: Map<string, string[]>;
}

/** The entries of apk's "unable to select packages" report (a label's items may wrap). */
function solverEntries(output: string): SolverEntry[] {
  const entries: SolverEntry[] = [];
  let label: string[] | undefined;
  for (const line of output.split("\n")) {
    const head = line.match(/^ {2}(\S+)(?: \(([^)]*)\))?:$/);
    const item = line.match(/^ {4}([a-z][a-z ]*):(?: (.*))?$/);
    if (head) {
      entries.push({ subject: head[1], tag: head[2], labels: new Map() });
      label = undefined;
    } else if (item && entries.length > 0) {
      label = [];
      entries.at(-1)!.labels.set(item[1], label);
      label.push(...(item[2] ?? "").split(/\s+/).filter((w) => w !== ""));
    } else if (/^ {5,}\S/.test(line) && label) {
      label.push(...line.trim().split(/\s+/));
    } else label = undefined;
  }
  return entries;
}

/** `pkg-1.0-r0[dep]` or `world[dep]`: who (a package, or world) and the dependency. */
function dependent(item: string): { who: string; dep: string } | null {
  const m = item.match(/^(.+?)\[(.+)\]$/);
  return m ? { who: m[1], dep: m[2] } : null;
}

/** The package name in a dependency (`deno>=3`, `demo=1.0-r0`, `!x`, `x~1`, `x><Q1…`). */
const depName = (dep: string) => dep.replace(/^!/, "").replace(/[=<>~@].*$/, "");

/**
 * Read apk's "unable to select packages" report for a request of `name` (same
 * in apk-tools 2.14.10 and 3.0.6). An entry `X (no such package):` required by
 * `world[…]`, or a package that only `breaks: world[NAME=V]`, means what was
 * asked is not offered; `X (no such package):` required only by packages is a
 * missing dependency; `deno-2.9.6-r0: breaks: needsnewdeno-1.0-r0[deno>=3]` a
 * dependency offered only at a version the asked package does not accept;
 * `demo-2.0-r0: breaks: pinsdemo-1.0-r0[demo=1.0-r0]` (the asked package) an
 * installed package holding it at another version; `openrc-0.55.1-r2: breaks:
 * noxconflict-1.0-r0[!openrc]` the asked package refusing one installed;
 * `X (virtual): provided by:
 * a b` a name several packages provide. `null` when the output is no solver
 * refusal.
 */
export function apkSolverProblem(output: string, name: string): ApkSolverProblem | null {
  if (!/unable to select packages/i.test(output)) return null;
  const entries = solverEntries(output);
  const missing = entries.filter((e) => e.tag === "no such package");
  for (const e of missing) {
    const by = e.labels.get("required by") ?? [];
    if (e.subject === name || by.some((w) => w.startsWith("world["))) return { kind: "not-found" };
  }
  if (missing.length > 0) {
    const [first] = missing;
    return {
      kind: "missing-dependency",
      missing: first.subject,
      requiredBy: (first.labels.get("required by") ?? []).join(" "),
    };
  }
  const other = { kind: "other" as const, report: reportOf(output) };
  let notOffered = false;
  for (const e of entries) {
    if (e.tag === "virtual") {
      return { kind: "ambiguous", providers: e.labels.get("provided by") ?? [] };
    }
    if (e.tag !== undefined) return other;
    if (e.labels.has("conflicts")) return other;
    const breaks = (e.labels.get("breaks") ?? []).map(dependent);
    if (breaks.length === 0 || breaks.some((b) => b === null)) return other;
    const subject = splitNameVersion(e.subject)?.name;
    for (const b of breaks as { who: string; dep: string }[]) {
      if (b.who === "world") {
        if (depName(b.dep) !== name) return other;
        notOffered = true;
      } else if (subject === name) {
        return { kind: "held", wanted: e.subject, by: b.who, requires: b.dep };
      } else if (splitNameVersion(b.who)?.name === name) {
        if (b.dep.startsWith("!")) return { kind: "conflict", by: b.who, installed: e.subject };
        return { kind: "dependency-conflict", needs: b.dep, by: b.who, offered: e.subject };
      } else return other;
    }
  }
  return notOffered ? { kind: "not-found" } : other;
}

/** apk's report, from "unable to select packages" on, for an error message. */
function reportOf(output: string): string {
  const at = output.search(/unable to select packages/i);
  return output.slice(at).trim().split("\n").map((l) => l.trim()).join(" ");
}

/** The error a person can act on for a solver refusal other than "not found". */
function solverError(target: string, problem: Exclude<ApkSolverProblem, { kind: "not-found" }>) {
  switch (problem.kind) {
    case "missing-dependency":
      return new HostError(
        "package.dependency-missing",
        `apk: ${target} needs ${problem.missing}, which no configured repository offers ` +
          `(required by ${problem.requiredBy})`,
        {
          hint: `add the repository that offers ${problem.missing} to /etc/apk/repositories ` +
            "(and run apk update), or declare a build whose dependencies are available",
        },
      );
    case "dependency-conflict":
      return new HostError(
        "package.dependency-conflict",
        `apk: ${target} cannot be installed: ${problem.by} needs ${problem.needs}, and the ` +
          `repositories offer ${problem.offered}, which does not satisfy it`,
        {
          hint: `add a repository offering ${problem.needs} (and run apk update), or declare ` +
            `a build that works with ${problem.offered}`,
        },
      );
    case "held":
      return new HostError(
        "package.held",
        `apk: ${target} cannot be installed: the installed ${problem.by} requires ` +
          `${problem.requires}`,
        {
          hint: `declare the version ${problem.by} requires, or upgrade ${problem.by} to a ` +
            "build that accepts this one",
        },
      );
    case "conflict":
      return new HostError(
        "package.conflict",
        `apk: ${target} cannot be installed: ${problem.by} conflicts with the installed ` +
          problem.installed,
        { hint: "the two cannot be installed together; declare one of them only" },
      );
    case "ambiguous":
      return new HostError(
        "package.ambiguous",
        `apk: ${target} is a name several packages provide ` +
          `(${problem.providers.join(", ") || "apk names none"}), and apk will not choose one`,
        { hint: "declare one of those packages by its own name" },
      );
    case "other":
      return new HostError(
        "package.unsatisfiable",
        `apk could not select packages for ${target}: ${problem.report}`,
        { hint: "apk's report says which packages conflict; declare versions that fit together" },
      );
  }
}

/** Whether apk's output says the solver found no package (or no such version) to select. */
export function isApkNotFound(output: string, name = ""): boolean {
  return apkSolverProblem(output, name)?.kind === "not-found";
}

/** apk package files: <name>-<version>.apk, or in the cache <name>-<version>.<hash>.apk. */
const APK_FILE = (name: string, version: string) =>
  new RegExp(`^${escapeRegExp(name)}-${escapeRegExp(version)}(\\.[0-9a-f]+)?\\.apk$`);
