/**
 * Mounts on systemd: made with mount(8) and read from the kernel's mount table
 * (os/_mount.ts), and kept for the next boot as a .mount unit in /etc/systemd/system,
 * named from its target by systemd's path escaping (systemd.unit(5), `systemd-escape
 * --path`), enabled for local-fs.target (wanted, not required: a mount that fails at boot
 * fails its own unit and never stops the machine from booting, nor the host from
 * starting to repair it).
 */
import type { BootRecord, FileSystem, MountRequest, MountTable } from "../../src/providers.ts";
import { mustRun, type RunVia } from "../_run.ts";
import { BOOT_RECORD_MARKER, type MountPrograms, mountRuntime, recordSafe } from "../_mount.ts";
import { ForeignBootRecord, readRecord, stateOf, writeRecord } from "../_boot_record.ts";

/** How to reach mount(8) and systemd. */
export interface SystemdMountOptions extends MountPrograms {
  /** systemctl (default "systemctl"). */
  systemctl?: string;
  /**
   * A directory holding the whole system's files: units are written below it and systemctl
   * runs with `--root` (no manager asked, no daemon-reload), as image builders use it.
   */
  root?: string;
  /** Extra environment, and an argv prefix to run the tools elsewhere (tests). */
  env?: Record<string, string>;
  via?: readonly string[];
}

/** The longest unit name systemd takes (UNIT_NAME_MAX less its NUL). */
const UNIT_NAME_MAX = 255;

/**
 * The name of the unit systemd gives a path (`systemd-escape --path`): leading and trailing
 * "/" dropped, "/" written "-", and every byte but letters, digits, ":", "_" and "." (and a
 * leading ".") written \xNN, "-" and "\" included.
 *
 * @example
 * ```ts
 * systemdPathName("/srv/my-data"); // "srv-my\\x2ddata"
 * ```
 */
export function systemdPathName(path: string): string {
  const simple = path.replace(/\/+/g, "/").replace(/^\/|\/$/g, "");
  if (simple === "") return "-";
  const bytes = new TextEncoder().encode(simple);
  let out = "";
  bytes.forEach((b, i) => {
    const c = String.fromCharCode(b);
    if (b === 0x2f) out += "-";
    else if (b < 0x80 && /[A-Za-z0-9:_.]/.test(c) && !(i === 0 && b === 0x2e)) out += c;
    else out += `\\x${b.toString(16).padStart(2, "0")}`;
  });
  return out;
}

/** The .mount unit of a mount target. */
export function mountUnitName(target: string): string {
  const name = `${systemdPathName(target)}.mount`;
  if (new TextEncoder().encode(name).length > UNIT_NAME_MAX) {
    throw new RangeError(
      `the unit for ${target} would be named with more than ${UNIT_NAME_MAX} characters ` +
        "(systemd's limit); mount at a shorter path",
    );
  }
  return name;
}

/**
 * The unit's text. A device named by UUID= or LABEL= is named by its udev link
 * (/dev/disk/by-uuid/…), as systemd's fstab generator does, so the unit waits for the
 * device; a bind is mounted with type "none" and the "bind" option (mount(8) then sets
 * its flags by a remount).
 *
 * @example
 * ```ts
 * mountUnit({ source: "tmpfs", target: "/srv/cache", fstype: "tmpfs",
 *   flags: ["rw", "nosuid", "nodev", "exec"], data: ["size=64m"] });
 * ```
 */
export function mountUnit(request: MountRequest): string {
  const bind = request.fstype === "bind";
  const tag = /^(UUID|LABEL)=(.*)$/.exec(request.source);
  const what = tag ? `/dev/disk/by-${tag[1].toLowerCase()}/${tag[2]}` : request.source;
  const options = bind ? ["bind", ...request.flags] : [...request.flags, ...request.data];
  return [
    BOOT_RECORD_MARKER,
    "[Unit]",
    `Description=Mount ${recordSafe("mount target", request.target)} (nox-mesh-host)`,
    "",
    "[Mount]",
    `What=${recordSafe("mount source", what)}`,
    `Where=${request.target}`,
    `Type=${recordSafe("filesystem type", bind ? "none" : request.fstype)}`,
    `Options=${recordSafe("mount options", options.join(","))}`,
    "",
    "[Install]",
    "WantedBy=local-fs.target",
    "",
  ].join("\n");
}

/**
 * The systemd mount provider.
 *
 * @example
 * ```ts
 * const mounts = systemdMounts();
 * await mounts.bootRecord(fs, request); // { state: "absent", path: "/etc/systemd/system/srv-data.mount" }
 * ```
 *
 * Long because: a provider is one object of verbs over systemd's mount units; each verb is short.
 */
export function systemdMounts(options: SystemdMountOptions = {}): MountTable {
  const run: RunVia = { env: options.env, via: options.via };
  const runtime = mountRuntime(options, run);
  const systemctl = options.systemctl ?? "systemctl";
  const rootArgs = options.root === undefined ? [] : [`--root=${options.root}`];
  const ctl = (...args: string[]) => mustRun([systemctl, ...rootArgs, ...args], run);
  const unitDir = `${options.root ?? ""}/etc/systemd/system`;
  const pathOf = (target: string) => `${unitDir}/${mountUnitName(target)}`;

  /** Whether systemd starts the unit at boot, from the unit file it has loaded. */
  async function enabled(unit: string): Promise<boolean> {
    if (options.root !== undefined) {
      const r = await mustRun([systemctl, ...rootArgs, "is-enabled", "--", unit], {
        ...run,
        okCodes: [1],
      });
      return r.stdout.trim() === "enabled";
    }
    // Loaded from the file as written (no reload pending) and enabled.
    const r = await ctl("show", "--property=UnitFileState,NeedDaemonReload", "--", unit);
    return /^UnitFileState=enabled$/m.test(r.stdout) && /^NeedDaemonReload=no$/m.test(r.stdout);
  }

  async function reload(): Promise<void> {
    if (options.root === undefined) await ctl("daemon-reload");
  }

  async function bootRecord(fs: FileSystem, request: MountRequest): Promise<BootRecord> {
    const path = pathOf(request.target);
    const found = await readRecord(fs, path);
    const on = found.state === "ours" && await enabled(mountUnitName(request.target));
    return { state: stateOf(found, mountUnit(request), on), path };
  }

  return {
    name: "systemd",
    ...runtime,
    bootRecord,
    async writeBootRecord(fs, request) {
      const path = pathOf(request.target);
      const found = await readRecord(fs, path);
      if (found.state === "foreign") throw new ForeignBootRecord(path, found.why);
      const text = mountUnit(request);
      if (found.state !== "ours" || found.text !== text) await writeRecord(fs, path, text);
      // Also when the file was already right: a crash between its write and the reload
      // leaves systemd holding the unit it had before.
      await reload();
      await ctl("enable", "--", mountUnitName(request.target));
    },
    async removeBootRecord(fs, target) {
      const path = pathOf(target);
      const found = await readRecord(fs, path);
      if (found.state !== "ours") return found.state;
      await ctl("disable", "--", mountUnitName(target));
      await fs.remove(path, "file");
      await fs.syncDirectory(unitDir);
      await reload();
      return "removed";
    },
  };
}
