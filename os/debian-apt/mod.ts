/**
 * apt and dpkg (Debian, Ubuntu): the package verbs. Read back with dpkg-query, which
 * says the state dpkg holds a package in; installed with apt-get, never interactively.
 * Never removes a package (no remove, purge or autoremove anywhere). The command lines and
 * outputs parsed here were checked against apt 2.6.1 and dpkg 1.21 (Debian 12), in a lab
 * machine (tests/os/debian_apt_test.ts).
 *
 * - What counts as installed: dpkg's `installed`, and `triggers-awaited`/`triggers-pending`
 *   (installed, a trigger still to run). `not-installed` and `config-files` (removed, its
 *   configuration left) are not installed. `half-installed`, `unpacked`, `half-configured`
 *   and a package dpkg marks as needing reinstallation are neither: they are reported as
 *   such ({@link DpkgStateError}), and a person decides (the host does not guess how to
 *   finish what dpkg left half done).
 * - Held packages (`apt-mark hold`, dpkg's selection `hold`): never changed by the host.
 *   Installing one at another version is refused before apt runs ({@link HeldPackageError});
 *   apt's own refusal to change a held package another install needs is reported the same way.
 * - Non-interactive: DEBIAN_FRONTEND=noninteractive, `-y`, and dpkg told to keep a
 *   configuration file a person changed (`--force-confdef --force-confold`: no prompt, and
 *   nothing the administrator wrote is overwritten); apt-listchanges and needrestart stay
 *   quiet (the host restarts what a declaration says to restart: `restartOn`).
 * - `--no-install-recommends`: what is installed is what is declared and what it depends
 *   on. Recommends would add packages no declaration names, which the host would neither
 *   report nor read back; a declaration that wants one names it (pacman and apk install
 *   no optional dependency either).
 * - Exact versions: `NAME=VERSION`, the full Debian version (`[epoch:]upstream-revision`).
 *   A downgrade is allowed (`--allow-downgrades`) only when an exact version is declared.
 *   A version no repository offers is looked for as a package file in `fileDirs` (apt's
 *   cache, /var/cache/apt/archives, by default) and installed from that file.
 * - Refreshing the indexes alone (`apt-get update`) is safe on Debian: apt resolves an
 *   install against them and brings what it needs. A full upgrade (`upgrade: "full"`) is
 *   `apt-get upgrade --with-new-pkgs`, which installs new dependencies and never removes
 *   a package (unlike `full-upgrade`).
 */
import { HostError } from "../../src/errors.ts";
import {
  type InstalledPackage,
  type PackageManager,
  PackageNotFoundError,
} from "../../src/providers.ts";
import { escapeRegExp, type FileSearch, findPackageFile, whereNot } from "../_package_files.ts";
import {
  lastLines,
  programFailed,
  refuseOption,
  runProgram,
  type RunResult,
  type RunVia,
} from "../_run.ts";

/** Where apt and dpkg work; every field is optional. */
export interface AptOptions {
  /** apt-get (default "apt-get"). */
  aptGet?: string;
  /** dpkg-query (default "dpkg-query"). */
  dpkgQuery?: string;
  /** Configuration items for apt-get, each given as `-o ITEM` (tests: Dir::Etc::SourceList …). */
  config?: readonly string[];
  /** dpkg's database (dpkg-query --admindir DIR; default dpkg's own). */
  adminDir?: string;
  /**
   * Directories searched for `<name>_<version>_<arch>.deb` when no repository offers the
   * declared version (default: apt's cache, /var/cache/apt/archives).
   */
  fileDirs?: readonly string[];
  /**
   * Where this process sees the root apt works in, when `via` runs apt elsewhere (tests: a
   * lab machine's root from outside, /proc/PID/root): `fileDirs` are looked in below it, and
   * apt is given a file's path as it sees it. Default: the same root.
   */
  root?: string;
  /** Extra environment, and an argv prefix to run the tools elsewhere (tests: a lab machine). */
  env?: Record<string, string>;
  via?: readonly string[];
}

/** The apt adapter: {@link PackageManager} plus its argv builders (for tests). */
export interface Apt extends PackageManager {
  /** The argv of an apt-get run with this adapter's configuration. */
  aptArgv(...args: string[]): string[];
  /** The held state and version dpkg holds a package in (`null`: dpkg knows no such package). */
  status(name: string): Promise<DpkgStatus | null>;
}

/** What dpkg-query says of one package. */
export interface DpkgStatus {
  name: string;
  /** dpkg's selection: unknown, install, hold, deinstall, purge. */
  want: string;
  /** dpkg's state: not-installed, config-files, half-installed, unpacked, half-configured, triggers-awaited, triggers-pending, installed. */
  status: string;
  /** ok, or reinstreq (dpkg needs it reinstalled). */
  error: string;
  /** The version dpkg records (empty when none). */
  version: string;
}

/** The states in which a package is installed and works (a trigger may still be due). */
const INSTALLED = ["installed", "triggers-awaited", "triggers-pending"];
/** The states in which it is not installed at all. */
const ABSENT = ["not-installed", "config-files"];

/** What each state dpkg left half done means, and what a person does about it. */
const HALF_DONE: Readonly<Record<string, [string, string]>> = {
  "half-installed": [
    "its installation (or removal) stopped part-way",
    "reinstall it by hand (apt-get install --reinstall NAME), read what fails",
  ],
  unpacked: [
    "its files are unpacked but it was never configured",
    "configure it by hand (dpkg --configure NAME, or dpkg --configure -a), read what fails",
  ],
  "half-configured": [
    "its configuration (its postinst) stopped part-way",
    "configure it by hand (dpkg --configure NAME, or dpkg --configure -a), read what fails",
  ],
};

/** A package dpkg holds in a state that is neither installed nor absent. */
export class DpkgStateError extends HostError {
  constructor(found: DpkgStatus) {
    const [what, hint] = found.error === "reinstreq" && !HALF_DONE[found.status]
      ? ["dpkg marks it as needing reinstallation", HALF_DONE["half-installed"][1]]
      : HALF_DONE[found.status] ??
        [`dpkg reports the state "${found.status}"`, "look at it with dpkg --audit"];
    super(
      "package.half-installed",
      `dpkg: ${found.name} ${found.version} is ${found.status}` +
        `${found.error === "reinstreq" ? " (reinstallation required)" : ""}: ${what}; the ` +
        "host does not count it as installed and does not guess how to finish it",
      { hint: `${hint.replaceAll("NAME", found.name)}, then apply again` },
    );
  }
}

/** A package held (`apt-mark hold`), which the host does not change. */
export class HeldPackageError extends HostError {
  constructor(what: string, names: readonly string[]) {
    super("package.held", what, {
      hint: `a person held ${names.join(", ")} on purpose; \`apt-mark unhold ${
        names.join(" ")
      }\` lets the host change it, or declare the version it is held at`,
    });
  }
}

/** The format dpkg-query prints a package's state in (one line, tab-separated). */
const STATUS_FORMAT =
  "${binary:Package}\t${db:Status-Want}\t${db:Status-Status}\t${db:Status-Eflag}\t${Version}\n";

/**
 * Parse `dpkg-query -W -f STATUS_FORMAT NAME`: the line of NAME (any architecture's, the
 * installed one first), or `null` when none names it.
 */
export function parseDpkgStatus(stdout: string, name: string): DpkgStatus | null {
  const found: DpkgStatus[] = [];
  for (const line of stdout.split("\n")) {
    const [pkg, want, status, error, version] = line.split("\t");
    if (pkg === undefined || version === undefined || pkg.split(":")[0] !== name) continue;
    found.push({ name, want, status, error, version });
  }
  return found.find((f) => INSTALLED.includes(f.status)) ??
    found.find((f) => !ABSENT.includes(f.status)) ?? found[0] ?? null;
}

/** The environment every apt-get run gets: no question is ever asked. */
const QUIET_ENV: Readonly<Record<string, string>> = {
  DEBIAN_FRONTEND: "noninteractive",
  APT_LISTCHANGES_FRONTEND: "none",
  NEEDRESTART_SUSPEND: "1",
};

/** apt-get's options on every install: no prompt, an edited configuration file kept. */
const INSTALL = [
  "-q",
  "-y",
  "-o",
  "Dpkg::Options::=--force-confdef",
  "-o",
  "Dpkg::Options::=--force-confold",
  "--no-install-recommends",
];

/** Debian's package file names: <name>_<version, epoch as %3a>_<arch>.deb. */
const DEB_FILE = (name: string, version: string) =>
  new RegExp(
    `^${escapeRegExp(name)}_${escapeRegExp(version.replace(":", "%3a"))}_[a-z0-9-]+\\.deb$`,
  );

/** What apt says when no repository offers what was asked. */
const NOT_OFFERED =
  /^E: (Unable to locate package |Version '.*' for '.*' was not found|Package '.*' has no installation candidate)/m;

/** What apt says when an install would change a held package. */
const HELD_CHANGED = /Held packages were changed/;

/**
 * Create the apt adapter.
 *
 * @example
 * ```ts
 * const apt = debianApt();
 * await apt.install("wireguard-tools", "1.0.20210914-1");
 * await apt.installed("wireguard-tools"); // { name: "wireguard-tools", version: "1.0.20210914-1" }
 * ```
 *
 * Long because: a provider is one object of verbs over apt and dpkg (STYLE.md: a provider in one
 * place); each verb is short.
 */
export function debianApt(options: AptOptions = {}): Apt {
  const run: RunVia = { env: { ...QUIET_ENV, ...options.env }, via: options.via };
  const aptArgv = (...args: string[]) => [
    options.aptGet ?? "apt-get",
    ...(options.config ?? []).flatMap((item) => ["-o", item]),
    ...args,
  ];
  const queryArgv = (...args: string[]) => [
    options.dpkgQuery ?? "dpkg-query",
    ...(options.adminDir ? ["--admindir", options.adminDir] : []),
    ...args,
  ];
  const fileDirs = options.fileDirs ?? ["/var/cache/apt/archives"];

  async function status(name: string): Promise<DpkgStatus | null> {
    refuseOption("package name", name);
    const result = await runProgram(queryArgv("-W", "-f", STATUS_FORMAT, "--", name), run);
    if (result.code === 0) return parseDpkgStatus(result.stdout, name);
    if (result.code === 1 && /no packages found matching/.test(result.stderr)) return null;
    throw programFailed(result);
  }

  /** apt-get install of `targets`; a failure says why in the host's words where it can. */
  async function aptInstall(what: string, targets: string[], downgrade: boolean): Promise<void> {
    const result = await runProgram(
      aptArgv(
        ...INSTALL,
        ...(downgrade ? ["--allow-downgrades"] : []),
        "install",
        "--",
        ...targets,
      ),
      run,
    );
    if (result.code === 0) return;
    if (HELD_CHANGED.test(result.stderr)) throw heldChanged(what, result);
    if (NOT_OFFERED.test(result.stderr)) throw new NotOffered(result);
    throw programFailed(result);
  }

  // Safe on Debian: an install resolves against the indexes and brings what it needs.
  async function refresh(): Promise<void> {
    const result = await runProgram(aptArgv("-q", "update"), run);
    if (result.code !== 0) throw programFailed(result, "check /etc/apt/sources.list(.d)");
    // apt-get update exits 0 when a source could not be fetched: said, not hidden.
    const failed = result.stderr.split("\n").filter((l) => /^(W|E): Failed to fetch/.test(l));
    if (failed.length > 0) {
      throw new HostError("package.refresh", `apt-get update: ${lastLines(failed.join("\n"))}`, {
        hint: "check the sources in /etc/apt/sources.list(.d) and that they can be reached",
      });
    }
  }

  return {
    name: "apt",
    aptArgv,
    status,
    refresh,

    async installed(name: string): Promise<InstalledPackage | null> {
      const found = await status(name);
      if (found === null || ABSENT.includes(found.status)) return null;
      if (found.error !== "ok" || !INSTALLED.includes(found.status)) {
        throw new DpkgStateError(found);
      }
      return { name, version: found.version };
    },

    async install(name: string, version?: string): Promise<void> {
      refuseOption("package name", name);
      const found = await status(name);
      if (found?.want === "hold") {
        throw new HeldPackageError(
          `apt: ${name} is held (apt-mark hold)${
            INSTALLED.includes(found.status) ? ` at ${found.version}` : ""
          }, and the declaration asks for ${version ?? "it to be installed"}: the host does ` +
            "not change a held package",
          [name],
        );
      }
      const target = version === undefined ? name : `${name}=${version}`;
      try {
        await aptInstall(target, [target], version !== undefined);
        return;
      } catch (error) {
        if (!(error instanceof NotOffered)) throw error;
      }
      let search: FileSearch | undefined;
      if (version !== undefined) {
        const root = options.root ?? "";
        search = await findPackageFile(fileDirs.map((d) => root + d), name, version, DEB_FILE);
        if (search.file) {
          return await aptInstall(target, [search.file.slice(root.length)], true);
        }
        search.unreadable = search.unreadable.map((d) => d.slice(root.length));
      }
      throw new PackageNotFoundError(
        `apt: no configured repository offers ${target}` +
          (search ? `, and ${whereNot(fileDirs, search)}` : "") +
          " (as far as apt's indexes know)",
        "check the name and version and the sources in /etc/apt/sources.list(.d); or place " +
          "the package file in one of those directories",
      );
    },

    async upgradeAll(): Promise<void> {
      await refresh();
      const result = await runProgram(aptArgv(...INSTALL, "upgrade", "--with-new-pkgs"), run);
      if (result.code === 0) return;
      if (HELD_CHANGED.test(result.stderr)) throw heldChanged("the upgrade", result);
      throw programFailed(result);
    },

    // Debian's version is [epoch:]upstream[-revision]; the launcher records upstream.
    upstreamVersion: (version) => version.replace(/^\d+:/, "").replace(/-[^-]+$/, ""),
  };
}

/** apt found nothing that offers what was asked (its own words in the message). */
class NotOffered extends Error {
  constructor(readonly result: RunResult) {
    super(lastLines(result.stderr));
  }
}

/** apt refused because the install would change a held package (named from its report). */
function heldChanged(what: string, result: RunResult): HeldPackageError {
  const section = /The following held packages will be changed:\n((?: .*\n)+)/.exec(
    result.stdout + result.stderr,
  );
  const names = section ? section[1].trim().split(/\s+/) : ["(apt did not name them)"];
  return new HeldPackageError(
    `apt: installing ${what} would change the held package(s) ${names.join(", ")}: the host ` +
      "does not change a held package",
    names,
  );
}
