#!/bin/sh
# Installs everything `deno task lab` and `deno task test` need on this (Debian 12) host, and
# nothing else: the README's first command runs it, and CI (.ci/run) installs nothing of its
# own. Idempotent: when everything is present it changes nothing. Run as root: sh lab/setup.sh
#
# apt's and npm's output goes to a log file (one line per step here); on a failure the log is
# shown. tests/setup_list_test.ts fails when a program a test or a scenario runs is not
# installed by this list.
set -eu

# What each package is for (one list for the lab and the tests):
#   mmdebstrap debootstrap debian-archive-keyring   the machines' base images from Debian's
#                                       archive (debootstrap: the tarball floor's minimal root)
#   systemd systemd-container           systemd-nspawn (systemd machines); systemctl --root and
#                                       systemd-escape check the mount kind's .mount units
#   openrc                              the OpenRC adapter's tests run Debian's openrc
#   util-linux mount iproute2 iptables  unshare/nsenter/setpriv/losetup, network namespaces and
#                                       veths, a cut link in a namespace
#   e2fsprogs                           the mount kind's tests make an ext4 image (mkfs.ext4)
#   procps time                         ps/pgrep and /usr/bin/time for the memory figures
#   ca-certificates git openssl         the checkout, TLS certificates of the lab broker
#   nats-server curl                    the lab broker and the link's tests; curl reads each server's
#                                       monitoring (/varz) inside its network namespace
#   pacman-package-manager makepkg libarchive-tools fakeroot   the lab's local pacman
#                                       repository and the launcher's pacman path
#   dpkg-dev apt-utils lintian          the lab's signed apt repository (dpkg-deb, apt-ftparchive);
#                                       Debian's checker of the .deb (tests/debian_package_test.ts)
#   gpg gpg-agent minisign scdoc man-db signing the lab repositories and the tarball (gpg makes its
#                                       keys through gpg-agent, only Recommended); man pages
#                                       (scdoc writes them, man renders them in the tests)
#   podman runc uidmap                  the container kind's adapter and the lab's containers
#   busybox-static musl                 images made from a busybox root; a machine with no
#                                       glibc (the tarball's carried runtime)
#   wireguard-go wireguard-tools nftables   the overlay and firewall kinds' tools
#   passwd                              shadow's useradd & co. (the accounts kind's tests)
#   gcc make bzip2 libc6-dev libcrypt-dev   the accounts tests build busybox with its account
#                                       applets from Debian's source (Debian leaves them out)
#   strace shellcheck                   tests that count the host's syscalls (fsync, open); the
#                                       linter every shell file of the project is held to
#   sqlite3                             tests that read the host's store as an operator would
#   faketime                            a node whose clock is wrong (tests/link_rotation_test.ts)
#   prometheus-node-exporter            tests/metrics_test.ts: node_exporter reads the metrics file
#   qemu-user-static arch-test libc6-arm64-cross libgcc-s1-arm64-cross   the arm64 machine
#                                       (scenario arm64-tarball, tests/aarch64_test.ts)
#   acl                                 setfacl: tests/fs_trust_test.ts gives a user write through
#                                       a POSIX ACL and shows its mask in the mode's group bits
PACKAGES="mmdebstrap debootstrap debian-archive-keyring systemd systemd-container openrc util-linux mount
iproute2 iptables e2fsprogs procps time ca-certificates git openssl nats-server curl
pacman-package-manager makepkg libarchive-tools fakeroot dpkg-dev apt-utils lintian gpg gpg-agent
minisign scdoc man-db podman runc uidmap busybox-static musl wireguard-go wireguard-tools
nftables passwd gcc make bzip2 libc6-dev libcrypt-dev shellcheck strace sqlite3 faketime
prometheus-node-exporter qemu-user-static arch-test libc6-arm64-cross libgcc-s1-arm64-cross acl"

DENO_VERSION=2.9.6
LOG=${NOX_SETUP_LOG:-/var/log/nox-mesh-host-lab-setup.log}

say() { printf 'lab setup: %s\n' "$*" >&2; }

# step TEXT CMD...: runs CMD with its output in the log; one line here; the log on failure.
step() {
  text=$1
  shift
  say "$text"
  printf '\n== %s\n' "$text" >>"$LOG"
  if ! "$@" >>"$LOG" 2>&1; then
    say "failed: $text; the log ($LOG) follows"
    tail -n 60 "$LOG" >&2
    exit 1
  fi
}

if [ "$(id -u)" -ne 0 ]; then
  say "run as root (it installs Debian packages): sudo sh lab/setup.sh"
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  say "this host has no apt-get/dpkg; the lab needs a Debian 12 (bookworm) host"
  exit 1
fi
: >"$LOG"

missing=""
for package in $PACKAGES; do
  status=$(dpkg-query -W -f '${db:Status-Status}' "$package" 2>/dev/null || true)
  if [ "$status" != "installed" ]; then
    missing="$missing $package"
  fi
done

# Deno, and the Deno runtime the packages carry (packaging/tarball/runtime.ts), come from the npm
# registry (DESIGN.md §2): npm is needed. Debian's is installed only where no npm is found (a
# machine may have a Node.js of its own).
NPM_PACKAGES="nodejs npm"
command -v npm >/dev/null 2>&1 || missing="$missing $NPM_PACKAGES"
need_deno=""
if ! deno --version 2>/dev/null | grep -q "^deno $DENO_VERSION "; then
  need_deno=yes
fi

if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  step "reading Debian's package lists (apt-get update)" apt-get update
  # shellcheck disable=SC2086 # $missing is a list of package names, split on purpose
  step "installing from Debian:$missing" apt-get install -y --no-install-recommends $missing
  # The tests run node_exporter themselves, on a loopback port; the package's own service
  # (listening on every address) is not wanted on this host.
  case " $missing " in
  *" prometheus-node-exporter "*)
    if [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus-node-exporter.service >/dev/null 2>&1 || true
    fi
    ;;
  esac
fi
if [ -n "$need_deno" ]; then
  step "installing Deno $DENO_VERSION from the npm registry" \
    npm install -g --allow-scripts=deno "deno@$DENO_VERSION"
fi

# QEMU's aarch64 entry in binfmt_misc (Debian's line, flags OPF: F opens the interpreter now,
# so it runs inside the machines' roots too), unless it is there or this host is aarch64.
# qemu-user-static's own scripts register it only where systemd-binfmt runs.
BINFMT=/proc/sys/fs/binfmt_misc
BINFMT_CONF=/usr/lib/binfmt.d/qemu-aarch64.conf
if [ "$(uname -m)" != aarch64 ] && [ -f "$BINFMT_CONF" ]; then
  if [ ! -e "$BINFMT/register" ]; then
    mount -t binfmt_misc binfmt_misc "$BINFMT"
  fi
  if [ ! -e "$BINFMT/qemu-aarch64" ]; then
    say "registering QEMU's aarch64 interpreter with binfmt_misc ($BINFMT_CONF)"
    grep -v '^#' "$BINFMT_CONF" | grep . | head -n 1 | tr -d '\n' >"$BINFMT/register"
  fi
fi
say "the lab and the tests have everything they need ($(deno --version | head -n 1))"
