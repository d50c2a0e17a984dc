/** What the pacman adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** pacman's programs and paths. */
export const NEEDS: AdapterNeeds = {
  run: { pacman: "packages: -Q NAME, -S --needed NAME[=VERSION], -U FILE, -Sy; profile: -Q" },
  read: { "/var/cache/pacman/pkg": "packages: a package file of an exact version (pacman -U)" },
};
