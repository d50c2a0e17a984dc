/** Arch Linux and Arch Linux ARM: pacman, systemd, glibc; every program in /usr/bin. */
import { type Distribution, placed } from "./distribution.ts";

/** Arch Linux. */
export const ARCH: Distribution<"arch"> = {
  id: "arch",
  name: "Arch",
  title: "Arch Linux and Arch Linux ARM",
  osIds: ["arch"],
  libc: "glibc",
  init: "systemd",
  packages: { name: "pacman", query: ["pacman", "-Q"], emptyExit: 1 },
  // /usr/sbin, /bin and /sbin are links to /usr/bin: the unit's PATH finds each here.
  programs: placed("/usr/bin", [
    "pacman",
    "systemctl",
    "podman",
    "docker",
    "ip",
    "wg",
    "wireguard-go",
    "nft",
    "sysctl",
    "stat",
    "sync",
    "useradd",
    "usermod",
    "userdel",
    "groupadd",
    "groupdel",
    "mount",
    "umount",
    "findfs",
    "cat",
  ]),
  // Root's PATH: Arch's /etc/profile.
  install: { binDir: "/usr/bin", rootPath: ["/usr/local/sbin", "/usr/local/bin", "/usr/bin"] },
};
