/** apt and dpkg, Debian's and Ubuntu's package tools: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { debianApt } from "./mod.ts";

/** The apt provider. */
export const PROVIDER: ProviderDescriptor<"packages"> = {
  folder: "debian-apt",
  port: "packages",
  names: ["apt"],
  builds: ["packages:apt", "checkout"],
  confine: { capability: "packages", native: true },
  programs: {
    "apt-get": { why: "package resources: install (an exact version), refresh the indexes" },
    "dpkg-query": {
      why: "package resources: query, held or half-installed; profile: dpkg-query -W",
    },
  },
  reads: {
    "/var/cache/apt/archives":
      "packages: a package file of an exact version (apt-get install FILE)",
  },
  open: ({ env }) => debianApt({ env }),
};
