/**
 * The adapters the Arch build carries: pacman, systemd, podman or docker. The
 * build puts this file in place of os/adapters.ts (an import map), so nothing
 * else reaches the Arch program.
 */
import type { AdapterRegistry } from "../../os/registry.ts";
import { archPacman } from "../../os/arch-pacman/mod.ts";
import { containerCli } from "../../os/container-cli/mod.ts";
import { systemd } from "../../os/systemd/mod.ts";

/** Arch Linux's adapters. */
export const ADAPTERS: AdapterRegistry = {
  packages: { pacman: archPacman },
  services: { systemd },
  containers: { podman: containerCli, docker: containerCli },
};
