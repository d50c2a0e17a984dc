/**
 * The host's own paths from the tarball: unpacked into /usr/local (program, launcher and
 * install-init in bin/, runtime, bundle and init files in lib/nox-mesh-host/, substrate.lock
 * and licence in share/nox-mesh-host/), on any glibc Linux, started by systemd or OpenRC (a
 * build cannot know which), so both inits' places are its own. See packaging/own_paths.ts.
 */
import { ownPathsOf } from "../own_paths.ts";

/** Every own path of a tarball installation (patterns may hold `*` within a component). */
export const OWN_PATHS: readonly string[] = ownPathsOf({
  binDir: "/usr/local/bin",
  dirs: [
    "/usr/local/lib/nox-mesh-host",
    "/usr/local/share/nox-mesh-host",
    // Where the launcher unpacks a staged upgrade, and the old lib/ and share/ it moves
    // aside for a moment (launcher/nox-mesh-host-launch switch_to).
    "/usr/local/.nox-mesh-host-upgrade",
    "/usr/local/lib/nox-mesh-host.old",
    "/usr/local/share/nox-mesh-host.old",
  ],
  inits: ["systemd", "openrc"],
  rootPath: ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"],
});
