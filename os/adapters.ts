/**
 * The adapters a build carries. This file is the development default (every
 * adapter); each per-OS build replaces it, through an import map, with
 * packaging/<os>/adapters.ts, so an Arch build carries no apk or OpenRC code
 * and an Alpine build no pacman or systemd code (DESIGN.md §1).
 */
import type { AdapterRegistry } from "./registry.ts";
import { alpineApk } from "./alpine-apk/mod.ts";
import { archPacman } from "./arch-pacman/mod.ts";
import { containerCli } from "./container-cli/mod.ts";
import { openrc } from "./openrc/mod.ts";
import { systemd } from "./systemd/mod.ts";

/** Every adapter: the development and test default. */
export const ADAPTERS: AdapterRegistry = {
  packages: { pacman: archPacman, apk: alpineApk },
  services: { systemd, openrc },
  containers: { podman: containerCli, docker: containerCli },
};
