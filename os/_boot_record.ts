/**
 * The boot records of both mount providers are files the host writes through its file
 * system provider (held directories, atomic, owner and mode on the descriptor) and knows
 * as its own by the marker, their first line (the second, after a script's "#!" line): a
 * file at that name without it is someone else's and is never rewritten or removed.
 */
import type { BootRecord, FileSystem } from "../src/providers.ts";
import { HostError } from "../src/errors.ts";
import { BOOT_RECORD_MARKER } from "./_mount.ts";

/** What a boot record file holds: nothing, the host's text, or someone else's. */
export async function readRecord(
  fs: FileSystem,
  path: string,
): Promise<
  { state: "absent" } | { state: "foreign"; why: string } | { state: "ours"; text: string }
> {
  const info = await fs.lstat(path);
  if (info === null) return { state: "absent" };
  if (info.kind !== "file") return { state: "foreign", why: `is a ${info.kind}` };
  const { data } = await fs.readFile(path);
  const text = new TextDecoder().decode(data ?? new Uint8Array());
  // The marker is the first line, or the second after a script's "#!" line.
  const lines = text.split("\n", 2);
  const marker = lines[0].startsWith("#!") ? lines[1] : lines[0];
  if (marker !== BOOT_RECORD_MARKER) {
    return {
      state: "foreign",
      why: "does not carry the host's marker (its first line, or the second after #!)",
    };
  }
  return { state: "ours", text };
}

/** A boot record at `path` that the host did not write: it is never rewritten or removed. */
export class ForeignBootRecord extends HostError {
  constructor(path: string, why: string) {
    super(
      "mount.foreign-boot-record",
      `${path} ${why}: it is not a boot record the host wrote, so it neither rewrites nor ` +
        "removes it",
      {
        hint: "move it away if the mount resource is to take over this mount, or leave the " +
          "mount undeclared",
      },
    );
  }
}

/** Write the host's record (0644 or `mode`, root's) and make the rename durable. */
export async function writeRecord(
  fs: FileSystem,
  path: string,
  text: string,
  mode = 0o644,
): Promise<void> {
  await fs.writeFileAtomic(path, new TextEncoder().encode(text), { mode, uid: 0, gid: 0 });
  await fs.syncDirectory(path.slice(0, path.lastIndexOf("/")) || "/");
}

/** The state of a record whose text is known. */
export function stateOf(
  found: Awaited<ReturnType<typeof readRecord>>,
  want: string,
  enabled: boolean,
): BootRecord["state"] {
  if (found.state !== "ours") return found.state;
  return found.text === want && enabled ? "current" : "stale";
}
