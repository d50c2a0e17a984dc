/** Users and groups with busybox's applets: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { busyboxAccounts } from "./mod.ts";

/** The busybox provider: used where busybox's adduser answered (os/detect/accounts.ts). */
export const PROVIDER: ProviderDescriptor<"accounts"> = {
  folder: "busybox-accounts",
  port: "accounts",
  names: ["busybox"],
  builds: ["alpine", "tarball", "checkout"],
  confine: { capability: "accounts" },
  programs: {
    adduser: { why: "user resources: add a user; profile: is it busybox's (--help)" },
    addgroup: { why: "group resources: add a group; user resources: add a user to a group" },
    deluser: { why: "user resources: remove a user the host created (never its home)" },
    delgroup: {
      why: "group resources: remove a group; user resources: take a user out of a group",
    },
    passwd: { why: "user resources: lock a password (-l)" },
  },
  reads: {
    "/etc/shadow": "user resources: whether a password is locked",
  },
  open: ({ env }) => busyboxAccounts({ env }),
};
