/**
 * What the adapters and the profile detection run and read, per OS, so that
 * the per-OS permission sets (packaging/<os>/permissions) can grant exactly
 * this. Programs are named as they are looked up on PATH; the permission files
 * list them by absolute path (Deno matches the path a name resolves to).
 */

import { NEEDS as APK } from "./alpine-apk/needs.ts";
import { NEEDS as PACMAN } from "./arch-pacman/needs.ts";
import { NEEDS as CONTAINERS } from "./container-cli/needs.ts";
import { NEEDS as OPENRC } from "./openrc/needs.ts";
import { NEEDS as NFTABLES } from "./nftables/needs.ts";
import { NEEDS as SYSCTL } from "./sysctl/needs.ts";
import { NEEDS as SYSTEMD } from "./systemd/needs.ts";
import { NEEDS as WIREGUARD } from "./wireguard/needs.ts";

/** What one adapter needs: programs it runs and paths it reads, each with the reason. */
export interface AdapterNeeds {
  run: Record<string, string>;
  read: Record<string, string>;
}

/** What one OS's build needs from its permission set, beyond the managed roots. */
export interface OsNeeds {
  /** Programs run: the adapters' tools, and the profile's queries. */
  run: Record<string, string>;
  /** Paths read (lstat/readDir/read) by the profile and the package-file fallback. */
  read: Record<string, string>;
  /** --allow-sys kinds. */
  sys: Record<string, string>;
}

const COMMON_READ = {
  "/usr/lib/os-release": "os-release, where /etc/os-release is a link to it",
  "/run/user": "graphical: Wayland sockets of logged-in users",
  "/tmp/.X11-unix": "graphical: X11 sockets",
  "/usr/bin": "profile evidence only: is a program (dpkg, Xorg …) installed (stat)",
  "/usr/sbin": "the same",
  "/bin": "the same",
  "/sbin": "the same",
};

/** The overlay, firewall and sysctl adapters (os/wireguard, os/nftables, os/sysctl). */
/** The overlay, firewall and kernel-setting adapters' programs: the same on every OS. */
const NET_KINDS_RUN = { ...WIREGUARD.run, ...NFTABLES.run, ...SYSCTL.run };

const SYS = {
  hostname: "profile: host name",
  osRelease: "profile: kernel release",
};

/** Arch Linux: pacman, systemd, podman or docker. */
export const ARCH: OsNeeds = {
  run: {
    ...PACMAN.run,
    ...SYSTEMD.run,
    ...CONTAINERS.run,
    ip: "profile: address show, [-6] route show default; overlay resources: link add/set/del, " +
      "address replace/del, -d -j addr show dev IF (iproute2)",
    ...NET_KINDS_RUN,
  },
  read: {
    ...COMMON_READ,
    ...PACMAN.read,
    ...SYSTEMD.read,
    ...CONTAINERS.read,
    "/run/systemd/system": "init: booted with systemd (when systemctl does not answer)",
    "/run/systemd/sessions": "graphical: logind sessions of type x11/wayland",
  },
  sys: SYS,
};

/** Alpine Linux: apk, OpenRC, podman or docker. */
export const ALPINE: OsNeeds = {
  run: {
    ...APK.run,
    ...OPENRC.run,
    "rc-status": "init: --runlevel (proves OpenRC booted and answers; needed to pick OpenRC)",
    ...CONTAINERS.run,
    ip: "profile: address show, [-6] route show default; overlay resources: link add/set/del, " +
      "address replace/del, -d -j addr show dev IF (iproute2; busybox ip has no -j)",
    ...NET_KINDS_RUN,
  },
  read: {
    ...COMMON_READ,
    ...APK.read,
    ...OPENRC.read,
    ...CONTAINERS.read,
    "/run/openrc/softlevel": "init: OpenRC booted (when rc-status does not answer)",
    "/run/systemd/sessions": "graphical: elogind sessions of type x11/wayland",
  },
  sys: SYS,
};

/** The tarball: any of them. */
export const TARBALL: OsNeeds = {
  run: { ...ARCH.run, ...ALPINE.run },
  read: { ...ARCH.read, ...ALPINE.read },
  sys: SYS,
};

/** Needs by target OS (the names of packaging/<os>/). */
export const NEEDS: Readonly<Record<"arch" | "alpine" | "tarball", OsNeeds>> = {
  arch: ARCH,
  alpine: ALPINE,
  tarball: TARBALL,
};
