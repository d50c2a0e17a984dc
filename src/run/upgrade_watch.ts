/**
 * Self-upgrade detection (ADR 0057): has the file this process runs from been
 * replaced? In the compiled form that is the executable (Deno.execPath(), and
 * /proc/self/exe then reads "… (deleted)"); in the bundled or source form it is
 * the main module's file, since the executable is the system's deno. A change
 * is a different device/inode, size or modification time, or the file gone.
 *
 * The bundled form is several files: the entry (the main module) and beside it the
 * parts its commands load (named NAME-DIGEST.js, packaging/build.ts). A new build
 * changes the entry too (it names its parts by their digests), but the parts are
 * watched as well, so that a restart waits until an upgrade has put all of them.
 */
import { fileURLToPath } from "node:url";
import { posix } from "../posix_path.ts";

/** How the host is running. */
export type ProgramForm = "compiled" | "bundled" | "source";

interface Identity {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
}

/** The program file as it was when the process started, and a way to ask whether it changed. */
export class ProgramWatch {
  readonly path: string;
  readonly form: ProgramForm;
  readonly #start: Identity;
  /** The bundled form's parts beside the entry, as they were at the start. */
  readonly #parts: string;

  private constructor(path: string, form: ProgramForm, start: Identity, parts: string) {
    this.path = path;
    this.form = form;
    this.#start = start;
    this.#parts = parts;
  }

  /**
   * Watch the file at `path` (as it is now), and in the bundled form the parts
   * beside it. `form` decides whether /proc/self/exe is consulted too (compiled only).
   */
  static async of(path: string, form: ProgramForm): Promise<ProgramWatch> {
    const start = identify(await Deno.stat(path));
    return new ProgramWatch(path, form, start, await parts(path, form));
  }

  /**
   * Watch the file this process runs from; undefined when it cannot be known
   * (e.g. the main module is not a local file).
   */
  static async current(): Promise<ProgramWatch | undefined> {
    const located = locateProgram();
    if (!located) return undefined;
    try {
      return await ProgramWatch.of(located.path, located.form);
    } catch {
      return undefined;
    }
  }

  /** Why the program file counts as replaced, or undefined when it is unchanged. */
  async changed(): Promise<string | undefined> {
    if (this.form === "compiled") {
      try {
        const exe = await Deno.readLink("/proc/self/exe");
        if (exe.endsWith(" (deleted)")) return `the running executable was replaced (${exe})`;
      } catch { /* no /proc: fall back to the stat below */ }
    }
    let now: Identity;
    try {
      now = identify(await Deno.stat(this.path));
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return `${this.path} was removed`;
      return undefined; // cannot tell: never guess "changed"
    }
    const was = this.#start;
    if (now.dev !== was.dev || now.ino !== was.ino) return `${this.path} was replaced (a new file)`;
    if (now.size !== was.size) return `${this.path} changed size (${was.size} → ${now.size} bytes)`;
    if (now.mtimeMs !== was.mtimeMs) return `${this.path} was modified`;
    if (await parts(this.path, this.form) !== this.#parts) {
      return `the parts of the program beside ${this.path} changed`;
    }
    return undefined;
  }

  /** Wait (up to `maxMs`) until the file stops changing, so a restart finds it whole. */
  async settle(maxMs = 5000, stepMs = 200): Promise<void> {
    const deadline = Date.now() + maxMs;
    let last = await this.#peek();
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, stepMs));
      const next = await this.#peek();
      if (next === last) return;
      last = next;
    }
  }

  async #peek(): Promise<string> {
    let entry = "absent";
    try {
      const i = identify(await Deno.stat(this.path));
      entry = `${i.dev}:${i.ino}:${i.size}:${i.mtimeMs}`;
    } catch { /* absent: an upgrade is replacing it */ }
    return `${entry} ${await parts(this.path, this.form)}`;
  }
}

/** How the bundler names a part of the bundled program (packaging/build.ts PART_NAME). */
const PART = /^[A-Za-z0-9_]+(-[A-Za-z0-9_]+)*-[A-Z0-9]{8}\.js$/;

/**
 * The bundled form's parts beside `entry` (name, inode, size, modification time of each),
 * as one string; "" in the other forms, or when the directory cannot be read.
 */
async function parts(entry: string, form: ProgramForm): Promise<string> {
  if (form !== "bundled") return "";
  const dir = posix.dirname(entry);
  const seen: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      if (!PART.test(e.name)) continue;
      try {
        const i = identify(await Deno.lstat(posix.join(dir, e.name)));
        seen.push(`${e.name}:${i.ino}:${i.size}:${i.mtimeMs}`);
      } catch {
        seen.push(`${e.name}:gone`);
      }
    }
  } catch {
    return "";
  }
  return seen.sort().join(" ");
}

/**
 * Which file this process runs from. A compiled binary's main module lives in
 * its embedded file system (a path containing "deno-compile-"); otherwise the
 * main module is the bundle or the source entry point.
 */
export function locateProgram(
  mainModule: string = Deno.mainModule,
  execPath: () => string = Deno.execPath,
): { path: string; form: ProgramForm } | undefined {
  if (!mainModule.startsWith("file:")) return undefined;
  const main = fileURLToPath(mainModule);
  if (main.includes("/deno-compile-")) {
    try {
      return { path: execPath(), form: "compiled" };
    } catch {
      return undefined;
    }
  }
  return { path: main, form: main.endsWith(".ts") ? "source" : "bundled" };
}

function identify(info: Deno.FileInfo): Identity {
  return {
    dev: info.dev ?? 0,
    ino: info.ino ?? 0,
    size: info.size,
    mtimeMs: info.mtime?.getTime() ?? 0,
  };
}
