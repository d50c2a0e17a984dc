/** What the systemd adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** systemd's programs and paths. */
export const NEEDS: AdapterNeeds = {
  run: {
    systemctl:
      "services: show/enable/disable/start/stop/restart/reload/daemon-reload; profile: show",
  },
  read: {},
};
