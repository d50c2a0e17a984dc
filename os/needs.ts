/**
 * What the adapters and the profile detection run and read, per OS, so that
 * the per-OS permission sets (packaging/<os>/permissions) can grant exactly
 * this. Programs are named as they are looked up on PATH; the permission files
 * list them by absolute path (Deno matches the path a name resolves to).
 */

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
  "/run/docker.sock": "containers: docker's daemon socket (running, not answering)",
  "/var/run/docker.sock": "containers: the same, older location",
  "/usr/bin": "profile evidence only: is a program (dpkg, Xorg …) installed (stat)",
  "/usr/sbin": "the same",
  "/bin": "the same",
  "/sbin": "the same",
};

/** The overlay, firewall and sysctl adapters (os/wireguard, os/nftables, os/sysctl). */
const NET_KINDS_RUN = {
  wg: "overlay resources: set key/port/peers, show IF dump; profile: --version, scratch interface",
  "wireguard-go": "overlay resources where the kernel has no WireGuard: make the interface",
  nft:
    "firewall resources: -c -f - (syntax), -f - (replace a table), -j list table, delete table; " +
    "profile: a scratch table",
  sysctl: "sysctl resources: -n KEY, -q -w KEY=VALUE (Deno grants /proc/sys to --allow-all only)",
};

const SYS = {
  hostname: "profile: host name",
  osRelease: "profile: kernel release",
};

/** Arch Linux: pacman, systemd, podman or docker. */
export const ARCH: OsNeeds = {
  run: {
    pacman: "packages: -Q NAME, -S --needed NAME[=VERSION], -U FILE, -Sy; profile: -Q",
    systemctl: "services: show/enable/disable/start/stop/daemon-reload; profile: show",
    podman: "containers: container inspect, create, start, rm --force; profile: info",
    docker: "the same verbs as podman; profile: version",
    ip: "profile: address show, [-6] route show default; overlay resources: link add/set/del, " +
      "address replace/del, -d -j addr show dev IF (iproute2)",
    ...NET_KINDS_RUN,
  },
  read: {
    ...COMMON_READ,
    "/var/cache/pacman/pkg": "packages: a package file of an exact version (pacman -U)",
    "/run/systemd/system": "init: booted with systemd (when systemctl does not answer)",
    "/run/systemd/sessions": "graphical: logind sessions of type x11/wayland",
  },
  sys: SYS,
};

/** Alpine Linux: apk, OpenRC, podman or docker. */
export const ALPINE: OsNeeds = {
  run: {
    apk: "packages: -v info -e NAME, add NAME[=VERSION] | FILE, update; profile: info",
    "rc-service": "services: --exists NAME, NAME status/start/stop",
    "rc-update": "services: show RUNLEVEL, add/del NAME RUNLEVEL",
    "rc-status": "init: --runlevel (proves OpenRC booted and answers; needed to pick OpenRC)",
    podman: "containers: container inspect, create, start, rm --force; profile: info",
    docker: "the same verbs as podman; profile: version",
    ip: "profile: address show, [-6] route show default; overlay resources: link add/set/del, " +
      "address replace/del, -d -j addr show dev IF (iproute2; busybox ip has no -j)",
    ...NET_KINDS_RUN,
  },
  read: {
    ...COMMON_READ,
    "/etc/apk/cache": "packages: a package file of an exact version (apk add FILE); under /etc",
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
