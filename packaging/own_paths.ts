/**
 * The host's own paths, derived per OS from how each init and root's shell find
 * things (DESIGN.md §4, §18). A declaration may not name a path inside one of
 * them, nor a directory, file or container mount source above one; the
 * permission sets' deny-write lists refuse them again at run time.
 *
 * Each distribution states its facts in os/distros/<id>.ts (the tarball in
 * packaging/tarball/own_paths.ts), packaging/own_paths_by_os.ts derives each build's list
 * here; the build embeds that OS's list in the program (packaging/build.ts), and the entry
 * point hands it to the core (mod.ts → CliIo.ownPaths → HostConfig.own). src/ never imports
 * this.
 *
 * An entry is an absolute path; a component may hold `*`, which matches any run
 * of characters within that one component (`/etc/conf.d/nox-mesh-host*`,
 * `/etc/runlevels/*\/nox-mesh-host`).
 */
import { PROGRAM } from "../src/version.ts";
import { LAUNCHER_METRICS_FILE } from "../src/launcher_files.ts";

/** What an OS's package (or tarball) installs, and which init starts it. */
export interface Installation {
  /** Directory holding the program and its launcher (`/usr/bin`, `/usr/local/bin`). */
  binDir: string;
  /** The inits that may start the host on this OS. */
  inits: readonly ("systemd" | "openrc")[];
  /** Root's PATH on this OS, in lookup order (its /etc/profile). */
  rootPath: readonly string[];
  /**
   * Directories holding the installation's other files, beyond the common ones
   * (`/usr/lib/<name>`, `/usr/share/<name>`): the tarball's runtime, bundle and init files.
   */
  dirs?: readonly string[];
}

/**
 * systemd's system unit search path (systemd.unit(5)), highest priority first,
 * plus /lib/systemd/system where /usr is not merged. A unit or drop-in in any of
 * them applies to the host's unit; those outside the managed roots are listed so
 * the list says the whole truth.
 */
export const SYSTEMD_UNIT_DIRS: readonly string[] = [
  "/etc/systemd/system.control",
  "/run/systemd/system.control",
  "/run/systemd/transient",
  "/run/systemd/generator.early",
  "/etc/systemd/system",
  "/etc/systemd/system.attached",
  "/run/systemd/system",
  "/run/systemd/system.attached",
  "/run/systemd/generator",
  "/usr/local/lib/systemd/system",
  "/usr/lib/systemd/system",
  "/lib/systemd/system",
  "/run/systemd/generator.late",
];

/**
 * Every place systemd reads for the unit `<name>.service`: the unit itself in each
 * search directory; its drop-in directory; the drop-ins that match it by prefix
 * (`nox-mesh-.service.d`, `nox-.service.d`, systemd ≥ 246) and by type
 * (`service.d`); its enablement links in any `*.wants`/`*.requires` directory;
 * and the manager's defaults (system.conf and its drop-ins), which every
 * service inherits.
 */
export function systemdOwnPaths(name: string = PROGRAM): string[] {
  const unit = `${name}.service`;
  const dashes = [...name.matchAll(/-/g)].map((m) => m.index!);
  const prefixes = dashes.map((i) => `${name.slice(0, i + 1)}.service.d`);
  const paths: string[] = [];
  for (const dir of SYSTEMD_UNIT_DIRS) {
    paths.push(
      `${dir}/${unit}`,
      `${dir}/${unit}.d`,
      ...prefixes.map((p) => `${dir}/${p}`),
      `${dir}/service.d`,
      `${dir}/*.wants/${unit}`,
      `${dir}/*.requires/${unit}`,
    );
  }
  for (
    const base of ["/etc/systemd", "/run/systemd", "/usr/local/lib/systemd", "/usr/lib/systemd"]
  ) {
    paths.push(`${base}/system.conf`, `${base}/system.conf.d`);
  }
  return paths;
}

/**
 * Every place OpenRC reads for the service `<name>`: its script in /etc/init.d
 * and /usr/local/etc/init.d, the conf.d files openrc-run sources for it
 * (`<name>` and `<name>.<runlevel>`, beside the script), rc.conf
 * and rc.conf.d (sourced for every service), and its links in every runlevel.
 */
export function openrcOwnPaths(name: string = PROGRAM): string[] {
  return [
    `/etc/init.d/${name}`,
    `/usr/local/etc/init.d/${name}`,
    `/etc/conf.d/${name}*`,
    `/usr/local/etc/conf.d/${name}*`,
    "/etc/rc.conf",
    "/etc/rc.conf.d",
    `/etc/runlevels/*/${name}`,
  ];
}

/**
 * The commands root's shell may find instead of the host's own: its program and
 * launcher (`nox-mesh-host*`) in every PATH directory up to and including the one
 * the package installs into (a copy in /usr/local/bin shadows /usr/bin).
 */
export function shellOwnPaths(install: Installation, name: string = PROGRAM): string[] {
  const upTo = install.rootPath.indexOf(install.binDir);
  const dirs = upTo === -1
    ? [...install.rootPath, install.binDir]
    : install.rootPath.slice(0, upTo + 1);
  // /usr/local/sbin and /usr/local/bin come first on every OS's root PATH; name them always.
  for (const dir of ["/usr/local/sbin", "/usr/local/bin"]) if (!dirs.includes(dir)) dirs.push(dir);
  return dirs.map((dir) => `${dir}/${name}*`);
}

/**
 * node_exporter's textfile directories the permission sets know: Debian's and Ubuntu's
 * (prometheus-node-exporter's default) and the one node_exporter's own documentation and
 * most configuration tools use. The launcher writes its state beside the host's metricsFile
 * (launcher/README.md); a set can deny the host writing it only at a path it names.
 */
export const TEXTFILE_DIRS: readonly string[] = [
  "/var/lib/prometheus/node-exporter",
  "/var/lib/node_exporter/textfile_collector",
];

/** The paths every installation owns, whatever the OS: state, configuration, bundle, log. */
export function commonOwnPaths(name: string = PROGRAM): string[] {
  return [
    "/var/lib/mesh-host", // the state directory: store, node key, launcher files
    "/etc/mesh-host", // host.json and launch.env (the unit's EnvironmentFile)
    `/usr/share/${name}`, // the bundle substrate.lock
    `/usr/lib/${name}`, // the bundled form's program
    `/var/log/${name}*`, // its own log (OpenRC's output_log) and rotated copies
    // The launcher's state for node_exporter, in the textfile directories the sets know.
    ...TEXTFILE_DIRS.map((dir) => `${dir}/${LAUNCHER_METRICS_FILE}`),
  ];
}

/** The own paths of one installation, without duplicates, in a stable order. */
export function ownPathsOf(install: Installation): string[] {
  const paths = [
    ...commonOwnPaths(),
    ...(install.dirs ?? []),
    ...shellOwnPaths(install),
    ...(install.inits.includes("systemd") ? systemdOwnPaths() : []),
    ...(install.inits.includes("openrc") ? openrcOwnPaths() : []),
  ];
  return [...new Set(paths)];
}
