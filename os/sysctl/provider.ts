/** Kernel settings with sysctl: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { sysctl } from "./mod.ts";

/** The sysctl provider: always used (Deno grants /proc/sys to --allow-all only). */
export const PROVIDER: ProviderDescriptor<"sysctl"> = {
  folder: "sysctl",
  port: "sysctl",
  names: ["sysctl"],
  builds: ["every"],
  programs: {
    sysctl: { why: "sysctl resources: read and write one setting (procps or busybox)" },
  },
  open: ({ env }) => sysctl({ env }),
};
