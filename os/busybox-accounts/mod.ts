/**
 * Users and groups with busybox's applets (Alpine): `adduser`, `addgroup`, `deluser`,
 * `delgroup`, `passwd -l`. `adduser -D -H`: no password (locked), no home made; `deluser`
 * without `--remove-home`. busybox has no usermod: supplementary groups are changed one by
 * one (`addgroup USER GROUP`, `delgroup USER GROUP`), and a change of an existing user's
 * primary group, home or shell is refused with what to do (install Alpine's `shadow`,
 * whose usermod the host then uses). deluser and delgroup read their names as argv[1] and
 * argv[2] (a `--` there would be taken for a name), so they get none; checkName has
 * refused a leading "-" before anything runs. `root` (tests) names where the databases are read;
 * the tools reach it through `via` (e.g. `chroot ROOT`).
 */
import type { AccountTools } from "../../src/providers.ts";
import { mustRun, type RunVia } from "../_run.ts";
import {
  accountFiles,
  AccountToolError,
  checkId,
  checkName,
  removeKeepingGroup,
} from "../_account_files.ts";

/** Options of {@link busyboxAccounts}. */
export interface BusyboxAccountsOptions extends RunVia {
  /** Where the tools' databases are, seen from here (tests: the chroot `via` enters). */
  root?: string;
  timeoutMs?: number;
}

/**
 * The busybox adapter.
 *
 * @example
 * ```ts
 * await busyboxAccounts().addGroup({ name: "app", system: true });
 * ```
 *
 * Long because: a provider is one object of verbs over busybox's account tools; each verb is short.
 */
export function busyboxAccounts(options: BusyboxAccountsOptions = {}): AccountTools {
  const base = { env: options.env, via: options.via, timeoutMs: options.timeoutMs ?? 60_000 };
  const files = accountFiles(options.root);
  const run = (argv: string[]) => mustRun(argv, base);
  const join = (user: string, group: string) =>
    run(["addgroup", "--", checkName("user", user), checkName("group", group)]);
  const leave = (user: string, group: string) =>
    run(["delgroup", checkName("user", user), checkName("group", group)]);
  const addGroup = async (name: string, gid: number | undefined, system: boolean) => {
    const args = ["addgroup", ...(system ? ["-S"] : [])];
    if (gid !== undefined) args.push("-g", checkId("gid", gid));
    await run([...args, "--", checkName("group", name)]);
  };
  return {
    name: "busybox",
    files,
    addGroup: ({ name, gid, system }) => addGroup(name, gid, system),
    async removeGroup(name) {
      await run(["delgroup", checkName("group", name)]);
    },
    async addUser(user) {
      // Every name checked before the first tool runs (its groups are joined after it).
      user.groups.forEach((g) => checkName("group", g));
      const args = ["adduser", "-D", "-H", "-G", checkName("group", user.group)];
      if (user.system) args.push("-S");
      if (user.uid !== undefined) args.push("-u", checkId("uid", user.uid));
      if (user.home !== undefined) args.push("-h", user.home);
      if (user.shell !== undefined) args.push("-s", user.shell);
      await run([...args, "--", checkName("user", user.name)]);
      for (const group of user.groups) if (group !== user.group) await join(user.name, group);
    },
    async modifyUser(name, change) {
      const fields = (["group", "home", "shell"] as const).filter((f) => change[f] !== undefined);
      if (fields.length > 0) {
        throw new AccountToolError(
          "accounts.cannot-modify",
          `busybox cannot change the ${fields.join(", ")} of the existing user "${name}" ` +
            "(it has no usermod)",
          {
            hint: "install Alpine's shadow package (apk add shadow) and restart the host: it " +
              "then uses shadow's usermod; or remove the user by hand so the host adds it again",
          },
        );
      }
      for (const group of change.groups?.remove ?? []) await leave(name, group);
      for (const group of change.groups?.add ?? []) await join(name, group);
    },
    async lockUser(name) {
      await run(["passwd", "-l", "--", checkName("user", name)]);
    },
    async removeUser(name) {
      checkName("user", name);
      await removeKeepingGroup(
        files,
        name,
        () => run(["deluser", name]),
        async (group) => {
          await addGroup(group.name, group.gid, false);
          for (const member of group.members) await join(member, group.name);
        },
      );
    },
  };
}
