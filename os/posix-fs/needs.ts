/** What the file system adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/**
 * No program; it reads and writes only the managed roots and /etc/passwd, /etc/group
 * (under /etc), which every set grants as managed roots.
 */
export const NEEDS: AdapterNeeds = { run: {}, read: {} };
