/**
 * The host's own paths on Arch Linux: the package installs into /usr/bin, systemd
 * starts it, and root's PATH (Arch's /etc/profile) is /usr/local/sbin,
 * /usr/local/bin, /usr/bin. See packaging/own_paths.ts for how each part is derived.
 */
import { ownPathsOf } from "../own_paths.ts";

/** Every own path on Arch (patterns may hold `*` within a component). */
export const OWN_PATHS: readonly string[] = ownPathsOf({
  binDir: "/usr/bin",
  inits: ["systemd"],
  rootPath: ["/usr/local/sbin", "/usr/local/bin", "/usr/bin"],
});
