/**
 * Mounts on OpenRC: made with mount(8) (busybox's on Alpine, util-linux's elsewhere) and
 * read from the kernel's mount table (os/_mount.ts), and kept for the next boot as an
 * OpenRC script per mount, `/etc/init.d/nox-mount-<target>`, in the boot runlevel. A
 * script, not /etc/fstab lines: OpenRC mounts fstab with its localmount service, which
 * Alpine has and Debian's OpenRC does not, and which is skipped in containers
 * (`keyword -docker -lxc …`); a script is the init's own way everywhere OpenRC runs, is a
 * file the host owns whole (never a shared file edited between markers), and runs exactly
 * the commands the host runs (a bind's flags set by a remount, which busybox needs).
 */
import type { BootRecord, FileSystem, MountRequest, MountTable } from "../../src/providers.ts";
import { mustRun, type RunVia } from "../_run.ts";
import {
  ancestorsOf,
  BOOT_RECORD_MARKER,
  mountCommands,
  type MountPrograms,
  mountRuntime,
  recordSafe,
} from "../_mount.ts";
import { ForeignBootRecord, readRecord, stateOf, writeRecord } from "../_boot_record.ts";

/** How to reach mount(8) and OpenRC. */
export interface OpenrcMountOptions extends MountPrograms {
  /** rc-update (default "rc-update"). */
  rcUpdate?: string;
  /** Where init scripts live (default /etc/init.d). */
  scriptDir?: string;
  /** Where runlevels live (default /etc/runlevels). */
  runlevelDir?: string;
  /** Extra environment, and an argv prefix to run the tools elsewhere (tests). */
  env?: Record<string, string>;
  via?: readonly string[];
}

/** The runlevel the scripts are added to: OpenRC starts it before the default one. */
export const MOUNT_RUNLEVEL = "boot";

/** What every script's name starts with. */
const PREFIX = "nox-mount-";

/**
 * The name of the OpenRC script for a mount target: "nox-mount-", then the path without
 * its leading "/", each "/" written "-" and every byte but a letter or digit written _NN
 * (hex): one name per path, and nothing in it that OpenRC reads specially (a "." makes
 * openrc-run source conf.d/ by the name's first part).
 *
 * @example
 * ```ts
 * openrcMountName("/srv/my-data"); // "nox-mount-srv-my_2ddata"
 * ```
 */
export function openrcMountName(target: string): string {
  const bytes = new TextEncoder().encode(target.replace(/^\/+/, ""));
  let out = PREFIX;
  for (const b of bytes) {
    const c = String.fromCharCode(b);
    if (b === 0x2f) out += "-";
    else if (b < 0x80 && /[A-Za-z0-9]/.test(c)) out += c;
    else out += `_${b.toString(16).padStart(2, "0")}`;
  }
  if (out.length > 255) {
    throw new RangeError(
      `the OpenRC script for ${target} would be named with more than 255 characters; ` +
        "mount at a shorter path",
    );
  }
  return out;
}

/** One argv as a line of POSIX sh: every word single-quoted. */
function shellLine(argv: readonly string[]): string {
  return argv.map((word) => `'${recordSafe("a word of the mount command", word)}'`).join(" ");
}

/**
 * The script's text: start mounts (unless something is mounted there already), stop
 * unmounts; ordered after localmount and after the scripts of every mount above its target
 * or its bind source (names of scripts that do not exist are ignored by OpenRC).
 */
export function mountScript(request: MountRequest): string {
  const target = request.target;
  const above = [...ancestorsOf(target)];
  if (request.fstype === "bind") above.push(request.source, ...ancestorsOf(request.source));
  const after = ["localmount", ...[...new Set(above)].sort().map(openrcMountName)];
  const commands = mountCommands(request).map(shellLine);
  const quoted = `'${recordSafe("mount target", target)}'`;
  return [
    "#!/sbin/openrc-run",
    BOOT_RECORD_MARKER,
    `description="Mount ${target} (nox-mesh-host)"`,
    "",
    "depend() {",
    `\tafter ${after.join(" ")}`,
    "\tbefore netmount",
    "}",
    "",
    "start() {",
    `\tebegin "Mounting ${target}"`,
    `\tif mountinfo -q ${quoted}; then`,
    "\t\teend 0",
    "\t\treturn 0",
    "\tfi",
    `\t${commands.join(" && \\\n\t\t")}`,
    "\teend $?",
    "}",
    "",
    "stop() {",
    `\tebegin "Unmounting ${target}"`,
    `\t! mountinfo -q ${quoted} || umount -- ${quoted}`,
    "\teend $?",
    "}",
    "",
  ].join("\n");
}

/**
 * The OpenRC mount provider.
 *
 * @example
 * ```ts
 * const mounts = openrcMounts();
 * await mounts.bootRecord(fs, request); // { state: "absent", path: "/etc/init.d/nox-mount-srv-data" }
 * ```
 */
export function openrcMounts(options: OpenrcMountOptions = {}): MountTable {
  const run: RunVia = { env: options.env, via: options.via };
  const runtime = mountRuntime(options, run);
  const rcUpdate = options.rcUpdate ?? "rc-update";
  const scriptDir = options.scriptDir ?? "/etc/init.d";
  const runlevelDir = options.runlevelDir ?? "/etc/runlevels";
  const scriptOf = (target: string) => `${scriptDir}/${openrcMountName(target)}`;
  const linkOf = (target: string) => `${runlevelDir}/${MOUNT_RUNLEVEL}/${openrcMountName(target)}`;
  /** In the boot runlevel: rc-update's link is there. */
  const enabled = async (fs: FileSystem, target: string) =>
    (await fs.lstat(linkOf(target)))?.kind === "symlink";

  async function bootRecord(fs: FileSystem, request: MountRequest): Promise<BootRecord> {
    const path = scriptOf(request.target);
    const found = await readRecord(fs, path);
    const on = found.state === "ours" && await enabled(fs, request.target);
    return { state: stateOf(found, mountScript(request), on), path };
  }

  return {
    name: "openrc",
    ...runtime,
    bootRecord,
    async writeBootRecord(fs, request) {
      const path = scriptOf(request.target);
      const found = await readRecord(fs, path);
      if (found.state === "foreign") throw new ForeignBootRecord(path, found.why);
      const text = mountScript(request);
      if (found.state !== "ours" || found.text !== text) await writeRecord(fs, path, text, 0o755);
      if (!await enabled(fs, request.target)) {
        await mustRun([rcUpdate, "add", openrcMountName(request.target), MOUNT_RUNLEVEL], run);
      }
    },
    async removeBootRecord(fs, target) {
      const path = scriptOf(target);
      const found = await readRecord(fs, path);
      if (found.state !== "ours") return found.state;
      if (await enabled(fs, target)) {
        await mustRun([rcUpdate, "del", openrcMountName(target), MOUNT_RUNLEVEL], run);
      }
      await fs.remove(path, "file");
      await fs.syncDirectory(scriptDir);
      return "removed";
    },
  };
}
