/** What the tarball's own package adapter needs from a permission set (packaging/tarball/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/**
 * No program (it unpacks with its own reader, never `tar`); it reads and writes only
 * /usr/local (a managed root): its VERSION file, the staged copies beside its files and
 * the files themselves, which the tarball set therefore does not deny (see its comment).
 */
export const NEEDS: AdapterNeeds = { run: {}, read: {} };
