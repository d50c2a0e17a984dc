/**
 * The providers this program carries. This file is the checkout's (the providers whose
 * `builds` name "checkout": every one but the tarball's own package); each per-OS build
 * replaces it, through an import map, with a module importing only the descriptors whose
 * `builds` name that OS (packaging/build.ts), so an Arch build carries no apk or OpenRC
 * code and an Alpine build no pacman or systemd code (DESIGN.md §1).
 */
import { type ProviderDescriptor, selects } from "./provider.ts";
import { PROVIDERS } from "./provider_list.ts";

/** The checkout's providers: the development and test default. */
export const CARRIED: readonly ProviderDescriptor[] = PROVIDERS.filter((p) =>
  selects(p.builds, "checkout")
);
