/**
 * Debian (12 and later) and Ubuntu (which says ID_LIKE=debian): apt and dpkg, systemd,
 * glibc. /usr is merged (Debian 12 and Ubuntu since 20.04 support nothing else): /bin and
 * /sbin are links to /usr/bin and /usr/sbin, so the unit's PATH
 * (/usr/bin:/usr/sbin:/bin:/sbin) finds each program in /usr/bin or /usr/sbin.
 */
import { type Distribution, placed } from "./distribution.ts";

/** Debian and Ubuntu. */
export const DEBIAN: Distribution<"debian"> = {
  id: "debian",
  name: "Debian",
  title: "Debian and Ubuntu",
  osIds: ["debian"],
  libc: "glibc",
  init: "systemd",
  packages: { name: "apt", query: ["dpkg-query", "-W"], emptyExit: 1 },
  programs: {
    ...placed("/usr/bin", [
      "apt-get",
      "dpkg-query",
      "systemctl",
      "podman",
      "docker",
      "ip",
      "wg",
      "wireguard-go",
      "mount",
      "umount",
      "cat",
      "stat",
      "sync",
    ]),
    ...placed("/usr/sbin", [
      "nft",
      "sysctl",
      "findfs",
      "useradd",
      "usermod",
      "userdel",
      "groupadd",
      "groupdel",
    ]),
  },
  // Root's PATH: Debian's /etc/profile (Ubuntu's /etc/environment adds games and snap).
  install: {
    binDir: "/usr/bin",
    rootPath: ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"],
  },
};
