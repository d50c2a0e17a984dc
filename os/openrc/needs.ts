/** What the OpenRC adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** OpenRC's programs and paths. */
export const NEEDS: AdapterNeeds = {
  run: {
    "rc-service": "services: --exists NAME, NAME status/start/stop",
    "rc-update": "services: show RUNLEVEL, add/del NAME RUNLEVEL",
  },
  read: {},
};
