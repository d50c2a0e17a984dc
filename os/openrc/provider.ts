/** OpenRC's service manager: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { openrc } from "./mod.ts";

/** The OpenRC provider. */
export const PROVIDER: ProviderDescriptor<"services"> = {
  folder: "openrc",
  port: "services",
  names: ["openrc"],
  builds: ["init:openrc", "tarball", "checkout"],
  confine: { capability: "init" },
  programs: {
    "rc-service": { why: "service resources: start, stop, ask state" },
    "rc-update": { why: "service resources: enable in a runlevel" },
    "rc-status": { why: "init: rc-status --runlevel proves OpenRC booted and answers" },
  },
  reads: {
    "/run": "services: a started daemon's pid, proving a restart (/run/openrc records, " +
      "the pidfile they name)",
    "/run/openrc/softlevel": "init: OpenRC booted (when rc-status does not answer)",
  },
  open: ({ env }) => openrc({ env }),
};
