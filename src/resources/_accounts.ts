/**
 * What the user and group kinds share: their name and id fields, the ids and names
 * the host never manages, the account databases read back through the file-system
 * adapter (never a tool's exit code), and the notes that keep an allocated id stable.
 */
import * as v from "valibot";
import { pathProblem } from "../declaration/paths.ts";
import type { AccountTools } from "../providers.ts";
import { type KindContext, NoProviderError, ResourceError } from "./kind.ts";

/**
 * User and group names both shadow's and busybox's tools accept, as their defaults
 * check them: a lowercase letter or _, then lowercase letters, digits, _ and -, at most
 * 32 characters. So never an option (-x), a colon or a newline (the databases' separators).
 */
export const ACCOUNT_NAME = /^[a-z_][a-z0-9_-]{0,31}$/;

/** Accounts a declaration may never name: root's, and the OS's "nobody". */
export const RESERVED_NAMES: ReadonlySet<string> = new Set(["root", "nobody", "nogroup"]);

/**
 * Ids below this belong to the OS's base accounts (Debian's base-passwd, Arch's
 * filesystem package, Alpine's baselayout): never declared, and an account found with
 * one is never managed.
 */
export const FIRST_MANAGED_ID = 100;

/** 65534 is nobody/nogroup; 65535 is the 16-bit "no id"; 4294967295 is chown's "unchanged". */
const RESERVED_IDS: ReadonlySet<number> = new Set([65534, 65535]);

/** Why an id is never managed, or `undefined` when it may be. */
export function reservedId(id: number): string | undefined {
  if (id === 0) return "0 is root's";
  if (id < FIRST_MANAGED_ID) {
    return `ids below ${FIRST_MANAGED_ID} belong to the OS's own accounts (its base package)`;
  }
  if (RESERVED_IDS.has(id)) return `${id} is the OS's "nobody" (or the 16-bit "no id")`;
  return undefined;
}

/**
 * Groups whose members hold root, or read what root keeps secret: a declaration from the
 * link or a file may not give an account one (as primary or supplementary group) unless
 * this machine's host.json names it in `permit.groups`; the bundle may. "root" itself is
 * never given ({@link RESERVED_NAMES}). Each with why, in words that end "… is refused: …".
 */
export const ROOT_GROUPS: ReadonlyMap<string, string> = new Map([
  ["wheel", "su and sudo give its members root on most distributions"],
  ["sudo", "sudo gives its members root"],
  ["admin", "sudo gives its members root (older Ubuntu)"],
  ["adm", "its members read the system's logs, which hold what root's programs write"],
  ["shadow", "its members read every password hash (/etc/shadow)"],
  ["disk", "its members write every disk, beneath every file's permissions"],
  ["kmem", "its members read the kernel's memory"],
  ["docker", "its members run containers as root through docker's socket"],
  ["lxd", "its members run containers as root through LXD"],
  ["incus-admin", "its members run containers as root through Incus"],
  ["libvirt", "its members run virtual machines with root's disks"],
  ["systemd-journal", "its members read every log in the journal"],
  ["staff", "its members write /usr/local (Debian), which root's PATH searches first"],
]);

/** Why `name` confers root (see {@link ROOT_GROUPS}), or undefined. */
export function confersRoot(name: string): string | undefined {
  return ROOT_GROUPS.get(name);
}

/** Where a system's first ordinary user id is said, and what it is when not said. */
export const UID_MIN_DEFAULT = 1000;

/** UID_MIN of a login.defs text (shadow's; busybox systems have none: 1000). */
export function uidMin(loginDefs: string | undefined): number {
  const m = /^[ \t]*UID_MIN[ \t]+([0-9]{1,10})[ \t]*$/m.exec(loginDefs ?? "");
  return m ? Number(m[1]) : UID_MIN_DEFAULT;
}

/** A user or group name (the one declared, or one referred to). */
/** A user or group name (the one declared, or one referred to). */
export const accountName = (what: string) =>
  v.pipe(
    v.string(),
    v.regex(
      ACCOUNT_NAME,
      `${what} is a name of lowercase letters, digits, _ and -, starting with a letter or _, ` +
        "at most 32 characters (as shadow's and busybox's tools accept)",
    ),
    v.check(
      (name) => !RESERVED_NAMES.has(name),
      (i) =>
        `${what} "${i.input}" is the OS's own (${
          [...RESERVED_NAMES].join(", ")
        }); the host never ` +
        "manages it, nor gives an account root's group",
    ),
  );

/** A declared uid or gid. */
export const accountId = (what: string) =>
  v.pipe(
    v.number(),
    v.safeInteger(`${what} is an integer`),
    v.maxValue(4294967294, `${what} is at most 4294967294`),
    v.check((id) => reservedId(id) === undefined, (i) =>
      `${what} ${i.input}: ${reservedId(i.input as number)}`),
  );

/** A home directory or shell: an absolute, normalised path without a colon. */
export const accountPath = (what: string) =>
  v.pipe(
    v.string(),
    v.maxLength(255, `${what} is at most 255 characters`),
    v.check((p) => !p.includes(":"), `${what} holds no colon (the databases' separator)`),
    v.check(
      (p) => (what === "home" && p === "/") || pathProblem(p) === undefined,
      (i) => `${what} ${pathProblem(i.input as string)}`,
    ),
  );

/** The files the account tools write: a `file` resource on one beside accounts is refused. */
export const ACCOUNT_FILES: readonly string[] = [
  "/etc/passwd",
  "/etc/shadow",
  "/etc/group",
  "/etc/gshadow",
  "/etc/subuid",
  "/etc/subgid",
];

/** The keys of {@link ACCOUNT_FILES}: what an account resource touches besides its own key. */
export const ACCOUNT_FILE_KEYS: readonly string[] = ACCOUNT_FILES.map((p) => `path:${p}`);

/** One user as /etc/passwd (and /etc/shadow) hold it. */
export interface UserEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
  /** The password field of /etc/shadow (of /etc/passwd when shadow has no line). */
  password: string;
}

/** One group as /etc/group holds it. */
export interface GroupEntry {
  name: string;
  gid: number;
  members: string[];
}

/** The account databases, as read now. */
export interface AccountDatabases {
  users: Map<string, UserEntry>;
  groups: Map<string, GroupEntry>;
}

/** The account tools, or a no-provider error. */
export function accountTools(ctx: KindContext, type: string): AccountTools {
  const tools = ctx.providers.accounts;
  if (!tools) {
    throw new NoProviderError(type, "account tools (shadow's useradd or busybox's adduser)");
  }
  return tools;
}

/** Read a database through the file-system adapter (descriptor, no symlink); "" when missing. */
async function readDatabase(ctx: KindContext, path: string): Promise<string> {
  try {
    const { data } = await ctx.providers.fs.readFile(path);
    return new TextDecoder().decode(data ?? new Uint8Array());
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "";
    throw error;
  }
}

/** Lines split on ":"; blank lines, comments and NIS lines ("+", "-") skipped. */
function entries(text: string): string[][] {
  return text.split("\n").filter((l) => l !== "" && !/^[#+-]/.test(l)).map((l) => l.split(":"));
}

const numeric = (s: string | undefined) => s !== undefined && /^[0-9]{1,10}$/.test(s);

/** Read /etc/passwd, /etc/group and /etc/shadow (where the tools keep them) back. */
export async function readAccounts(
  ctx: KindContext,
  tools: AccountTools,
): Promise<AccountDatabases> {
  const [passwd, group, shadow] = await Promise.all([
    readDatabase(ctx, tools.files.passwd),
    readDatabase(ctx, tools.files.group),
    readDatabase(ctx, tools.files.shadow),
  ]);
  const passwords = new Map<string, string>();
  for (const [name, password] of entries(shadow)) {
    if (!passwords.has(name)) passwords.set(name, password ?? "");
  }
  const users = new Map<string, UserEntry>();
  for (const [name, password, uid, gid, , home, shell] of entries(passwd)) {
    if (users.has(name) || !numeric(uid) || !numeric(gid)) continue;
    users.set(name, {
      name,
      uid: Number(uid),
      gid: Number(gid),
      home: home ?? "",
      shell: shell ?? "",
      password: passwords.get(name) ?? password ?? "",
    });
  }
  const groups = new Map<string, GroupEntry>();
  for (const [name, , gid, members] of entries(group)) {
    if (groups.has(name) || !numeric(gid)) continue;
    groups.set(name, {
      name,
      gid: Number(gid),
      members: (members ?? "").split(",").filter(Boolean),
    });
  }
  return { users, groups };
}

/** Whether a password field can never be used to log in: the tools' lock ("!") or "*". */
export function isLocked(password: string): boolean {
  return password.startsWith("!") || password.startsWith("*");
}

/** The note holding the id the host recorded for an account (kept stable across a re-creation). */
export const idNote = (type: "user" | "group", name: string): string =>
  `${type}:${name}:${type === "user" ? "uid" : "gid"}`;

/** The id recorded for an account, if any. */
export function recordedId(ctx: KindContext, type: "user" | "group", name: string) {
  const note = ctx.notes.get(idNote(type, name));
  return note !== undefined && numeric(note) ? Number(note) : undefined;
}

/** Refuse an account found with an id the host never manages (the OS's own). */
export function refuseOsAccount(type: "user" | "group", name: string, id: number): void {
  const why = reservedId(id);
  if (why === undefined) return;
  throw new ResourceError(
    `resource.${type}-reserved`,
    `${type} "${name}" exists with ${type === "user" ? "uid" : "gid"} ${id}: ${why}, and the ` +
      "host never manages those",
    { hint: `declare another name; the OS's own accounts are left to it` },
  );
}

/**
 * Refuse an existing account whose id is not the declared (or recorded) one: the host never
 * changes an existing account's id (every file it owns would keep the old one).
 */
export function refuseOtherId(
  type: "user" | "group",
  name: string,
  found: number,
  want: number | undefined,
  declared: boolean,
): void {
  if (want === undefined || found === want) return;
  const field = type === "user" ? "uid" : "gid";
  throw new ResourceError(
    `resource.${type}-id`,
    `${type} "${name}" has ${field} ${found}, but ${
      declared ? "the declaration says" : "the host recorded"
    } ${want}: the host never changes an existing account's id (its files would keep the old one)`,
    {
      hint: declared
        ? `declare ${field} ${found}, or change it by hand (and the owner of its files)`
        : `someone made "${name}" again with another id; remove it by hand so the host makes ` +
          `it again with ${want}, or drop it from the declaration and declare it again`,
    },
  );
}
