/** The host's own package on a tarball installation: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { withOwnPackage } from "../_own_package.ts";
import { tarballSelf } from "./mod.ts";
import { TARBALL_PREFIX } from "../tarball_layout.ts";

/**
 * The tarball's own package manager for the host itself: with no repository for the host,
 * a declared next version comes as a tarball by digest. Carried by the tarball build only,
 * in front of whatever manages the machine's other packages. No program (it reads the
 * tarball with its own reader, never `tar`); it reads its VERSION file in /usr/local (a
 * managed root; its own files there are deny-write) and writes only the stage in its state
 * directory (under the managed root /var/lib): the launcher unpacks it.
 */
export const PROVIDER: ProviderDescriptor<"packages"> = {
  folder: "tarball-self",
  port: "packages",
  names: ["tarball"],
  builds: ["tarball"],
  open: ({ stateDir }) =>
    tarballSelf({ prefix: TARBALL_PREFIX, ...(stateDir ? { stateDir } : {}) }),
  over: (own, chosen) => withOwnPackage(own, chosen),
};
