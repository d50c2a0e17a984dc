/**
 * Alpine Linux: apk, OpenRC, musl (the host's runtime is started through the glibc loader its
 * package carries: packaging/README.md, "The carried glibc"). Programs in /bin, /sbin, /usr/bin
 * and /usr/sbin, each spelt both ways where Alpine moved it or /usr may be merged.
 */
import { type Distribution, mergedUsr, placed, usrFirst } from "./distribution.ts";

/** Alpine Linux. */
export const ALPINE: Distribution<"alpine"> = {
  id: "alpine",
  name: "Alpine",
  title: "Alpine Linux",
  osIds: ["alpine"],
  libc: "musl",
  init: "openrc",
  packages: { name: "apk", query: ["apk", "info"], emptyExit: 0 },
  programs: {
    ...mergedUsr("/sbin", ["apk", "rc-service", "rc-update", "ip", "sysctl", "findfs"]),
    ...mergedUsr("/bin", ["rc-status", "mount", "umount", "cat", "stat", "sync"]),
    ...placed("/usr/bin", ["podman", "docker", "wg", "wireguard-go"]),
    // shadow's tools, from Alpine's shadow package.
    ...placed("/usr/sbin", ["nft", "useradd", "usermod", "userdel", "groupadd", "groupdel"]),
    // busybox's applets: both spellings, /usr's first.
    ...usrFirst("/sbin", ["adduser", "addgroup", "deluser", "delgroup"]),
    ...usrFirst("/bin", ["passwd"]),
  },
  // Root's PATH: Alpine's /etc/profile.
  install: {
    binDir: "/usr/bin",
    rootPath: ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"],
  },
};
