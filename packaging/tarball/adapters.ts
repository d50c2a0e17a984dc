/**
 * The adapters the tarball carries: every one, since the tarball is the floor
 * for any glibc machine (systemd or OpenRC, pacman or apk); that is the
 * development default, os/adapters.ts, so the build keeps it as it is.
 */
export { ADAPTERS } from "../../os/adapters.ts";
