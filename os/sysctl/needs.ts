/** What the sysctl adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** sysctl (Deno grants /proc/sys to --allow-all only, which the host never has). */
export const NEEDS: AdapterNeeds = {
  run: { sysctl: "sysctl resources: -n KEY, -q -w KEY=VALUE" },
  read: {},
};
