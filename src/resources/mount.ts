/**
 * The mount resource: a filesystem mounted at a target, read back from the kernel's mount
 * table, and kept for the next boot in the init's own way (a systemd .mount unit, an
 * OpenRC script: the provider's boot record, carrying the host's marker).
 *
 * What it may mount: a device (`UUID=…`, `LABEL=…` or a path under /dev) of a block
 * filesystem named in {@link BLOCK_FILESYSTEMS}; a tmpfs; a bind of a managed directory.
 * Where: a directory strictly inside a managed root, never one of the host's own paths
 * nor a directory above one (so never /, /proc, /sys, /dev, /run, /tmp nor a root itself),
 * and never a directory someone other than root could swap for a symlink before mount(8)
 * or the init, which are handed the path by name, resolve it (checked at every check and
 * before every mount, as a container's mount sources are).
 *
 * Safe by default: nosuid and nodev unless the declaration says suid or dev; a bind never
 * lifts what the mount holding its source says (ro, nosuid, nodev, noexec); suid or dev is
 * refused on a tmpfs others may write and on a bind of a directory others may write; a
 * filesystem already mounted anywhere is refused (a second view of it would bypass the
 * host's own-path rules: the disk holding / mounted again below /srv holds the host's own
 * files under other names); mount(8) never runs a /sbin/mount.TYPE helper (`-i`).
 *
 * It never mounts over a mount it did not make; release unmounts only what it mounted
 * (after everything inside it is released: `place`), and removes its boot record.
 */
import * as v from "valibot";
import { posix } from "../posix_path.ts";
import { absolutePath, resourceId } from "../declaration/fields.ts";
import { describeError } from "../errors.ts";
import { isWithin, pathProblem } from "../declaration/paths.ts";
import type { MountEntry, MountRequest, MountTable } from "../providers.ts";
import {
  type Change,
  change,
  type Diff,
  type KindContext,
  NoProviderError,
  type Release,
  type ReleaseOptions,
  ResourceError,
  type ResourceKind,
  type RuleScope,
  wants,
} from "./kind.ts";
import { checkManagedPath } from "./_rules.ts";
import { checkFixedPath, expectKind, type FixedPathWords, swappableBy } from "./_fs.ts";

/** Block filesystems a device may be mounted as (kernel filesystems: no mount helper). */
export const BLOCK_FILESYSTEMS = [
  "ext2",
  "ext3",
  "ext4",
  "xfs",
  "btrfs",
  "vfat",
  "exfat",
  "f2fs",
  "iso9660",
  "udf",
  "squashfs",
  "erofs",
  "ntfs3",
] as const;

/** Every `fstype`: a block filesystem, tmpfs, or "bind". */
export const FSTYPES = ["bind", "tmpfs", ...BLOCK_FILESYSTEMS] as const;

/**
 * A path a boot record carries as written: no whitespace, backslash, %, quote or double
 * quote (systemd units, OpenRC scripts and the kernel's table each escape those their
 * own way).
 */
const recordPath = v.pipe(
  absolutePath,
  v.check(
    (p) => !/[\s\\%'"]/.test(p),
    "holds whitespace, a backslash, % or a quote, which a boot record (a systemd unit, an " +
      "OpenRC script) cannot carry as written; mount at a path without them",
  ),
);

/** Resource: a mounted filesystem. */
export const MountSchema = v.strictObject({
  type: v.literal("mount"),
  id: resourceId,
  /** Where: a directory inside a managed root. */
  target: recordPath,
  /** A device (UUID=…, LABEL=…, /dev/…), a tmpfs's name, or the directory a bind shows. */
  source: v.pipe(v.string(), v.minLength(1, "is empty"), v.maxLength(4095, "is too long")),
  fstype: v.picklist(
    FSTYPES,
    `fstype is one of ${FSTYPES.join(", ")} ("bind": the source is a managed directory)`,
  ),
  /** Per-mount flags and the filesystem's own options, as mount(8) takes them. */
  options: v.optional(v.pipe(v.array(v.string()), v.maxLength(32, "holds at most 32 options"))),
});

/** A mount resource. */
export type MountResource = v.InferOutput<typeof MountSchema>;

/** What a mount check can find. */
type MountChange = Change<"mount" | "replace" | "flags" | "options" | "record">;

/** The per-mount flags a declaration may give, each with the word for the other way. */
const FLAG_PAIRS = [["ro", "rw"], ["nosuid", "suid"], ["nodev", "dev"], ["noexec", "exec"]];
const ATIME = ["noatime", "relatime", "strictatime"];
const FLAGS = new Set([...FLAG_PAIRS.flat(), ...ATIME, "nodiratime"]);

/** Options mount(8) reads itself (or that change more than the mount): refused, and why. */
const REFUSED: ReadonlyMap<string, string> = new Map([
  ...["user", "users", "owner", "group", "nouser"].map((o) =>
    [o, "lets users other than root mount and unmount it"] as const
  ),
  ...["loop", "offset", "sizelimit", "encryption"].map((o) =>
    [o, "mounts a file as a device; declare the device"] as const
  ),
  ...["shared", "rshared", "slave", "rslave", "private", "rprivate", "unbindable", "runbindable"]
    .map((o) => [o, "propagation is left as the system sets it"] as const),
  ["bind", 'a bind is declared with "fstype": "bind"'],
  ["rbind", "a recursive bind carries every mount below its source, the host's own included"],
  ["remount", "the host remounts when the declaration changes"],
  ["move", "moving a mount is not a state to declare"],
  ...["defaults", "auto", "noauto", "nofail", "_netdev", "comment", "helper"].map((o) =>
    [o, "the boot record the host writes decides when it is mounted"] as const
  ),
  ...["atime", "norelatime", "nostrictatime", "diratime"].map((o) =>
    [o, "say one of noatime, relatime, strictatime (and nodiratime), or nothing"] as const
  ),
]);

/** A filesystem option: a lower-case name, and a value of characters a record carries. */
const DATA_OPTION = /^[a-z0-9_]+(=[A-Za-z0-9._:@/+-]*)?$/;

/** What a declaration's options say, sorted out. */
interface Declared {
  /** true: ro; false: rw; undefined: not said. */
  ro?: boolean;
  suid?: boolean;
  dev?: boolean;
  exec?: boolean;
  atime?: string;
  nodiratime: boolean;
  data: string[];
}

function declared(options: readonly string[] = []): Declared {
  const out: Declared = { nodiratime: false, data: [] };
  for (const option of options) {
    if (option === "ro" || option === "rw") out.ro = option === "ro";
    else if (option === "suid" || option === "nosuid") out.suid = option === "suid";
    else if (option === "dev" || option === "nodev") out.dev = option === "dev";
    else if (option === "exec" || option === "noexec") out.exec = option === "exec";
    else if (ATIME.includes(option)) out.atime = option;
    else if (option === "nodiratime") out.nodiratime = true;
    else out.data.push(option);
  }
  return out;
}

/** A tmpfs's `mode=` lets nobody but its owner write (the default, 1777, lets everyone). */
function tmpfsPrivate(data: readonly string[]): boolean {
  const mode = data.find((o) => o.startsWith("mode="))?.slice("mode=".length);
  return mode !== undefined && /^[0-7]{1,4}$/.test(mode) && (parseInt(mode, 8) & 0o022) === 0;
}

/** The device forms a block filesystem's source may take. */
const UUID = /^UUID=[0-9A-Za-z-]{1,64}$/;
const LABEL = /^LABEL=[A-Za-z0-9._+:@-]{1,64}$/;
const DEVICE = /^\/dev\/[A-Za-z0-9._+:@/-]+$/;
/** Directories of /dev that others may write (a file there would be mounted through a loop). */
const DEV_WRITABLE = ["/dev/shm", "/dev/mqueue", "/dev/pts", "/dev/fd", "/dev/hugepages"];

function sourceProblem(resource: MountResource): string | undefined {
  const { source, fstype } = resource;
  if (fstype === "tmpfs") {
    return /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(source)
      ? undefined
      : 'a tmpfs\'s source is its name in the mount table (letters, digits, . _ -), e.g. "tmpfs"';
  }
  if (fstype === "bind") return pathProblem(source);
  if (UUID.test(source) || LABEL.test(source)) return undefined;
  if (!source.startsWith("/dev/")) {
    return `names no device: write UUID=…, LABEL=… (letters, digits and . _ + : @ -) or a ` +
      "path under /dev";
  }
  const problem = pathProblem(source);
  if (problem !== undefined) return problem;
  if (!DEVICE.test(source)) return "holds a character no device name has";
  const writable = DEV_WRITABLE.find((dir) => isWithin(source, dir));
  if (writable !== undefined) {
    return `lies in ${writable}, where others may put a file (which mount would mount through ` +
      "a loop device); name the device itself, or its UUID=/LABEL=";
  }
  return undefined;
}

/**
 * Where root keeps its configuration, programs and services' state: a bind onto a target
 * under one of them makes what is in its source root's; a source a user can write is refused.
 */
export const ROOTS_CONFIGURATION = ["/etc", "/usr", "/boot", "/root", "/var/lib", "/srv"];

/** Where users keep what they write: a bind source there is a user's, whoever owns it now. */
export const USERS_PLACES = ["/home", "/tmp", "/var/tmp", "/dev/shm", "/run/user"];

/** The directory of {@link ROOTS_CONFIGURATION} a target lies under, if any. */
export function rootsConfiguration(target: string): string | undefined {
  return ROOTS_CONFIGURATION.find((dir) => isWithin(target, dir));
}

// Long because: the mount kind's rules, one per field and fstype, each with the path of its problem.
function mountRules(resource: MountResource, at: string, scope: RuleScope): void {
  checkManagedPath(resource.target, `${at}.target`, scope);
  const problem = sourceProblem(resource);
  if (problem !== undefined) {
    scope.problems.push({ path: `${at}.source`, message: problem });
  } else if (resource.fstype === "bind") {
    const { source, target } = resource;
    const config = rootsConfiguration(target);
    const users = USERS_PLACES.find((dir) => isWithin(source, dir));
    if (config !== undefined && users !== undefined) {
      scope.problems.push({
        path: `${at}.source`,
        message: `a bind of ${source} (under ${users}, where users keep what they write) onto ` +
          `${target} (under ${config}) is refused: it would make a user's files root's ` +
          "configuration; bind a directory only root can write",
      });
    }
    if (/[\s\\%'"]/.test(source)) {
      scope.problems.push({
        path: `${at}.source`,
        message: "holds whitespace, a backslash, % or a quote, which a boot record cannot " +
          "carry as written",
      });
    } else if (isWithin(source, target)) {
      scope.problems.push({
        path: `${at}.source`,
        message: `${source} lies at or below the target ${target}, which the bind covers`,
      });
    } else checkManagedPath(source, `${at}.source`, scope);
  }
  const seen = new Set<string>();
  const options = resource.options ?? [];
  options.forEach((option, i) => {
    const where = `${at}.options[${i}]`;
    const refused = REFUSED.get(option.split("=")[0]);
    if (seen.has(option)) {
      scope.problems.push({ path: where, message: `"${option}" is given twice` });
    } else if (refused !== undefined) {
      scope.problems.push({ path: where, message: `"${option}" is refused: ${refused}` });
    } else if (FLAGS.has(option.split("=")[0]) && option.includes("=")) {
      scope.problems.push({ path: where, message: `"${option}": a flag takes no value` });
    } else if (!FLAGS.has(option) && !DATA_OPTION.test(option)) {
      scope.problems.push({
        path: where,
        message: `"${option}" is not an option this host passes on: a flag (ro, nosuid, ` +
          "noexec, noatime …) or a filesystem option, name or name=value (lower-case name; " +
          "value of letters, digits and . _ : @ / + -)",
      });
    } else if (!FLAGS.has(option) && resource.fstype === "bind") {
      scope.problems.push({
        path: where,
        message: `"${option}" is a filesystem option; a bind takes only flags (ro, nosuid, ` +
          "nodev, noexec, the atime ones)",
      });
    }
    seen.add(option);
  });
  for (const pair of [...FLAG_PAIRS, ATIME]) {
    const given = pair.filter((word) => seen.has(word));
    if (given.length > 1) {
      scope.problems.push({
        path: `${at}.options`,
        message: `says both ${given.join(" and ")}; say one`,
      });
    }
  }
  const said = declared(options);
  if (resource.fstype === "tmpfs" && (said.suid || said.dev) && !tmpfsPrivate(said.data)) {
    scope.problems.push({
      path: `${at}.options`,
      message: `${said.suid ? "suid" : "dev"} on a tmpfs everyone may write (its mode is 1777 ` +
        "unless mode= says otherwise) lets any local user place what runs as root or reaches " +
        'a device; give "mode=0755" (or stricter) with it, or leave it out',
    });
  }
}

function mountTable(ctx: KindContext): MountTable {
  const table = ctx.providers.mounts;
  if (!table) throw new NoProviderError("mount", "mount(8) and an init (systemd or OpenRC)");
  return table;
}

/** The mount at `target` that nothing else is mounted on (stacked mounts: the last). */
export function topmostAt(entries: readonly MountEntry[], target: string): MountEntry | undefined {
  const here = entries.filter((e) => e.target === target);
  return here.findLast((e) => !here.some((o) => o.parent === e.id)) ?? here.at(-1);
}

/** The mount that holds `path` (the topmost of the deepest mount point above or at it). */
function holding(entries: readonly MountEntry[], path: string): MountEntry | undefined {
  let best: string | undefined;
  for (const e of entries) {
    if (isWithin(path, e.target) && (best === undefined || e.target.length > best.length)) {
      best = e.target;
    }
  }
  return best === undefined ? undefined : topmostAt(entries, best);
}

/** Whether a mount is read-only (its own flag, or its filesystem's). */
const readOnly = (e: MountEntry) => e.options.includes("ro") || e.superOptions.includes("ro");

/** A mount, for people: "tmpfs (tmpfs)", "/dev/vdb (ext4, /www)". */
function shown(e: Pick<MountEntry, "source" | "fstype" | "root">): string {
  return `${e.source} (${e.fstype}${e.root === "/" ? "" : `, ${e.root}`})`;
}

/** The declaration, for people: "UUID=… (ext4)", "a bind of /srv/x". */
function declaredShown(r: MountResource): string {
  return r.fstype === "bind" ? `a bind of ${r.source}` : `${r.source} (${r.fstype})`;
}

const TARGET_WORDS: FixedPathWords = {
  noun: "the mount target",
  by: "mount(8) mounts on it, which it does by name, as the init does again at every boot",
  follower: "mount(8)",
  hint: "mount on a directory that only root can replace: every directory from the managed " +
    "root down to it owned by root and not writable by a group or by everyone",
};
const SOURCE_WORDS: FixedPathWords = {
  noun: "the bind source",
  by: "mount(8) binds it, which it does by name, as the init does again at every boot",
  follower: "mount(8)",
  hint: "bind a directory that only root can replace: every directory from the managed " +
    "root down to it owned by root and not writable by a group or by everyone",
};

async function checkPaths(ctx: KindContext, r: MountResource): Promise<void> {
  await checkFixedPath(ctx, r.target, TARGET_WORDS);
  if (r.fstype === "bind") {
    await checkFixedPath(ctx, r.source, SOURCE_WORDS);
    await checkConfigurationSource(ctx, r);
  }
}

/**
 * A bind onto a target under root's configuration (/etc, /usr, /boot, /root, /var/lib, /srv)
 * must show what only root can write: its source is root's and writable by no group or
 * others (an ACL's mask shows in the group bits). The way to it is fixed already
 * (checkFixedPath), so what the look finds stays so until root changes it. What lies below
 * the source is the source owner's to keep so.
 */
async function checkConfigurationSource(ctx: KindContext, r: MountResource): Promise<void> {
  const config = rootsConfiguration(r.target);
  if (config === undefined) return;
  const info = await ctx.providers.fs.lstat(r.source);
  if (info === null) return; // refused as missing by the check
  const who = info.uid !== 0
    ? `belongs to uid ${info.uid}`
    : (info.mode & 0o002) !== 0
    ? "is writable by everyone"
    : (info.mode & 0o020) !== 0
    ? `is writable by group ${info.gid} (or by a user or group its ACL names)`
    : undefined;
  if (who === undefined) return;
  throw new ResourceError(
    "resource.mount-user-source",
    `a bind of ${r.source} onto ${r.target} (under ${config}) is refused: ${r.source} ${who}, ` +
      "so a local user could write what root reads from there",
    { hint: `bind a directory only root can write (chown root, chmod go-w), or bind it elsewhere` },
  );
}

/**
 * What the host asks mount(8) for: every flag said both ways, nosuid and nodev unless the
 * declaration says suid or dev. A bind takes, for each flag it does not say, what the mount
 * holding its source says, and is refused where it says the looser word (a bind lifting
 * /home's noexec would make what users put there executable).
 */
function requestFor(r: MountResource, entries: readonly MountEntry[]): MountRequest {
  const said = declared(r.options);
  let ro = said.ro === true;
  let noexec = said.exec === false;
  if (r.fstype === "bind") {
    const under = holding(entries, r.source);
    if (under !== undefined) {
      const lifted = [
        said.ro === false && readOnly(under) ? "rw (it is ro)" : undefined,
        said.suid === true && under.options.includes("nosuid") ? "suid (it is nosuid)" : undefined,
        said.dev === true && under.options.includes("nodev") ? "dev (it is nodev)" : undefined,
        said.exec === true && under.options.includes("noexec") ? "exec (it is noexec)" : undefined,
      ].filter((x) => x !== undefined);
      if (lifted.length > 0) {
        throw new ResourceError(
          "resource.mount-lifts-flags",
          `a bind of ${r.source} at ${r.target} may not say ${lifted.join(", ")}: the mount ` +
            `holding it (${under.target}) says otherwise, and a bind must not lift it`,
          { hint: "leave the flag out (the bind then keeps what its source's mount says)" },
        );
      }
      ro ||= said.ro === undefined && readOnly(under);
      noexec ||= said.exec === undefined && under.options.includes("noexec");
    }
  }
  const flags = [
    ro ? "ro" : "rw",
    said.suid ? "suid" : "nosuid",
    said.dev ? "dev" : "nodev",
    noexec ? "noexec" : "exec",
    ...(said.atime ? [said.atime] : []),
    ...(said.nodiratime ? ["nodiratime"] : []),
  ];
  return { source: r.source, target: r.target, fstype: r.fstype, flags, data: said.data };
}

/** suid or dev on a bind of a directory others may write is refused. */
async function checkBindSource(ctx: KindContext, r: MountResource, request: MountRequest) {
  if (r.fstype !== "bind") return;
  const loose = request.flags.filter((f) => f === "suid" || f === "dev");
  if (loose.length === 0) return;
  const info = await ctx.providers.fs.lstat(r.source);
  if (info === null) return;
  const who = info.uid !== 0
    ? `belongs to uid ${info.uid}`
    : swappableBy({ ...info, mode: info.mode & ~0o1000 }, null);
  if (who === undefined) return;
  throw new ResourceError(
    "resource.mount-loose-flags",
    `a bind of ${r.source} with ${loose.join(" and ")} is refused: ${r.source} ${who}, so ` +
      "a local user could put there what would run as root or reach a device",
    { hint: `leave ${loose.join(" and ")} out, or bind a directory only root may write` },
  );
}

/** Whether the mount `e` is the one `r` declares (its source, type and, for a bind, root). */
async function isDeclared(
  table: MountTable,
  r: MountResource,
  e: MountEntry,
  entries: readonly MountEntry[],
): Promise<boolean> {
  if (r.fstype === "bind") {
    const under = holding(entries.filter((o) => o.id !== e.id), r.source);
    if (under === undefined) return false;
    // r.source lies within under.target (holding): what follows it, below the mount's root.
    const below = r.source.slice(under.target === "/" ? 1 : under.target.length + 1);
    const root = posix.join(under.root, below);
    return e.device === under.device && e.root === root;
  }
  if (e.fstype !== r.fstype) return false;
  if (r.fstype === "tmpfs" || r.source.startsWith("/dev/")) return e.source === r.source;
  return e.source === await table.findDevice(r.source);
}

/** What the host remembers of the mount it made at a target, and the options it gave. */
interface MountNote {
  made?: { source: string; fstype: string; root: string };
  data?: string;
}

const noteKey = (target: string) => `mount:${target}`;

function readNote(ctx: KindContext, target: string): MountNote {
  try {
    const note = JSON.parse(ctx.notes.get(noteKey(target)) ?? "{}");
    return note !== null && typeof note === "object" ? note : {};
  } catch {
    return {}; // a note edited by hand means nothing
  }
}

function writeNote(ctx: KindContext, target: string, note: MountNote | undefined): void {
  ctx.notes.set(noteKey(target), note === undefined ? undefined : JSON.stringify(note));
}

const madeIt = (note: MountNote, e: MountEntry) =>
  note.made !== undefined && note.made.source === e.source && note.made.fstype === e.fstype &&
  note.made.root === e.root;

/** The words of the flags a mount has, in the order a request says them. */
function flagsOf(e: MountEntry, want: readonly string[]): string[] {
  const has = (f: string) => e.options.includes(f);
  const words = [
    readOnly(e) ? "ro" : "rw",
    has("nosuid") ? "nosuid" : "suid",
    has("nodev") ? "nodev" : "dev",
    has("noexec") ? "noexec" : "exec",
  ];
  const atime = want.find((f) => ATIME.includes(f));
  if (atime !== undefined) {
    words.push(has("noatime") ? "noatime" : has("relatime") ? "relatime" : "strictatime");
  }
  if (want.includes("nodiratime")) words.push(has("nodiratime") ? "nodiratime" : "diratime");
  return words;
}

/** The mount kind. */
export const mountKind: ResourceKind<MountResource, MountChange> = {
  type: "mount",
  schema: MountSchema,
  needs: "mounts",

  key: (resource) => `mount:${resource.target}`,
  place: (resource) => ({
    path: resource.target,
    encloses: true,
    over: true,
    ...(resource.fstype === "bind" ? { uses: [resource.source] } : {}),
  }),

  rules: mountRules,

  async check(ctx: KindContext, r: MountResource): Promise<Diff<MountChange>> {
    const table = mountTable(ctx);
    await checkPaths(ctx, r);
    const entries = await table.mounts();
    const request = requestFor(r, entries);
    await checkBindSource(ctx, r, request);
    const top = topmostAt(entries, r.target);
    const changes: MountChange[] = [];
    let exists = false;
    const all = [...request.flags, ...request.data].join(",");
    if (top === undefined) {
      changes.push(change("mount", `mount ${declaredShown(r)} at ${r.target} (${all})`));
    } else if (await isDeclared(table, r, top, entries)) {
      exists = true;
      const have = flagsOf(top, request.flags).join(",");
      if (have !== request.flags.join(",")) {
        changes.push(change("flags", `flags ${have} → ${request.flags.join(",")}`));
      }
      const note = readNote(ctx, r.target);
      const data = request.data.join(",");
      if ((note.data ?? "") !== data && (note.data !== undefined || data !== "")) {
        changes.push(
          change(
            "options",
            note.data === undefined
              ? `options ${data} (not yet given by the host)`
              : `options ${note.data || "(none)"} → ${data || "(none)"}`,
          ),
        );
      }
    } else if (madeIt(readNote(ctx, r.target), top)) {
      exists = true;
      changes.push(change("replace", `replace ${shown(top)} with ${declaredShown(r)} (${all})`));
    } else {
      throw new ResourceError(
        "resource.mount-occupied",
        `${r.target} has ${shown(top)} mounted, not ${declaredShown(r)}: the host never ` +
          "mounts over a mount it did not make",
        { hint: "unmount it, or declare the mount as it is" },
      );
    }
    const record = await table.bootRecord(ctx.providers.fs, request);
    if (record.state === "foreign") {
      throw new ResourceError(
        "resource.foreign-boot-record",
        `${record.path} is not a boot record the host wrote (it lacks its marker), so the ` +
          `host neither rewrites nor removes it`,
        { hint: "move it away to let this mount resource keep the mount across reboots" },
      );
    }
    if (record.state !== "current") {
      const what = record.state === "absent" ? "written" : "rewritten";
      changes.push(change("record", `boot record ${record.path} ${what}`));
    }
    return { exists, changes };
  },

  async apply(ctx: KindContext, r: MountResource, found: Diff<MountChange>): Promise<void> {
    const table = mountTable(ctx);
    await checkPaths(ctx, r);
    let entries = await table.mounts();
    const request = requestFor(r, entries);
    await checkBindSource(ctx, r, request);
    const note = readNote(ctx, r.target);
    if (wants(found, "replace")) {
      const top = topmostAt(entries, r.target);
      if (top !== undefined && madeIt(note, top)) await unmount(table, r.target);
      entries = await table.mounts();
    }
    if (wants(found, "mount") || wants(found, "replace")) {
      await mountNow(ctx, table, r, request, entries);
    } else if (wants(found, "flags") || wants(found, "options")) {
      await table.remount(request);
      writeNote(ctx, r.target, { ...note, data: request.data.join(",") });
    }
    if (wants(found, "record")) await table.writeBootRecord(ctx.providers.fs, request);
  },

  async release(
    ctx: KindContext,
    spec: MountResource,
    { created, dryRun }: ReleaseOptions,
  ): Promise<Release> {
    const table = mountTable(ctx);
    const entries = await table.mounts();
    const top = topmostAt(entries, spec.target);
    const note = readNote(ctx, spec.target);
    const ours = created && top !== undefined &&
      (madeIt(note, top) || await isDeclared(table, spec, top, entries));
    const result: Release = !created
      ? {
        outcome: "forgotten",
        detail: "found mounted, not by the host: left mounted (a boot record the host wrote " +
          "for it is removed)",
      }
      : top === undefined
      ? { outcome: "removed", detail: "already unmounted" }
      : ours
      ? { outcome: "removed" }
      : {
        outcome: "forgotten",
        detail: `${shown(top)} is mounted there now, not the host's mount: left in place`,
      };
    if (dryRun) return result;
    if (ours) {
      await checkFixedPath(ctx, spec.target, TARGET_WORDS);
      await unmount(table, spec.target);
    }
    await table.removeBootRecord(ctx.providers.fs, spec.target);
    writeNote(ctx, spec.target, undefined);
    return result;
  },
};

async function unmount(table: MountTable, target: string): Promise<void> {
  try {
    await table.unmount(target);
  } catch (cause) {
    throw new ResourceError(
      "resource.unmount",
      `unmounting ${target} failed: ${describeError(cause)}`,
      {
        hint: "something may still use it (`fuser -vm` names what): stop it, and the next " +
          "apply unmounts it",
        cause,
      },
    );
  }
}

/**
 * Mount `r` at its target (a directory already there), then read the table: a filesystem
 * that was mounted somewhere already is unmounted again and refused.
 *
 * Long because: mount, read the table back, and undo a mount that landed elsewhere: one step that
 * must not be left half done.
 */
async function mountNow(
  ctx: KindContext,
  table: MountTable,
  r: MountResource,
  request: MountRequest,
  before: readonly MountEntry[],
): Promise<void> {
  const fs = ctx.providers.fs;
  const info = await fs.lstat(r.target);
  if (info === null) {
    throw new ResourceError(
      "resource.no-mount-target",
      `the mount target ${r.target} does not exist`,
      {
        hint: "declare it as a directory resource before this mount (the order is stated, " +
          "never derived)",
      },
    );
  }
  expectKind(r.target, info, "directory");
  if (r.fstype === "bind") {
    const source = await fs.lstat(r.source);
    if (source === null) {
      throw new ResourceError(
        "resource.no-bind-source",
        `the bind source ${r.source} does not exist`,
        {
          hint: "declare it as a directory resource before this mount",
        },
      );
    }
    expectKind(r.source, source, "directory");
  } else if (r.fstype !== "tmpfs") {
    const device = r.source.startsWith("/dev/") ? r.source : await table.findDevice(r.source);
    if (device === null) {
      throw new ResourceError(
        "resource.no-device",
        `no device on this machine carries ${r.source}`,
        {
          hint: "attach the disk, or correct the declaration (blkid lists each device's UUID " +
            "and LABEL)",
        },
      );
    }
    const elsewhere = before.find((e) => e.source === device);
    if (elsewhere !== undefined) throw alreadyMounted(r, device, elsewhere);
  }
  await table.mount(request);
  const after = await table.mounts();
  const made = topmostAt(after, r.target);
  if (made === undefined) {
    throw new ResourceError(
      "resource.mount-missing",
      `mount reported success, but the kernel's mount table shows nothing at ${r.target}`,
    );
  }
  if (r.fstype !== "bind") {
    const elsewhere = before.find((e) => e.device === made.device);
    if (elsewhere !== undefined) {
      await unmount(table, r.target);
      throw alreadyMounted(r, made.source, elsewhere);
    }
  }
  writeNote(ctx, r.target, {
    made: { source: made.source, fstype: made.fstype, root: made.root },
    data: request.data.join(","),
  });
}

function alreadyMounted(r: MountResource, device: string, at: MountEntry): ResourceError {
  return new ResourceError(
    "resource.mount-elsewhere",
    `${r.source} (${device}) is refused at ${r.target}: its filesystem is mounted at ` +
      `${at.target} already, and a second view of it would show what lies there (the host's ` +
      "own files, if it holds them) under other names",
    { hint: 'unmount it there first, or bind the directory that is needed (fstype "bind")' },
  );
}
