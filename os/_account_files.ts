/**
 * What the two account adapters (shadow-accounts/, busybox-accounts/) share: the names
 * they refuse before running anything, and how a group of a removed user's name is
 * kept. Verbs only; the user and group kinds decide.
 */
import { HostError } from "../src/errors.ts";
import type { AccountFiles } from "../src/providers.ts";

/** User and group names both suites accept: what the kinds' schema accepts too. */
export const ACCOUNT_NAME = /^[a-z_][a-z0-9_-]{0,31}$/;

/** Refuse a name no tool should see (an option, a colon, a newline, too long …). */
export function checkName(what: string, name: string): string {
  if (!ACCOUNT_NAME.test(name)) {
    throw new TypeError(`${what} "${name}" is not a user or group name the host passes to a tool`);
  }
  return name;
}

/** Refuse an id that is not a plain number of the range the kinds accept. */
export function checkId(what: string, id: number): string {
  if (!Number.isSafeInteger(id) || id < 1 || id > 4294967294) {
    throw new TypeError(`${what} ${id} is not an id the host passes to a tool`);
  }
  return String(id);
}

/** The account databases under `root` ("" for the machine's own). */
export function accountFiles(root = ""): AccountFiles {
  return { passwd: `${root}/etc/passwd`, group: `${root}/etc/group`, shadow: `${root}/etc/shadow` };
}

/** One line of /etc/group. */
export interface GroupLine {
  name: string;
  gid: number;
  members: string[];
}

/** The group of that name in the group file, or `null`. */
export function readGroup(files: AccountFiles, name: string): GroupLine | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(files.group);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  for (const line of text.split("\n")) {
    const [entry, , gid, members] = line.split(":");
    if (entry === name && gid !== undefined && /^[0-9]+$/.test(gid)) {
      return { name, gid: Number(gid), members: (members ?? "").split(",").filter(Boolean) };
    }
  }
  return null;
}

/**
 * Remove a user with `remove`, keeping the group of its name: shadow's userdel (with
 * USERGROUPS_ENAB) and busybox's deluser drop that group with the user; the host adds
 * it back with its id and its other members (`add`), since a group is a resource of its
 * own, and one the host found is never removed.
 */
export async function removeKeepingGroup(
  files: AccountFiles,
  name: string,
  remove: () => Promise<unknown>,
  add: (group: GroupLine) => Promise<unknown>,
): Promise<void> {
  const before = readGroup(files, name);
  await remove();
  if (before === null || readGroup(files, name) !== null) return;
  await add({ ...before, members: before.members.filter((m) => m !== name) });
}

/** The tool cannot make this change (busybox has no usermod). */
export class AccountToolError extends HostError {}
