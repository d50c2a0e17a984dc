/** Mounts kept as systemd .mount units: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { MOUNT_PROGRAMS } from "../_mount.ts";
import { systemdMounts } from "./mod.ts";

/** The systemd mount provider: used where systemd is the init that answered. */
export const PROVIDER: ProviderDescriptor<"mounts"> = {
  folder: "systemd-mount",
  port: "mounts",
  names: ["systemd"],
  builds: ["init:systemd", "tarball", "checkout"],
  confine: { capability: "init" },
  programs: {
    ...MOUNT_PROGRAMS,
    systemctl: { why: "mount resources: enable and disable their units, daemon-reload" },
  },
  open: ({ env }) => systemdMounts({ env }),
};
