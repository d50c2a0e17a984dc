/**
 * The adapters the tarball carries: every package manager, init and container runtime
 * (the tarball is the floor for any glibc machine: systemd or OpenRC, pacman or apk), and
 * the tarball's own package manager for the host itself (os/tarball-self): with no
 * repository for the host, a declared next version comes as a tarball by digest. The
 * build puts this list in place of os/adapters.ts (so it names each adapter itself).
 */
import type { AdapterRegistry } from "../../os/registry.ts";
import { alpineApk } from "../../os/alpine-apk/mod.ts";
import { archPacman } from "../../os/arch-pacman/mod.ts";
import { containerCli } from "../../os/container-cli/mod.ts";
import { openrc } from "../../os/openrc/mod.ts";
import { systemd } from "../../os/systemd/mod.ts";
import { tarballSelf } from "../../os/tarball-self/mod.ts";

/** Where the tarball is unpacked (packaging/package.ts TARBALL_PREFIX; the permission set names it). */
const TARBALL_PREFIX = "/usr/local";

/** Every adapter, and the tarball's own package (the host, unpacked into /usr/local). */
export const ADAPTERS: AdapterRegistry = {
  packages: { pacman: archPacman, apk: alpineApk },
  services: { systemd, openrc },
  containers: { podman: containerCli, docker: containerCli },
  self: ({ stateDir }) =>
    tarballSelf({ prefix: TARBALL_PREFIX, ...(stateDir ? { stateDir } : {}) }),
};
