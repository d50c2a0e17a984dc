// Test helpers: a throw-away "machine" for the launcher (state dir, a stand-in
// host, a plan of what each start of the host does) and a handle on the
// running launcher. Private to tests/.
import { join } from "node:path";

export const LAUNCHER: string = new URL("../launcher/nox-mesh-host-launch", import.meta.url)
  .pathname;
/** The package kinds' includes the launcher sources (launcher/pkg/<kind>.sh). */
export const LAUNCH_LIB: string = new URL("../launcher/pkg", import.meta.url).pathname;
const STAND_IN: string = new URL("./fixtures/stand-in-host", import.meta.url).pathname;

/** One temporary directory holding everything a launcher test touches. */
export interface World {
  dir: string;
  state: string;
  plan: string;
  prefix: string;
  bin: string;
  env: Record<string, string>;
}

/** Writes the stand-in host, answering `version` with `version`, to `path`. */
export async function writeStandIn(path: string, version: string): Promise<void> {
  const text = await Deno.readTextFile(STAND_IN);
  await Deno.writeTextFile(path, text.replace("@VERSION@", version), { mode: 0o755 });
  await Deno.chmod(path, 0o755);
}

/** Makes a world whose host runs `steps` (one line per start), packaged as `pkg`. */
export async function makeWorld(
  { pkg = "tarball", steps, version = "1.0" }: {
    pkg?: string;
    steps: string[];
    version?: string;
  },
): Promise<World> {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-launch-" });
  await Deno.chmod(dir, 0o755);
  const w: World = {
    dir,
    state: join(dir, "state"),
    plan: join(dir, "plan"),
    prefix: join(dir, "prefix"),
    // As the tarball lays it out: PREFIX/bin/nox-mesh-host (tar -xz -C PREFIX).
    bin: join(dir, "prefix", "bin", "nox-mesh-host"),
    env: {},
  };
  for (const d of [w.state, w.plan, w.prefix, join(w.prefix, "bin"), join(dir, "bin")]) {
    await Deno.mkdir(d);
  }
  await Deno.writeTextFile(join(w.plan, "steps"), steps.map((s) => s + "\n").join(""));
  await writeStandIn(w.bin, version);
  w.env = {
    PATH: `${join(dir, "bin")}:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}`,
    NOXPK_PLAN: w.plan,
    NOX_MESH_HOST_STATE_DIR: w.state,
    NOX_MESH_HOST_BIN: w.bin,
    NOX_MESH_HOST_PKG: pkg,
    // The checkout's includes (a package installs its kind's in lib/nox-mesh-host/launch/).
    NOX_MESH_HOST_LAUNCH_LIB: LAUNCH_LIB,
    NOX_MESH_HOST_BACKOFF: "0",
  };
  return w;
}

/** The host's log lines: "start V PID ARGS", "exit N V", "ready V", "signal SIG V", … */
export async function hostLog(w: World): Promise<string[]> {
  try {
    return (await Deno.readTextFile(join(w.plan, "log"))).trim().split("\n");
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw e;
  }
}

/** The versions the host was started as, in order. */
export async function starts(w: World): Promise<string[]> {
  return (await hostLog(w)).filter((l) => l.startsWith("start ")).map((l) => l.split(" ")[1]);
}

/** Contents of a state file, or undefined when it does not exist. */
export async function stateFile(w: World, name: string): Promise<string | undefined> {
  try {
    return (await Deno.readTextFile(join(w.state, name))).trim();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** A running launcher whose stderr is collected. */
export class RunningLauncher {
  readonly process: Deno.ChildProcess;
  stderr = "";
  #reading: Promise<void>;

  constructor(w: World, args: string[] = []) {
    const process = new Deno.Command(LAUNCHER, {
      args,
      env: w.env,
      clearEnv: true,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    this.process = process;
    this.#reading = (async () => {
      for await (const chunk of process.stderr.pipeThrough(new TextDecoderStream())) {
        this.stderr += chunk;
      }
    })();
  }

  /**
   * Waits for the launcher to exit; returns its exit code and everything it said.
   * One that has not exited after `timeoutMs` is stopped (TERM, which it passes
   * to the host), so a failing test leaves no process behind, and the wait fails.
   */
  async exit(timeoutMs = 120_000): Promise<{ code: number; stderr: string }> {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      this.process.kill("SIGTERM");
    }, timeoutMs);
    const status = await this.process.status;
    clearTimeout(timer);
    await this.#reading;
    if (timedOut) throw new Error(`the launcher did not exit by itself:\n${this.stderr}`);
    return { code: status.code, stderr: this.stderr };
  }

  /** Stops the launcher (TERM) and waits for it; for cleanup after a failure. */
  async stop(): Promise<void> {
    this.process.kill("SIGTERM");
    await this.process.status;
    await this.#reading;
  }
}

/** Runs the launcher to its end (it must stop by itself). */
export function launch(w: World, args: string[] = []): Promise<{ code: number; stderr: string }> {
  return new RunningLauncher(w, args).exit();
}

/** Polls `check` until it holds; fails after `timeoutMs` saying what was awaited. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = 120_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Counts the lines of `text` containing `needle`. */
export function count(text: string, needle: string): number {
  return text.split("\n").filter((l) => l.includes(needle)).length;
}

/** SHA-256 of a file, hex. */
export async function fileSha256(path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}
