/**
 * What the profile's own detection needs from every permission set, beyond the
 * providers' (each provider's descriptor names what its detection runs and reads where
 * only its builds grant it: rc-status, /run/systemd/system …).
 */
import type { Needs } from "../provider.ts";

/** The profile's programs, paths and system information. */
export const PROFILE_NEEDS: Needs = {
  programs: {
    ip: { why: "profile: addresses and default routes" },
  },
  reads: {
    "/usr/lib/os-release": "os-release, where /etc/os-release is a link to it",
    "/run/systemd/sessions": "graphical: logind or elogind sessions of type x11/wayland",
    "/tmp/.X11-unix": "graphical: X11 sockets",
    "/usr/bin": "profile evidence: is a program (dpkg, Xorg …) installed (stat only)",
    "/usr/sbin": "profile evidence: is a program installed (stat only)",
    "/bin": "profile evidence: is a program installed (stat only)",
    "/sbin": "profile evidence: is a program installed (stat only)",
  },
  sys: {
    hostname: "profile: host name",
    osRelease: "profile: kernel release",
  },
};
