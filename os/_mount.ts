/**
 * What the two mount providers share (os/systemd-mount/, os/openrc-mount/): the kernel's
 * mount table read and parsed, and mount, umount and findfs run, the same for util-linux
 * (Arch, Debian) and busybox (Alpine). Only where the boot record lives differs between
 * them. Deno grants /proc to --allow-all alone, so the table is read by `cat
 * /proc/self/mountinfo`, a child in the host's own mount namespace.
 */
import type { MountEntry, MountRequest } from "../src/providers.ts";
import type { Program } from "./provider.ts";
import { mustRun, refuseOption, runProgram, type RunVia } from "./_run.ts";

/**
 * The programs both mount providers run (where each lies is its distribution's to say:
 * os/distros/).
 */
export const MOUNT_PROGRAMS: Readonly<Record<"mount" | "umount" | "findfs" | "cat", Program>> = {
  mount: { why: "mount resources: mount, remount (util-linux, or busybox on Alpine)" },
  umount: { why: "mount resources: unmount what the host mounted" },
  findfs: { why: "mount resources: the device a UUID= or LABEL= names (the read-back)" },
  cat: {
    why:
      "mount resources: read /proc/self/mountinfo (Deno opens /proc only with every permission granted)",
  },
};

/** The marker every boot record the host writes starts with (its first line). */
export const BOOT_RECORD_MARKER =
  "# Written by nox-mesh-host for a mount resource: it rewrites and removes this file.";

/** The programs the mount verbs run (each may be given another name or path: tests). */
export interface MountPrograms {
  mount?: string;
  umount?: string;
  findfs?: string;
  cat?: string;
}

/** The verbs both providers share. */
export interface MountRuntime {
  mounts(): Promise<MountEntry[]>;
  findDevice(tag: string): Promise<string | null>;
  mount(request: MountRequest): Promise<void>;
  remount(request: MountRequest): Promise<void>;
  unmount(target: string): Promise<void>;
}

/**
 * The shared verbs, running `programs` (default: found through PATH) with `run`'s
 * environment and argv prefix.
 *
 * @example
 * ```ts
 * const runtime = mountRuntime({}, { via: ["busybox"] }); // busybox's applets
 * (await runtime.mounts()).find((m) => m.target === "/");
 * ```
 */
export function mountRuntime(programs: MountPrograms = {}, run: RunVia = {}): MountRuntime {
  const mount = programs.mount ?? "mount";
  const umount = programs.umount ?? "umount";
  const findfs = programs.findfs ?? "findfs";
  const cat = programs.cat ?? "cat";
  return {
    async mounts() {
      const r = await mustRun([cat, "/proc/self/mountinfo"], run);
      return parseMountInfo(r.stdout);
    },
    async findDevice(tag) {
      if (!/^(UUID|LABEL)=[^\s/]/.test(tag)) {
        throw new TypeError(`not a UUID= or LABEL= tag: ${tag}`);
      }
      const r = await runProgram([findfs, tag], run);
      const device = r.stdout.trim();
      // util-linux and busybox both exit 1 when no device carries it.
      return r.code === 0 && device.startsWith("/dev/") ? device : null;
    },
    async mount(request) {
      for (const argv of mountCommands(request, { mount })) await mustRun(argv, run);
    },
    async remount(request) {
      await mustRun(remountCommand(request, { mount }), run);
    },
    async unmount(target) {
      refuseOption("mount target", target);
      await mustRun([umount, "--", target], run);
    },
  };
}

/**
 * The commands that make `request`'s mount, as both the host and an OpenRC boot script run
 * them. A bind is two: busybox's mount ignores flags given with `bind` (measured, 1.35: the
 * bind keeps its source's flags), so they are set by a remount of the bind, as util-linux
 * does itself in two system calls. `-i`: no /sbin/mount.TYPE helper is ever run.
 */
export function mountCommands(
  request: MountRequest,
  { mount = "mount" }: { mount?: string } = {},
): string[][] {
  check(request);
  if (request.fstype === "bind") {
    return [
      [mount, "-i", "-o", "bind", "--", request.source, request.target],
      remountCommand(request, { mount }),
    ];
  }
  const options = [...request.flags, ...request.data].join(",");
  return [[mount, "-i", "-t", request.fstype, "-o", options, "--", request.source, request.target]];
}

/**
 * The command that sets `request`'s flags (and filesystem options) on its mount again. The
 * source is given as well as the target: util-linux's mount then reads no fstab entry to
 * merge in (mount(8), "remount").
 */
export function remountCommand(
  request: MountRequest,
  { mount = "mount" }: { mount?: string } = {},
): string[] {
  check(request);
  const options = request.fstype === "bind"
    ? ["remount", "bind", ...request.flags]
    : ["remount", ...request.flags, ...request.data];
  return [mount, "-i", "-o", options.join(","), "--", request.source, request.target];
}

/** Defence in depth: nothing a mount tool would read as an option or a second argument. */
function check(request: MountRequest): void {
  refuseOption("mount source", request.source);
  refuseOption("mount target", request.target);
  refuseOption("filesystem type", request.fstype);
  for (const word of [...request.flags, ...request.data]) {
    if (!/^[A-Za-z0-9_][A-Za-z0-9._:@/+=-]*$/.test(word)) {
      throw new TypeError(`mount option "${word}" holds a character mount cannot take`);
    }
  }
}

/**
 * Parse the kernel's mount table (proc(5), /proc/self/mountinfo): per line `ID PARENT
 * MAJOR:MINOR ROOT TARGET OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER-OPTIONS`, fields
 * separated by one space, with space, tab, newline, backslash and # in paths and sources
 * written as octal escapes (\040 …). Throws on a line that is not of that form.
 *
 * @example
 * ```ts
 * parseMountInfo("36 35 98:0 / /srv/a\\040b rw,noatime master:1 - ext4 /dev/vdb rw\n")[0].target;
 * // "/srv/a b"
 * ```
 */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const fields = line.split(" ");
    const dash = fields.indexOf("-", 6);
    if (dash === -1 || fields.length !== dash + 4 || !/^\d+:\d+$/.test(fields[2])) {
      throw new MountTableError(line);
    }
    const [id, parent] = [Number(fields[0]), Number(fields[1])];
    if (!Number.isSafeInteger(id) || !Number.isSafeInteger(parent)) throw new MountTableError(line);
    entries.push({
      id,
      parent,
      device: fields[2],
      root: unescapeOctal(fields[3]),
      target: unescapeOctal(fields[4]),
      options: fields[5].split(","),
      optional: fields.slice(6, dash),
      fstype: unescapeOctal(fields[dash + 1]),
      source: unescapeOctal(fields[dash + 2]),
      superOptions: fields[dash + 3] === "" ? [] : fields[dash + 3].split(","),
    });
  }
  return entries;
}

/** A line of the mount table that is not of the documented form. */
export class MountTableError extends Error {
  constructor(line: string) {
    super(`the kernel's mount table has a line this host cannot read: ${JSON.stringify(line)}`);
  }
}

/** Undo the kernel's octal escapes (\ooo: one byte each), then read the bytes as UTF-8. */
export function unescapeOctal(text: string): string {
  if (!text.includes("\\")) return text;
  const bytes: number[] = [];
  const raw = new TextEncoder().encode(text);
  const isOctal = (b: number | undefined) => b !== undefined && b >= 0x30 && b <= 0x37;
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === 0x5c && isOctal(raw[i + 1]) && isOctal(raw[i + 2]) && isOctal(raw[i + 3])) {
      bytes.push(((raw[i + 1] - 0x30) * 64 + (raw[i + 2] - 0x30) * 8 + raw[i + 3] - 0x30) & 0xff);
      i += 3;
    } else bytes.push(raw[i]);
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** The directories above `path`, nearest first ("/srv/a/b" → "/srv/a", "/srv"). */
export function ancestorsOf(path: string): string[] {
  const out: string[] = [];
  for (let cut = path.lastIndexOf("/"); cut > 0; cut = path.lastIndexOf("/", cut - 1)) {
    out.push(path.slice(0, cut));
  }
  return out;
}

/** Refuse text a boot record cannot hold as written (the kind's rules already refused it). */
export function recordSafe(what: string, text: string): string {
  // deno-lint-ignore no-control-regex
  if (/[\s\\%'"\x00-\x1f\x7f]/.test(text)) {
    throw new TypeError(`${what} "${text}" holds a character a boot record cannot carry`);
  }
  return text;
}
