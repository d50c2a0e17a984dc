/** What the WireGuard adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** wg's and wireguard-go's programs (ip is the profile's already). */
export const NEEDS: AdapterNeeds = {
  run: {
    wg:
      "overlay resources: set key/port/peers, show IF dump; profile: --version, scratch interface",
    "wireguard-go": "overlay resources where the kernel has no WireGuard: make the interface",
  },
  read: {},
};
