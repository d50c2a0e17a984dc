/**
 * One container runtime adapter over the podman or docker command line (they
 * share these verbs): inspect, create (with labels) then start, start, restart,
 * rm -f. A restart is proven by a new State.StartedAt.
 * The image must be pinned by digest; the adapter refuses anything else.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { posix } from "node:path";
import type { ContainerInfo, ContainerRuntime, ContainerSpec } from "../../src/providers.ts";
import { mustRun, programFailed, refuseOption, runProgram, type RunVia } from "../_run.ts";

/** Which CLI, and its environment (e.g. CONTAINERS_CONF for podman). */
export interface ContainerCliOptions {
  /** "podman" or "docker" (or a path to either). */
  program: string;
  /**
   * A private directory (0700, made if missing) for the env files of `create`:
   * environment values go to the runtime in a 0600 file there, removed after use,
   * never on its command line (where any local user reads them in /proc).
   */
  envDir: string;
  /** Extra environment, and an argv prefix to run the tool elsewhere (tests: a lab machine). */
  env?: Record<string, string>;
  via?: readonly string[];
}

const PINNED = /@sha256:[a-f0-9]{64}$/;

/**
 * Create the container runtime adapter.
 *
 * @example
 * ```ts
 * const runtime = containerCli({ program: "podman" });
 * await runtime.inspect("registry"); // null when there is no such container
 * ```
 */
export function containerCli(options: ContainerCliOptions): ContainerRuntime {
  const { program } = options;
  const run: RunVia = { env: options.env, via: options.via };
  const name = program.slice(program.lastIndexOf("/") + 1);
  return {
    name,

    async inspect(container: string): Promise<ContainerInfo | null> {
      refuseOption("container name", container);
      const r = await runProgram([program, "container", "inspect", container], run);
      if (r.code !== 0) {
        if (/no such (container|object)/i.test(r.stderr)) return null;
        throw programFailed(r);
      }
      return parseInspect(r.stdout, container);
    },

    async create(spec: ContainerSpec): Promise<void> {
      const envFile = writeEnvFile(options.envDir, spec.env);
      try {
        await mustRun([program, ...createArgs(spec, envFile)], run);
      } finally {
        if (envFile !== undefined) unlinkSync(envFile);
      }
      await mustRun([program, "start", spec.name], run);
    },

    async start(container: string): Promise<void> {
      refuseOption("container name", container);
      await mustRun([program, "start", container], run);
    },

    async restart(container: string): Promise<void> {
      refuseOption("container name", container);
      await mustRun([program, "restart", container], run);
    },

    async remove(container: string): Promise<void> {
      refuseOption("container name", container);
      await mustRun([program, "rm", "--force", container], run);
    },
  };
}

/**
 * The arguments of `<runtime> create` for a spec (labels, the env file, mounts,
 * restart, then image and args). Environment values never appear: a spec with any
 * needs `envFile` (see {@link writeEnvFile}).
 */
export function createArgs(spec: ContainerSpec, envFile?: string): string[] {
  refuseOption("container name", spec.name);
  if (Object.keys(spec.env).length > 0 && envFile === undefined) {
    throw new TypeError("environment values go in an env file, never on the command line");
  }
  if (!PINNED.test(spec.image)) {
    throw new TypeError(`image "${spec.image}" is not pinned by digest (…@sha256:<64 hex>)`);
  }
  for (const m of spec.mounts) {
    if (`${m.source}${m.target}`.includes(",")) {
      throw new TypeError(`mount ${m.source}:${m.target} has a comma, which --mount cannot carry`);
    }
  }
  const labels = Object.entries(spec.labels).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0);
  return [
    "create",
    "--name",
    spec.name,
    ...labels.flatMap(([k, v]) => ["--label", `${k}=${v}`]),
    ...(envFile === undefined ? [] : ["--env-file", envFile]),
    ...spec.mounts.flatMap((m) => [
      "--mount",
      `type=bind,source=${m.source},target=${m.target}${m.readOnly ? ",readonly" : ""}`,
    ]),
    "--restart",
    spec.restart,
    "--",
    spec.image,
    ...spec.args,
  ];
}

/**
 * Write `env` as a runtime env file (`NAME=value` lines) in the private directory
 * `dir`, created on a descriptor (O_CREAT|O_EXCL|O_NOFOLLOW, 0600 set with fchmod);
 * returns its path, or `undefined` when there is nothing to write. The caller
 * removes it. A value with a line break or NUL cannot be carried and is refused.
 */
export function writeEnvFile(dir: string, env: Record<string, string>): string | undefined {
  const entries = Object.entries(env);
  if (entries.length === 0) return undefined;
  for (const [name, value] of entries) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new TypeError(`env name "${name}" is not valid`);
    }
    if (/[\n\r\0]/.test(value)) {
      throw new TypeError(
        `env ${name} holds a line break or NUL, which a runtime env file cannot carry`,
      );
    }
  }
  privateDirectory(dir);
  const path = posix.join(dir, `create-${crypto.randomUUID()}.env`);
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = constants;
  const fd = openSync(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    fchmodSync(fd, 0o600);
    const text = entries.map(([name, value]) => `${name}=${value}\n`).join("");
    const bytes = new TextEncoder().encode(text);
    for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at);
  } catch (error) {
    closeSync(fd);
    unlinkSync(path);
    throw error;
  }
  closeSync(fd);
  return path;
}

/**
 * Make `dir` (if missing) and hold it to a directory of the state directory's
 * owner (the host; asking the process's own uid would need --allow-sys=uid),
 * mode 0700, never a symlink.
 */
function privateDirectory(dir: string): void {
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;
  let fd: number;
  try {
    fd = openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ELOOP" || code === "ENOTDIR") {
      throw new TypeError(
        `${dir} is not a directory (a symlink or a file); the env files need a private one`,
      );
    }
    throw error;
  }
  try {
    const info = fstatSync(fd);
    const owner = ownerOf(posix.dirname(dir));
    if (info.uid !== owner) {
      throw new TypeError(
        `${dir} belongs to uid ${info.uid}, not to the state directory's owner (${owner}); ` +
          "it is not private",
      );
    }
    fchmodSync(fd, 0o700);
  } finally {
    closeSync(fd);
  }
  // One create at a time (under the apply lock): a file still here was left by a crash.
  for (const name of readdirSync(dir)) {
    if (/^create-[0-9a-f-]+\.env$/.test(name)) unlinkSync(posix.join(dir, name));
  }
}

/** The owner of a directory, asked on a descriptor that never follows a symlink. */
function ownerOf(dir: string): number {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    return fstatSync(fd).uid;
  } finally {
    closeSync(fd);
  }
}

interface InspectRecord {
  Name?: string;
  Image?: string;
  ImageName?: string;
  Config?: { Image?: string; Labels?: Record<string, string> | null };
  State?: { Running?: boolean; Status?: string; StartedAt?: string };
}

/** Parse `<runtime> container inspect NAME` (a JSON array of one object; podman or docker). */
export function parseInspect(stdout: string, container: string): ContainerInfo | null {
  const records = JSON.parse(stdout) as InspectRecord[];
  const record = records.find((r) => (r.Name ?? "").replace(/^\//, "") === container);
  if (!record) return null;
  return {
    name: container,
    image: record.ImageName ?? record.Config?.Image ?? record.Image ?? "",
    running: record.State?.Running === true,
    status: record.State?.Status ?? "unknown",
    labels: { ...(record.Config?.Labels ?? {}) },
    startedAt: record.State?.StartedAt ?? "",
  };
}
