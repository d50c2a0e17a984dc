/** What the apk adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** apk's programs and paths. */
export const NEEDS: AdapterNeeds = {
  run: { apk: "packages: -v info -e NAME, add NAME[=VERSION] | FILE, update; profile: info" },
  read: {
    "/etc/apk/cache": "packages: a package file of an exact version (apk add FILE); under /etc",
  },
};
