/** What the apk adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** apk's programs and paths. */
export const NEEDS: AdapterNeeds = {
  run: {
    apk: "packages: -v info -e NAME, add NAME[=VERSION] | FILE (its own package with " +
      "--cache-dir STATE/rollback/.apk-cache --update-cache), policy NAME, update, " +
      "upgrade --update-cache; profile: info",
  },
  read: {
    "/etc/apk/cache": "packages: a package file of an exact version (apk add FILE); under /etc",
    "/var/lib/mesh-host/rollback/.apk-cache":
      "packages: whether the launcher made the --cache-dir of the host's own apk add; under /var/lib",
  },
};
