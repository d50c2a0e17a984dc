/**
 * The host's own paths on Alpine Linux: the package installs into /usr/bin, OpenRC
 * starts it, and root's PATH (Alpine's /etc/profile) is /usr/local/sbin,
 * /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin. See packaging/own_paths.ts.
 */
import { ownPathsOf } from "../own_paths.ts";

/** Every own path on Alpine (patterns may hold `*` within a component). */
export const OWN_PATHS: readonly string[] = ownPathsOf({
  binDir: "/usr/bin",
  inits: ["openrc"],
  rootPath: ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"],
});
