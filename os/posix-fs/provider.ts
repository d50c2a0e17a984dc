/** The POSIX file system, by descriptors: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { posixFileSystem } from "./mod.ts";

/**
 * The file system provider: always used. No program; it reads and writes only the managed
 * roots, and the account files below (under /etc, a managed root).
 */
export const PROVIDER: ProviderDescriptor<"fs"> = {
  folder: "posix-fs",
  port: "fs",
  names: ["posix"],
  builds: ["every"],
  reads: {
    "/etc/passwd": "file resources: user names to ids",
    "/etc/group": "file resources: group names to ids",
  },
  // Between its verbs it waits in the state directory when the process was started where the
  // permission set does not let it go back (a service in /).
  open: ({ stateDir }) => posixFileSystem(stateDir ? { home: stateDir } : {}),
};
