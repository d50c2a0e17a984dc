#!/bin/sh
# Installs the Debian packages `deno task lab` needs on this (Debian 12) host. Idempotent:
# when everything is present it changes nothing. Run as root: sh lab/setup.sh
set -eu

# What each package is for:
#   mmdebstrap debian-archive-keyring   build the machines' base images from Debian's archive
#   systemd-container                   systemd-nspawn (systemd machines)
#   util-linux iproute2                 unshare/nsenter/setpriv, network namespaces and veths
#   nats-server openssl                 the lab broker and its TLS certificates
#   pacman-package-manager makepkg libarchive-tools   the lab's local pacman repository
#   gpg minisign scdoc                  signing the lab repository and the tarball; man pages
#   wireguard-go wireguard-tools nftables   the overlay and firewall kinds' tools
#   faketime                            a node whose clock is wrong (tests/link_rotation_test.ts)
#   prometheus-node-exporter            tests/metrics_test.ts: node_exporter reads the metrics file
#   qemu-user-static arch-test          the arm64 machine (scenario arm64-tarball): QEMU runs its
#                                       programs through binfmt_misc; mmdebstrap --arch=arm64
#                                       needs arch-test
#   acl                                 setfacl: tests/fs_trust_test.ts gives a user write through
#                                       a POSIX ACL and shows its mask in the mode's group bits
PACKAGES="mmdebstrap debian-archive-keyring systemd-container util-linux iproute2 nats-server
openssl pacman-package-manager makepkg libarchive-tools gpg minisign scdoc wireguard-go
wireguard-tools nftables faketime prometheus-node-exporter qemu-user-static arch-test acl"

say() { printf 'lab setup: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  say "run as root (it installs Debian packages): sudo sh lab/setup.sh"
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  say "this host has no apt-get/dpkg; the lab needs a Debian 12 (bookworm) host"
  exit 1
fi

missing=""
for package in $PACKAGES; do
  status=$(dpkg-query -W -f '${db:Status-Status}' "$package" 2>/dev/null || true)
  if [ "$status" != "installed" ]; then
    missing="$missing $package"
  fi
done

# Deno itself comes from the npm registry (DESIGN.md §2), so npm is needed when it is missing.
need_deno=""
if ! deno --version 2>/dev/null | grep -q '^deno 2\.9\.'; then
  need_deno=yes
  command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
fi

if [ -n "$missing" ]; then
  say "installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086 # $missing is a list of package names, split on purpose
  apt-get install -y -qq --no-install-recommends $missing
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
  say "installing Deno 2.9.6 from the npm registry"
  npm install -g --allow-scripts=deno deno@2.9.6 >/dev/null
fi

# QEMU's aarch64 entry in binfmt_misc (Debian's line, flags OPF: F opens the interpreter now,
# so it runs inside the machines' roots too), unless it is there or this host is aarch64.
# qemu-user-static's own scripts register it only where systemd-binfmt runs.
BINFMT=/proc/sys/fs/binfmt_misc
BINFMT_CONF=/usr/lib/binfmt.d/qemu-aarch64.conf
if [ "$(uname -m)" != aarch64 ] && [ -f "$BINFMT_CONF" ] && [ ! -e "$BINFMT/qemu-aarch64" ]; then
  if [ ! -e "$BINFMT/register" ]; then
    mount -t binfmt_misc binfmt_misc "$BINFMT"
  fi
  say "registering QEMU's aarch64 interpreter with binfmt_misc ($BINFMT_CONF)"
  grep -v '^#' "$BINFMT_CONF" | grep . | head -n 1 | tr -d '\n' > "$BINFMT/register"
fi
say "the lab has everything it needs"
