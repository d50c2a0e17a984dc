/** Mounts kept as OpenRC scripts: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { MOUNT_PROGRAMS } from "../_mount.ts";
import { openrcMounts } from "./mod.ts";

/** The OpenRC mount provider: used where OpenRC is the init that answered. */
export const PROVIDER: ProviderDescriptor<"mounts"> = {
  folder: "openrc-mount",
  port: "mounts",
  names: ["openrc"],
  builds: ["init:openrc", "tarball", "checkout"],
  confine: { capability: "init" },
  programs: {
    ...MOUNT_PROGRAMS,
    "rc-update": { why: "mount resources: add their scripts to the boot runlevel" },
  },
  open: ({ env }) => openrcMounts({ env }),
};
