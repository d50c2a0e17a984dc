/**
 * What is true of one Linux distribution, and of nothing else (STYLE.md, "A distribution is
 * one file"): which os-release IDs it is, its C library, init system and package manager,
 * where each program the host may run lies on it, and where its package installs the host.
 * Providers name programs, never paths (os/provider.ts); the permission sets' allow-run lines
 * (os/needs.ts, `deno task providers`), the profile's package managers
 * (os/detect/packages.ts), the own paths (packaging/own_paths_by_os.ts), the builds
 * (packaging/) and the launcher's package commands (launcher/pkg/<manager>.sh) are asked of
 * these files and repeat none of it. The list is ./mod.ts; adding a distribution:
 * docs/contributing.md.
 */

/** A distribution's package manager, as the profile names it and proves it working. */
export interface PackageManagerFacts {
  /**
   * Its name: the profile's provider name for the `packages` capability, the name its package
   * provider answers to (os/<folder>/provider.ts `names`), host.json's `packageManager`, and the
   * launcher's package kind (NOX_MESH_HOST_PKG, launcher/pkg/<name>.sh).
   */
  name: string;
  /** A harmless query of its package database: answering it proves the manager working. */
  query: readonly string[];
  /** The exit code of that query on an empty database (pacman -Q exits 1 there). */
  emptyExit: number;
}

/** Everything the host, its builds and its launcher need to know about one distribution. */
export interface Distribution<Id extends string = string> {
  /**
   * Its id: the name of its build (`deno task build <id>`, os/provider.ts `builds`) and of
   * its packaging folder (packaging/<id>/: the permission set, the recipe, the init files).
   */
  id: Id;
  /** Its short name, for people and the permission sets' comments ("Debian"). */
  name: string;
  /** What it covers, for people ("Debian and Ubuntu"). */
  title: string;
  /**
   * The os-release IDs it is: the machine's ID, or a word of its ID_LIKE (Ubuntu says
   * ID_LIKE=debian). Its package manager is the OS's own where one of them matches.
   */
  osIds: readonly string[];
  /** Its C library: Deno's compiled form runs on glibc only (Deno publishes no musl build). */
  libc: "glibc" | "musl";
  /** Its init system: the init files its package ships, and the own paths that follow. */
  init: "systemd" | "openrc";
  /** Its package manager. */
  packages: PackageManagerFacts;
  /**
   * Where each program the host may run lies, as the host finds it through its init files'
   * PATH (/usr/bin:/usr/sbin:/bin:/sbin): every spelling Deno may be asked to run, first the
   * distribution's own (Deno checks the path a name resolves to, unresolved: /sbin/x is not
   * /usr/sbin/x even where /sbin is a link). These are the permission sets' allow-run lines;
   * a program a build needs that its distribution does not place stops the derivation.
   */
  programs: Readonly<Record<string, readonly string[]>>;
  /** Where its package installs the host, and root's PATH there (its /etc/profile). */
  install: {
    /** The directory holding the program and its launcher. */
    binDir: string;
    /** Root's PATH, in lookup order: a copy of the program earlier on it would shadow it. */
    rootPath: readonly string[];
  };
}

/** `names` at `dir/<name>`, one spelling each. */
export function placed(dir: string, names: readonly string[]): Record<string, string[]> {
  return Object.fromEntries(names.map((name) => [name, [`${dir}/${name}`]]));
}

/**
 * `names` at `dir/<name>` and, where /usr is merged (`dir` a link into /usr), at
 * `/usr<dir>/<name>` too: both spellings, `dir`'s first.
 */
export function mergedUsr(dir: string, names: readonly string[]): Record<string, string[]> {
  return Object.fromEntries(names.map((name) => [name, [`${dir}/${name}`, `/usr${dir}/${name}`]]));
}

/** The same, the /usr spelling first (a program that moved into /usr, kept in / too). */
export function usrFirst(dir: string, names: readonly string[]): Record<string, string[]> {
  return Object.fromEntries(names.map((name) => [name, [`/usr${dir}/${name}`, `${dir}/${name}`]]));
}
