/** nftables, one table per firewall resource: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { nftables } from "./mod.ts";

/** The nftables provider; its capability is detected by ./detect.ts. */
export const PROVIDER: ProviderDescriptor<"firewall"> = {
  folder: "nftables",
  port: "firewall",
  names: ["nftables"],
  builds: ["every"],
  confine: { capability: "nftables" },
  programs: {
    nft: { why: "firewall resources: check, replace, read one table; profile: a scratch table" },
  },
  open: ({ env }) => nftables({ env }),
};
