/** Users and groups with shadow's tools: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { shadowAccounts } from "./mod.ts";

/**
 * The shadow provider: used where `useradd -D` answered (os/detect/accounts.ts); on Alpine
 * only with its `shadow` package, and then before busybox.
 */
export const PROVIDER: ProviderDescriptor<"accounts"> = {
  folder: "shadow-accounts",
  port: "accounts",
  names: ["shadow"],
  builds: ["every"],
  confine: { capability: "accounts" },
  programs: {
    useradd: { why: "user resources: add a user; profile: its defaults (-D)" },
    usermod: { why: "user resources: change a user's group, home, shell, groups; lock" },
    userdel: { why: "user resources: remove a user the host created (never its home)" },
    groupadd: { why: "group resources: add a group (and one a userdel dropped)" },
    groupdel: { why: "group resources: remove a group the host created" },
  },
  reads: {
    "/etc/shadow": "user resources: whether a password is locked",
  },
  open: ({ env }) => shadowAccounts({ env }),
};
