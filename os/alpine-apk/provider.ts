/** apk, Alpine Linux's package manager: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { alpineApk } from "./mod.ts";

/** The apk provider. */
export const PROVIDER: ProviderDescriptor<"packages"> = {
  folder: "alpine-apk",
  port: "packages",
  names: ["apk"],
  builds: ["packages:apk", "tarball", "checkout"],
  confine: { capability: "packages", native: true },
  programs: {
    apk: { why: "package resources: query, install an exact version; profile: apk info" },
  },
  reads: {
    "/etc/apk/cache": "packages: a package file of an exact version (apk add FILE)",
    "/var/lib/mesh-host/rollback/.apk-cache":
      "packages: whether the launcher made the --cache-dir of the host's own apk add",
  },
  // The host's own package files are kept in its state directory (--cache-dir).
  open: ({ env, stateDir }) => alpineApk({ env, ...(stateDir ? { stateDir } : {}) }),
};
