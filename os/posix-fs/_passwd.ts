/**
 * The account databases as the file system adapter needs them: names to ids for the file
 * and directory kinds, and, for acting as a directory's owner, a uid's name, primary group
 * and the groups that list it. Read from /etc/passwd and /etc/group (root's, in /etc),
 * again when they change.
 */

/** One user, as /etc/passwd says. */
export interface PasswdUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * A passwd or group file, read again when it changed. A name found within the last second
 * is answered from memory; otherwise (and always for a name not found, e.g. a user a
 * package just added) the file is checked for changes.
 */
class AccountFile {
  static readonly FRESH_MS = 1000;
  readonly #path: string;
  #stamp = "";
  #checkedAt = -Infinity;
  #lines: string[][] = [];

  constructor(path: string) {
    this.#path = path;
  }

  /** The file's lines, split on ":" (fresh when `fresh`, else at most a second old). */
  lines(fresh: boolean): string[][] {
    if (!fresh && performance.now() - this.#checkedAt < AccountFile.FRESH_MS) return this.#lines;
    let info: Deno.FileInfo;
    try {
      info = Deno.statSync(this.#path);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      this.#lines = [];
      this.#stamp = "";
      return this.#lines;
    }
    this.#checkedAt = performance.now();
    const stamp = `${info.mtime?.getTime()}:${info.size}:${info.ino}`;
    if (stamp === this.#stamp) return this.#lines;
    this.#lines = Deno.readTextFileSync(this.#path).split("\n")
      .filter((l) => l !== "" && !/^[#+-]/.test(l))
      .map((l) => l.split(":"));
    this.#stamp = stamp;
    return this.#lines;
  }
}

const numeric = (s: string | undefined) => s !== undefined && /^[0-9]{1,10}$/.test(s);

/** The users and groups of this machine. */
export class Accounts {
  readonly #passwd: AccountFile;
  readonly #group: AccountFile;

  constructor(passwdPath: string, groupPath: string) {
    this.#passwd = new AccountFile(passwdPath);
    this.#group = new AccountFile(groupPath);
  }

  /** A user name's uid (a number stays a number); `undefined` when unknown. */
  userId(name: string): number | undefined {
    return this.#idOf(this.#passwd, name, 2);
  }

  /** A group name's gid (a number stays a number); `undefined` when unknown. */
  groupId(name: string): number | undefined {
    return this.#idOf(this.#group, name, 2);
  }

  #idOf(file: AccountFile, name: string, column: number): number | undefined {
    if (/^[0-9]+$/.test(name)) return Number(name);
    for (const fresh of [false, true]) {
      const line = file.lines(fresh).find((l) => l[0] === name && numeric(l[column]));
      if (line) return Number(line[column]);
    }
    return undefined;
  }

  /** The first user of /etc/passwd with this uid. */
  user(uid: number): PasswdUser | undefined {
    for (const fresh of [false, true]) {
      const line = this.#passwd.lines(fresh).find((l) =>
        numeric(l[2]) && Number(l[2]) === uid && numeric(l[3])
      );
      if (line) return { name: line[0], uid, gid: Number(line[3]) };
    }
    return undefined;
  }

  /** A uid in words: "alice (uid 1000)", or "uid 1234" when no account has it. */
  nameOf(uid: number): string {
    const user = this.user(uid);
    return user === undefined ? `uid ${uid}` : `${user.name} (uid ${uid})`;
  }

  /** A gid's name, or the number. */
  groupName(gid: number): string {
    const line = this.#group.lines(false).find((l) => numeric(l[2]) && Number(l[2]) === gid);
    return line?.[0] ?? String(gid);
  }

  /** Whether `user` is in the group `gid`: its primary group, or listed in /etc/group. */
  isMember(user: PasswdUser, gid: number): boolean {
    if (user.gid === gid) return true;
    return this.#group.lines(true).some((l) =>
      numeric(l[2]) && Number(l[2]) === gid && (l[3] ?? "").split(",").includes(user.name)
    );
  }
}
