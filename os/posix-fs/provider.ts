/** The POSIX file system, by descriptors: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { posixFileSystem } from "./mod.ts";

/**
 * The file system provider: always used. It reads and writes only the managed roots, and
 * the account files below (under /etc, a managed root); it runs `stat` for the directories
 * above its reading roots, `sync -f` for the data of many written files at once, and the host's own program (the permission set's `binary`, which
 * the build adds to allow-run) as a directory's owner.
 */
export const PROVIDER: ProviderDescriptor<"fs"> = {
  folder: "posix-fs",
  port: "fs",
  names: ["posix"],
  builds: ["every"],
  programs: {
    stat: {
      why: "files and directories: who owns the directories above the managed roots (/, /var, " +
        "/usr), which the set does not let the host read",
    },
    sync: {
      why: "files: sync -f, one sync of the file system for the data of many written files " +
        "before they are renamed (else one fsync each)",
    },
  },
  reads: {
    "/etc/passwd": "file resources: user names to ids",
    "/etc/group": "file resources: group names to ids",
  },
  sys: {
    uid: "files and directories: the host's program acting as a directory's owner checks it " +
      "runs as that user",
    gid: "files and directories: the same, for the group",
  },
  open: ({ env, self }) => posixFileSystem({ ...(env ? { env } : {}), ...(self ? { self } : {}) }),
};
