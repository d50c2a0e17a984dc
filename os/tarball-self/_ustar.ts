/**
 * A strict reader of the host's own tarball (gzip, GNU or ustar format), made by our
 * packaging (packaging/make_package.ts): it accepts only what that build writes, regular files
 * (and directories) under the tarball's layout, and refuses everything else by name before
 * anything is written: absolute paths, `.` and `..` components, links, devices, FIFOs,
 * long-name and pax records, setuid/setgid/sticky or group/other-writable modes, duplicate
 * entries, a bad header checksum, and more bytes than `maxBytes` once unpacked.
 */
import { HostError } from "../../src/errors.ts";
import { TARBALL_LAYOUT } from "../tarball_layout.ts";

/** One entry of the tarball: a regular file (with its bytes) or a directory. */
export interface TarEntry {
  /** Relative to the prefix the tarball unpacks into ("bin/nox-mesh-host"). */
  path: string;
  kind: "file" | "directory";
  /** Permission bits (never above 0o755). */
  mode: number;
  data: Uint8Array;
}

/** The archive is not one our packaging makes: nothing of it was unpacked. */
export class TarballRefused extends HostError {
  constructor(what: string) {
    super("tarball.refused", `the tarball was refused: ${what}`, {
      hint: "declare a tarball made by `deno task package tarball`; nothing was unpacked",
    });
  }
}

/** The files a tarball may hold at the top of bin/, and the directories it may fill. */
const LAYOUT = TARBALL_LAYOUT;

const BLOCK = 512;
const TYPES: Record<string, string> = {
  "1": "a hard link",
  "2": "a symbolic link",
  "3": "a character device",
  "4": "a block device",
  "6": "a FIFO",
  "7": "a contiguous file",
  L: "a GNU long-name record",
  K: "a GNU long-link record",
  x: "a pax header",
  g: "a pax global header",
  S: "a sparse file",
};

/** Where an entry may lie: a top-level bin file, or inside one of the layout's directories. */
function inLayout(path: string, kind: TarEntry["kind"]): boolean {
  if (kind === "file" && LAYOUT.binFiles.some((f) => path === `bin/${f}`)) return true;
  return LAYOUT.dirs.some((d) => path.startsWith(`${d}/`) || (kind === "directory" && path === d));
}

function text(block: Uint8Array, from: number, length: number): string {
  const field = block.subarray(from, from + length);
  const end = field.indexOf(0);
  return new TextDecoder("utf-8", { fatal: true }).decode(
    end === -1 ? field : field.subarray(0, end),
  );
}

function octal(block: Uint8Array, from: number, length: number, what: string): number {
  const raw = text(block, from, length).trim();
  if (!/^[0-7]{1,12}$/.test(raw)) throw new TarballRefused(`a header's ${what} is not octal`);
  return parseInt(raw, 8);
}

/** Gunzip at most `maxBytes` (a larger archive is refused while it is read). */
async function gunzip(gz: Uint8Array, maxBytes: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    const stream = new Blob([gz as BlobPart]).stream().pipeThrough(
      new DecompressionStream("gzip"),
    );
    for await (const chunk of stream) {
      total += chunk.length;
      if (total > maxBytes) throw new TarballRefused(`it unpacks to more than ${maxBytes} bytes`);
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof TarballRefused) throw error;
    throw new TarballRefused(`it is not gzip data (${(error as Error).message})`);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) out.set(c, at), at += c.length;
  return out;
}

/** Every entry of a gzip'd tarball, checked; throws {@link TarballRefused} on the first fault. */
// Long because: every header field of a ustar entry checked in turn, each fault refused with its
// own message.
export async function readTarball(
  gz: Uint8Array,
  { maxBytes = 512 * 2 ** 20 }: { maxBytes?: number } = {},
): Promise<TarEntry[]> {
  const tar = await gunzip(gz, maxBytes);
  const entries: TarEntry[] = [];
  const seen = new Set<string>();
  let at = 0;
  while (true) {
    if (at + BLOCK > tar.length) throw new TarballRefused("it ends without its end-of-archive");
    const header = tar.subarray(at, at + BLOCK);
    if (header.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i];
    if (octal(header, 148, 8, "checksum") !== sum) {
      throw new TarballRefused(`the header at byte ${at} has a wrong checksum`);
    }
    const magic = text(header, 257, 6);
    if (magic !== "ustar" && magic !== "ustar ") {
      throw new TarballRefused(`the header at byte ${at} is not ustar or GNU`);
    }
    let path: string;
    try {
      const name = text(header, 0, 100);
      // ustar's prefix field; in the GNU format those bytes hold other things.
      const prefix = magic === "ustar" ? text(header, 345, 155) : "";
      path = prefix ? `${prefix}/${name}` : name;
    } catch {
      throw new TarballRefused(`the name at byte ${at} is not UTF-8`);
    }
    const type = String.fromCharCode(header[156] || 0x30);
    const size = octal(header, 124, 12, "size");
    const mode = octal(header, 100, 8, "mode");
    const shown = JSON.stringify(path);
    if (type !== "0" && type !== "5") {
      throw new TarballRefused(`${shown} is ${TYPES[type] ?? `of type ${JSON.stringify(type)}`}`);
    }
    const kind = type === "5" ? "directory" : "file";
    const clean = kind === "directory" ? path.replace(/\/$/, "") : path;
    if (clean.startsWith("/")) throw new TarballRefused(`${shown} is an absolute path`);
    if (clean.split("/").some((c) => c === "" || c === "." || c === "..")) {
      throw new TarballRefused(`${shown} has an empty, "." or ".." component`);
    }
    if (!inLayout(clean, kind)) {
      throw new TarballRefused(
        `${shown} lies outside the tarball's layout (bin/${LAYOUT.binFiles[0]}{,-launch,` +
          `-install-init}, ${LAYOUT.dirs.join("/, ")}/)`,
      );
    }
    if ((mode & ~0o755) !== 0) {
      throw new TarballRefused(`${shown} has mode ${mode.toString(8)} (only up to 0755)`);
    }
    if (seen.has(clean)) throw new TarballRefused(`${shown} is in it twice`);
    seen.add(clean);
    const start = at + BLOCK;
    if (kind === "directory" && size !== 0) throw new TarballRefused(`${shown} has a size`);
    if (start + size > tar.length) throw new TarballRefused(`${shown} is cut short`);
    entries.push({ path: clean, kind, mode, data: tar.slice(start, start + size) });
    at = start + Math.ceil(size / BLOCK) * BLOCK;
  }
  return entries;
}
