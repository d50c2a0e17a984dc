/** pacman, Arch Linux's package manager: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { archPacman } from "./mod.ts";

/** The pacman provider. */
export const PROVIDER: ProviderDescriptor<"packages"> = {
  folder: "arch-pacman",
  port: "packages",
  names: ["pacman"],
  builds: ["packages:pacman", "tarball", "checkout"],
  confine: { capability: "packages", native: true },
  programs: {
    pacman: { why: "package resources: query, install an exact version; profile: pacman -Q" },
  },
  reads: { "/var/cache/pacman/pkg": "packages: a package file of an exact version (pacman -U)" },
  open: ({ env }) => archPacman({ env }),
};
