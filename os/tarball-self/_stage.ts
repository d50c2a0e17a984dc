/**
 * The upgrade the host stages for its launcher (launcher/README.md "Staged upgrade"), in
 * the state directory: `STATE/upgrade/` holds `nox-mesh-host.tar.gz` (the verified bytes)
 * and `staged` ("SHA256 VERSION", written last: a stage without it is not one). The
 * launcher checks, unpacks and removes it; when it refuses one it writes
 * `STATE/upgrade-refused` ("SHA256 VERSION: reason"). Every write is on a descriptor:
 * the directory opened O_DIRECTORY|O_NOFOLLOW, each file a new O_CREAT|O_EXCL|O_NOFOLLOW
 * temporary, fchown/fchmod on its descriptor, fsync, renamed only while the directory's
 * name still leads to the directory opened.
 */
import { constants, fchmodSync, fchownSync, fstatSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { posix } from "node:path";
import { HostError } from "../../src/errors.ts";

/** The stage directory, inside the state directory. */
export const STAGE_DIR = "upgrade";
/** The staged tarball, inside {@link STAGE_DIR}. */
export const STAGE_TARBALL = "nox-mesh-host.tar.gz";
/** The record "SHA256 VERSION", inside {@link STAGE_DIR}, written last. */
export const STAGE_RECORD = "staged";
/** The launcher's record of the last stage it refused, in the state directory. */
export const REFUSED_RECORD = "upgrade-refused";

/** What is staged, or what the launcher refused. */
export interface StageRecord {
  sha256: string;
  version: string;
  /** The launcher's reason (refused records only). */
  reason?: string;
}

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = constants;
const RECORD = /^([0-9a-f]{64}) ([A-Za-z0-9][A-Za-z0-9._:+~-]{0,63})(?:: (.*))?$/;

function stageError(what: string, hint: string): HostError {
  return new HostError("package.stage", what, { hint });
}

/** A small regular file's text, read on a descriptor (never through a link); null when absent. */
async function readSmall(path: string): Promise<string | null> {
  let file: FileHandle;
  try {
    file = await open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return null;
    if ((error as { code?: string }).code === "ELOOP") {
      throw stageError(`${path} is a symbolic link`, `remove it; the host never reads through one`);
    }
    throw error;
  }
  try {
    const info = fstatSync(file.fd);
    if (!info.isFile() || info.size > 4096) {
      throw stageError(`${path} is not a small regular file`, "remove it");
    }
    return new TextDecoder().decode(await file.readFile());
  } finally {
    await file.close();
  }
}

/** A record file: null when absent or not a record (half written: not a stage). */
export async function readRecord(path: string): Promise<StageRecord | null> {
  const text = await readSmall(path);
  const m = text === null ? null : RECORD.exec(text.split("\n")[0]);
  if (!m) return null;
  return { sha256: m[1], version: m[2], ...(m[3] === undefined ? {} : { reason: m[3] }) };
}

/** What is staged in `stateDir`, when both the record and the tarball are there. */
export async function stagedIn(stateDir: string): Promise<StageRecord | null> {
  const dir = posix.join(stateDir, STAGE_DIR);
  const info = await Deno.lstat(dir).catch(() => null);
  if (info === null || !info.isDirectory) return null;
  const record = await readRecord(posix.join(dir, STAGE_RECORD));
  if (record === null) return null;
  const tarball = await Deno.lstat(posix.join(dir, STAGE_TARBALL)).catch(() => null);
  return tarball?.isFile ? record : null;
}

/** The stage directory opened (made 0700, owner 0:0, when absent), never through a link. */
async function openStageDir(dir: string): Promise<FileHandle> {
  const seen = await Deno.lstat(dir).catch((error) => {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  });
  if (seen === null) {
    await Deno.mkdir(dir, { mode: 0o700 });
  } else if (!seen.isDirectory) {
    throw stageError(
      `the upgrade stage ${dir} is ${seen.isSymlink ? "a symbolic link" : "not a directory"}`,
      "someone put it there; the host never writes through it: remove it, then apply again",
    );
  }
  const handle = await open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW).catch((error) => {
    if ((error as { code?: string }).code === "ELOOP" || error.code === "ENOTDIR") {
      throw stageError(`the upgrade stage ${dir} was swapped for a link`, "remove it");
    }
    throw error;
  });
  fchownSync(handle.fd, 0, 0);
  fchmodSync(handle.fd, 0o700);
  return handle;
}

/** Whether the name `dir` still leads to the directory `handle` holds. */
function stillThere(dir: string, handle: FileHandle): boolean {
  const held = fstatSync(handle.fd);
  try {
    const now = Deno.lstatSync(dir);
    return now.isDirectory && now.dev === held.dev && now.ino === held.ino;
  } catch {
    return false;
  }
}

/** Write `name` in the opened stage directory: a new temporary (0600, 0:0), synced, renamed. */
async function writeIn(dir: string, handle: FileHandle, name: string, data: Uint8Array) {
  const temp = posix.join(dir, `.${name}.tmp`);
  // A temporary left by a crash (or a link planted there) is unlinked, never followed.
  await Deno.remove(temp).catch(() => {});
  const file = await open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    let done = 0;
    while (done < data.length) done += (await file.write(data, done)).bytesWritten;
    fchownSync(file.fd, 0, 0);
    fchmodSync(file.fd, 0o600);
    await file.sync();
  } finally {
    await file.close();
  }
  if (!stillThere(dir, handle)) {
    await Deno.remove(temp).catch(() => {});
    throw stageError(`the upgrade stage ${dir} was swapped while the host wrote it`, "remove it");
  }
  // rename(2) replaces whatever is at the name (a planted link too) without following it.
  await Deno.rename(temp, posix.join(dir, name));
}

/**
 * Stage `bytes` (already verified) as `version` with digest `sha256`: the record is
 * removed first and written last, so a stage cut short is never taken for one.
 */
export async function stage(
  stateDir: string,
  bytes: Uint8Array,
  record: StageRecord,
): Promise<void> {
  const dir = posix.join(stateDir, STAGE_DIR);
  const handle = await openStageDir(dir);
  try {
    await Deno.remove(posix.join(dir, STAGE_RECORD)).catch((error) => {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    });
    await writeIn(dir, handle, STAGE_TARBALL, bytes);
    const line = `${record.sha256} ${record.version}\n`;
    await writeIn(dir, handle, STAGE_RECORD, new TextEncoder().encode(line));
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Drop what is staged (the installed version was declared again). */
export async function dropStage(stateDir: string): Promise<void> {
  const dir = posix.join(stateDir, STAGE_DIR);
  const info = await Deno.lstat(dir).catch(() => null);
  if (info === null) return;
  // A link is removed itself (unlink), never what it points at.
  await Deno.remove(dir, { recursive: info.isDirectory });
}
