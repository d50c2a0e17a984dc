/** What the OpenRC adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** OpenRC's programs and paths. */
export const NEEDS: AdapterNeeds = {
  run: {
    "rc-service": "services: --exists NAME, NAME status/start/stop/restart/reload",
    "rc-update": "services: show RUNLEVEL, add/del NAME RUNLEVEL",
  },
  read: {
    "/run": "services: a started daemon's pid, to prove a restart (OpenRC's records in " +
      "/run/openrc/daemons and /run/openrc/options, and the pidfile they name under /run)",
  },
};
