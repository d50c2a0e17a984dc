/**
 * Users and groups with shadow's tools (Arch, Debian; Alpine with its `shadow` package):
 * `useradd`, `usermod`, `userdel`, `groupadd`, `groupdel`. Never `-m` or `-r` (no home
 * made or removed), never a password (useradd leaves the account locked), never
 * `usermod -u` or `groupmod -g`. Every name goes after `--`; names and ids are checked
 * again here. `prefix` (tests) points every tool and the databases at another root
 * (`--prefix`, shadow's own option: no chroot, the files under that root).
 */
import type { AccountTools } from "../../src/providers.ts";
import { mustRun, type RunVia } from "../_run.ts";
import { accountFiles, checkId, checkName, removeKeepingGroup } from "../_account_files.ts";

/** Options of {@link shadowAccounts}. */
export interface ShadowAccountsOptions extends RunVia {
  /** Another root holding etc/passwd … (tests); the machine's own when absent. */
  prefix?: string;
  timeoutMs?: number;
}

/**
 * The shadow adapter.
 *
 * @example
 * ```ts
 * await shadowAccounts().addGroup({ name: "app", system: true });
 * ```
 */
export function shadowAccounts(options: ShadowAccountsOptions = {}): AccountTools {
  const base = { env: options.env, via: options.via, timeoutMs: options.timeoutMs ?? 60_000 };
  const prefix = options.prefix === undefined ? [] : ["--prefix", options.prefix];
  const files = accountFiles(options.prefix);
  const run = (tool: string, args: string[], name: string) =>
    mustRun([tool, ...prefix, ...args, "--", name], base);
  const groupList = (names: readonly string[]) => names.map((g) => checkName("group", g)).join(",");
  return {
    name: "shadow",
    files,
    async addGroup({ name, gid, system }) {
      checkName("group", name);
      const args = [...(system ? ["--system"] : [])];
      if (gid !== undefined) args.push("--gid", checkId("gid", gid));
      await run("groupadd", args, name);
    },
    async removeGroup(name) {
      await run("groupdel", [], checkName("group", name));
    },
    async addUser(user) {
      checkName("user", user.name);
      // No home made, no group of the user's name made: the declaration names its group.
      const args = ["--no-create-home", "--no-user-group", "--gid", checkName("group", user.group)];
      if (user.system) args.push("--system");
      if (user.uid !== undefined) args.push("--uid", checkId("uid", user.uid));
      if (user.groups.length > 0) args.push("--groups", groupList(user.groups));
      if (user.home !== undefined) args.push("--home-dir", user.home);
      if (user.shell !== undefined) args.push("--shell", user.shell);
      await run("useradd", args, user.name);
    },
    async modifyUser(name, change) {
      checkName("user", name);
      const args: string[] = [];
      if (change.group !== undefined) args.push("--gid", checkName("group", change.group));
      if (change.home !== undefined) args.push("--home", change.home);
      if (change.shell !== undefined) args.push("--shell", change.shell);
      if (change.groups !== undefined) args.push("--groups", groupList(change.groups.all));
      if (args.length > 0) await run("usermod", args, name);
    },
    async lockUser(name) {
      await run("usermod", ["--lock"], checkName("user", name));
    },
    async removeUser(name) {
      checkName("user", name);
      await removeKeepingGroup(
        files,
        name,
        () => run("userdel", [], name),
        (group) =>
          run("groupadd", [
            "--gid",
            checkId("gid", group.gid),
            ...(group.members.length ? ["--users", groupList(group.members)] : []),
          ], group.name),
      );
    },
  };
}
