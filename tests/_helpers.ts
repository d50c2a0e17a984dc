/** Shared test helpers: scratch roots, the host in-process, and the host as a real process. */
import { posix } from "node:path";
import { openEngine } from "../src/engine/mod.ts";
import type { Engine } from "../src/engine/mod.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";

const REPO = new URL("..", import.meta.url).pathname;

/** A scratch machine: a managed root, a state directory and a config file, all in a temp dir. */
export interface Scratch extends AsyncDisposable {
  dir: string;
  root: string;
  stateDir: string;
  configPath: string;
  /** The environment that points a host process at this scratch. */
  env: Record<string, string>;
  /** Write a declaration file into the scratch dir; returns its path. */
  declaration(resources: unknown[], extra?: Record<string, unknown>): Promise<string>;
}

/** Make a scratch machine; `await using` removes it. */
export async function scratch(config: Record<string, unknown> = {}): Promise<Scratch> {
  const dir = await Deno.makeTempDir({ prefix: "nox-test-" });
  const root = posix.join(dir, "root");
  const stateDir = posix.join(dir, "state");
  const configPath = posix.join(dir, "host.json");
  await Deno.mkdir(root);
  await Deno.writeTextFile(configPath, JSON.stringify({ managedRoots: [root], ...config }));
  let n = 0;
  return {
    dir,
    root,
    stateDir,
    configPath,
    env: { NOX_MESH_HOST_STATE_DIR: stateDir, NOX_MESH_HOST_CONFIG: configPath },
    async declaration(resources, extra = {}) {
      const path = posix.join(dir, `declaration-${++n}.json`);
      await Deno.writeTextFile(path, JSON.stringify({ version: 1, ...extra, resources }));
      return path;
    },
    async [Symbol.asyncDispose]() {
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** Open the host in-process on a scratch machine. */
export function hostOn(s: Scratch): Promise<Engine> {
  return openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: posixFileSystem() }),
  });
}

/** A file resource owned by root. */
export function file(
  id: string,
  path: string,
  content: string,
  mode = "0644",
): Record<string, unknown> {
  return { type: "file", id, path, content, mode, owner: "root", group: "root" };
}

/** A directory resource owned by root. */
export function directory(id: string, path: string, mode = "0755"): Record<string, unknown> {
  return { type: "directory", id, path, mode, owner: "root", group: "root" };
}

/**
 * The development permission flags: exactly those of the `host` task in deno.json,
 * so tests run the host the way `deno task host` does (never -A).
 */
export async function hostPermissionFlags(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(posix.join(REPO, "deno.json")));
  const words: string[] = config.tasks.host.split(/\s+/);
  return words.filter((w) => w.startsWith("--allow-") || w.startsWith("--deny-"));
}

/** The outcome of running the host as a process. */
export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Run `nox-mesh-host ARGS` as a real process under the development permission set;
 * `via` runs it through a prefix (`ip netns exec NS`: inside a test's network namespace).
 */
export async function runHost(
  args: string[],
  options: { env?: Record<string, string>; stdin?: string; via?: readonly string[] } = {},
): Promise<Run> {
  const argv = [
    ...options.via ?? [],
    Deno.execPath(),
    "run",
    "--quiet",
    ...(await hostPermissionFlags()),
    posix.join(REPO, "mod.ts"),
    ...args,
  ];
  const command = new Deno.Command(argv[0], {
    args: argv.slice(1),
    env: options.env,
    cwd: REPO,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  });
  const child = command.spawn();
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(options.stdin));
    await writer.close();
  }
  const out = await child.output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

/** Read a path's mode bits as "0644". */
export async function modeOf(path: string): Promise<string> {
  return ((await Deno.lstat(path)).mode! & 0o7777).toString(8).padStart(4, "0");
}

/** Whether anything (even a dangling symlink) is at a path. */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/** A scratch machine whose configured bundle lives in its own (empty) package directory. */
export async function bundledMachine(
  config: Record<string, unknown> = {},
): Promise<Scratch & { bundle: string }> {
  const pkg = await Deno.makeTempDir({ prefix: "noxst-pkg-" });
  const bundle = posix.join(pkg, "substrate.lock");
  const s = await scratch({ bundle, ...config });
  return {
    ...s,
    bundle,
    async [Symbol.asyncDispose]() {
      await s[Symbol.asyncDispose]();
      await Deno.remove(pkg, { recursive: true });
    },
  };
}

/** A file's text, or `undefined` when it cannot be read (absent). */
export async function readOr(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch {
    return undefined;
  }
}
