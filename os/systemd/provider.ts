/** systemd's service manager: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { systemd } from "./mod.ts";

/** The systemd provider. */
export const PROVIDER: ProviderDescriptor<"services"> = {
  folder: "systemd",
  port: "services",
  names: ["systemd"],
  builds: ["init:systemd", "tarball", "checkout"],
  confine: { capability: "init" },
  programs: {
    systemctl: { why: "service resources: enable, start, ask state; profile: systemctl show" },
  },
  reads: { "/run/systemd/system": "init: booted with systemd (when systemctl does not answer)" },
  open: ({ env }) => systemd({ env }),
};
