/**
 * The adapters the Alpine build carries: apk, OpenRC, podman or docker. The
 * build puts this file in place of os/adapters.ts (an import map), so nothing
 * else reaches the Alpine program.
 */
import type { AdapterRegistry } from "../../os/registry.ts";
import { alpineApk } from "../../os/alpine-apk/mod.ts";
import { containerCli } from "../../os/container-cli/mod.ts";
import { openrc } from "../../os/openrc/mod.ts";

/** Alpine Linux's adapters. */
export const ADAPTERS: AdapterRegistry = {
  packages: { apk: alpineApk },
  services: { openrc },
  containers: { podman: containerCli, docker: containerCli },
};
