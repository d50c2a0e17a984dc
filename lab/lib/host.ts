import { join } from "node:path";
import {
  loadPermissionSet,
  type PermissionSet,
  type TargetOs,
} from "../../packaging/permissions.ts";
import type { Flavour } from "./base.ts";
import { CHECKOUT } from "./bundle.ts";
import { LabError } from "./errors.ts";
import type { HostFrom, Machine } from "./machine.ts";

/** Where a machine raised with `hostFrom: "alpine-files"` finds them (lib/lab.ts binds it). */
export const ALPINE_FILES = "/lab-alpine";

/** How the host is installed on a machine, and where it then lives. */
export interface HostInstall {
  /**
   * pacman from the lab repository, the tarball unpacked into /usr/local, or the files the
   * Alpine package installs copied into the root (a machine with no apk).
   */
  how: "pacman" | "tarball" | "alpine-files" | "apt";
  /** The permission set (packaging/<os>/permissions) the installed host runs under. */
  os: TargetOs;
  /** The host's program (the shim of the bundled form). */
  command: string;
  /** The bundle the shim runs (the file a self-upgrade replaces). */
  bundle: string;
  /** The deno the shim runs: the one each package carries. */
  deno: string;
  /** The set, for the argv its shim starts the runtime with (packaging/build.ts runtimeArgs). */
  set: PermissionSet;
}

const ARCH = await loadPermissionSet("arch");
const TARBALL = await loadPermissionSet("tarball");
const ALPINE = await loadPermissionSet("alpine");
const DEBIAN = await loadPermissionSet("debian");

/** The host from the Arch package (the Arch-like machines: Debian with pacman standing in for Arch). */
export const PACMAN_INSTALL: HostInstall = {
  how: "pacman",
  os: "arch",
  command: ARCH.binary,
  bundle: ARCH.bundle,
  deno: ARCH.deno,
  set: ARCH,
};

/** The host from the tarball (any flavour), at the tarball permission file's paths. */
export const TARBALL_INSTALL: HostInstall = {
  how: "tarball",
  os: "tarball",
  command: TARBALL.binary,
  bundle: TARBALL.bundle,
  deno: TARBALL.deno,
  set: TARBALL,
};

/** The host from the Alpine package's files (every subpackage's), at its permission set's paths. */
export const ALPINE_FILES_INSTALL: HostInstall = {
  how: "alpine-files",
  os: "alpine",
  command: ALPINE.binary,
  bundle: ALPINE.bundle,
  deno: ALPINE.deno,
  set: ALPINE,
};

/** The host from its Debian package (the Debian machines: `hostFrom: "deb"`), at its set's paths. */
export const DEB_INSTALL: HostInstall = {
  how: "apt",
  os: "debian",
  command: DEBIAN.binary,
  bundle: DEBIAN.bundle,
  deno: DEBIAN.deno,
  set: DEBIAN,
};

/**
 * The host as each flavour gets it by default: systemd machines (Debian) from the .deb,
 * OpenRC and plain machines from the tarball (a machine raised with another `hostFrom` gets
 * that: {@link hostInstall}).
 */
export const HOST_INSTALLS: Readonly<Record<Flavour, HostInstall>> = {
  systemd: DEB_INSTALL,
  openrc: TARBALL_INSTALL,
  plain: TARBALL_INSTALL,
};

/** Each way the host comes onto a machine (MachineSpec.hostFrom), installed. */
const BY_SOURCE: Readonly<Record<HostFrom, HostInstall>> = {
  deb: DEB_INSTALL,
  pacman: PACMAN_INSTALL,
  tarball: TARBALL_INSTALL,
  "alpine-files": ALPINE_FILES_INSTALL,
};

/** How the host is installed on this machine. */
export function hostInstall(machine: Machine): HostInstall {
  return BY_SOURCE[machine.hostFrom];
}

/** The host's program on a machine (as installed there). */
export function hostCommand(machine: Machine): string {
  return hostInstall(machine).command;
}

/** The PATH the host's init files give it (launcher/), which its permission set is written for. */
export const HOST_PATH = "/usr/bin:/usr/sbin:/bin:/sbin";

/**
 * Installs the host from its real package (each carries its own Deno runtime): on Debian
 * machines `apt-get install nox-mesh-host` from the lab's signed apt repository; on the
 * Arch-like ones `pacman -S nox-mesh-host` from the lab repository (/lab/repo), plus the
 * host.json of the Arch-like flavour; the tarball in /lab/tarball, checked against its
 * SHA256SUMS and unpacked into /usr/local, on OpenRC and plain machines (and those raised
 * with `hostFrom: "tarball"`); or the Alpine package's files. Nothing is started.
 */
export async function installHost(machine: Machine): Promise<void> {
  const install = hostInstall(machine);
  if (install.how === "pacman") {
    await machine.exec(
      ["pacman", "-Sy", "--noconfirm", "--noprogressbar", "nox-mesh-host"],
      { check: true },
    );
    // The Arch-like flavour is Debian with pacman: pacman is not the OS's own package
    // manager there, so the host uses it only when told to.
    await machine.writeFile(ARCH_LIKE_CONFIG.path, ARCH_LIKE_CONFIG.text, "0644");
  } else if (install.how === "apt") {
    // As a Debian user installs it: from the lab's signed repository (lib/apt_repo.ts).
    await machine.exec(["apt-get", "-q", "update"], { check: true });
    await machine.exec(["apt-get", "-q", "-y", "install", "nox-mesh-host"], {
      check: true,
      env: { DEBIAN_FRONTEND: "noninteractive" },
    });
  } else if (install.how === "alpine-files") {
    // As apk extracts a package: every file in place (the root's, with its mode).
    await machine.exec(["/bin/sh", "-c", `cp -a ${ALPINE_FILES}/. /`], { check: true });
  } else {
    await machine.exec(["/bin/sh", "-c", INSTALL_TARBALL], { check: true });
  }
  const r = await machine.exec([install.command, "version"]);
  if (r.code !== 0 || !r.stdout.startsWith("nox-mesh-host ")) {
    throw new LabError(
      "command-failed",
      `on ${machine.name}: the installed ${install.command} does not run (exit ${r.code}): ` +
        `${r.stderr.trim() || r.stdout.trim()}`,
    );
  }
}

/** What a person does with the tarball on a machine without a package manager. */
const INSTALL_TARBALL = `set -eu
cd /lab/tarball
sha256sum -c --quiet SHA256SUMS
for f in nox-mesh-host-*.tar.gz; do tar -xz -C /usr/local < "$f"; done
`;

/** The host configuration of the lab's Arch-like (systemd + pacman) machines. */
export const ARCH_LIKE_CONFIG = {
  path: "/etc/mesh-host/host.json",
  text: JSON.stringify({ packageManager: "pacman" }) + "\n",
} as const;

/**
 * The development permission flags of the `host` task in deno.json (`deno task
 * host`), for tests that run the host from the checkout. Lab machines do not use
 * them: they run the host as packaged, under packaging/<os>/permissions.
 */
export async function hostFlags(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(join(CHECKOUT, "deno.json")));
  const task: unknown = config?.tasks?.host;
  const line = typeof task === "string" ? task : (task as { command?: string })?.command;
  const words = typeof line === "string" ? line.trim().split(/\s+/) : [];
  const runAt = words.indexOf("run");
  const entryAt = words.findIndex((w) => /(^|\/)mod\.ts$/.test(w));
  if (words[0] !== "deno" || runAt !== 1 || entryAt < runAt) {
    throw new LabError(
      "usage",
      `deno.json has no "host" task of the form "deno run <flags> mod.ts" (found ${
        JSON.stringify(line ?? null)
      })`,
    );
  }
  const flags = words.slice(runAt + 1, entryAt).map((w) => w.replace(/^(['"])(.*)\1$/, "$2"));
  if (flags.some((f) => f === "-A" || f === "--allow-all")) {
    throw new LabError("usage", "the host task must not use -A/--allow-all (DESIGN.md §3)");
  }
  return flags;
}
