/** What the action runner needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/**
 * The programs named by the shipped bundle's actions (run[0], verify[0]); the build adds
 * them to the set from the bundle itself (packaging/permissions.ts actionPrograms).
 */
export const NEEDS: AdapterNeeds = { run: {}, read: {} };
