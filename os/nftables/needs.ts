/** What the nftables adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** nft. */
export const NEEDS: AdapterNeeds = {
  run: {
    nft: "firewall resources: -c -f - (syntax), -f - (replace a table), -j list table, " +
      "delete table; profile: a scratch table",
  },
  read: {},
};
