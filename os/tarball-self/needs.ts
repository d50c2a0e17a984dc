/** What the tarball's own package adapter needs from a permission set (packaging/tarball/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/**
 * No program (it reads the tarball with its own reader, never `tar`); it reads its
 * VERSION file in /usr/local (a managed root; its own files there are deny-write) and
 * writes only the stage in its state directory (/var/lib/mesh-host/upgrade/, under the
 * managed root /var/lib): the launcher unpacks it.
 */
export const NEEDS: AdapterNeeds = { run: {}, read: {} };
