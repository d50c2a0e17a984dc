/**
 * The host's configuration: defaults, then /etc/mesh-host/host.json (or the
 * file named by --config / NOX_MESH_HOST_CONFIG), then flags. Unknown fields
 * in the file are refused, like in a declaration.
 */
import * as v from "valibot";
import { posix } from "./posix_path.ts";
import { ConfigError } from "./errors.ts";
import { compileOwnPaths, isWithin, ownRelation, pathProblem } from "./declaration/paths.ts";
import type { OwnResources, Permit } from "./declaration/options.ts";
import { DEFAULT_LIMITS, type Limits } from "./declaration/limits.ts";
import { canonicalSetting, isGuardedSetting, isSettingName } from "./resources/sysctl.ts";
import { stopsTheNode } from "./resources/service.ts";
import { ACCOUNT_NAME, confersRoot, RESERVED_NAMES } from "./resources/_accounts.ts";
import { PROGRAM } from "./version.ts";
import { LAUNCHER_METRICS_FILE } from "./launcher_files.ts";

/** Everything the host needs to know about where it lives and what it may manage. */
export interface HostConfig {
  stateDir: string;
  /** The configuration file that was read (or would have been). */
  configPath: string;
  managedRoots: string[];
  /** The bundle the package ships (substrate.lock). */
  bundlePath: string;
  driftIntervalSeconds: number;
  heartbeatIntervalSeconds: number;
  /**
   * How long a network change pushed over the link (firewall, overlay, sysctl) has to
   * be confirmed by the link (a heartbeat the broker acknowledged) before the host goes
   * back to the declaration it held before (src/run/confirm.ts).
   */
  confirmWindowSeconds: number;
  /** How many reports, and how old, the outbox keeps while the link is down. */
  outbox: { maxReports: number; maxAgeSeconds: number };
  /**
   * Above this resident memory (MiB) the running service finishes its apply,
   * reports why, and exits for a restart the launcher does not count.
   */
  memoryCeilingMiB: number;
  /**
   * Every how many applies (the drift timer's, a push's, a command's) every file is read
   * back in full; the others read only files whose identity changed (src/resources/file.ts).
   * 1: every apply reads every file.
   */
  fullReadBackEvery: number;
  /**
   * The package manager to use when it is not the OS's own (e.g. pacman on a
   * Debian-based machine). Unset: only the OS's own package manager is used.
   */
  packageManager?: string;
  limits: Limits;
  /** The host's own files and service, never manageable by a declaration. */
  own: OwnResources;
  /**
   * What this machine lets declarations from the link or a file do although the safe parse
   * refuses it by default (kernel settings that run programs or turn a protection off,
   * services that stop the node); the bundle may always.
   */
  permit: Permit;
  /**
   * A Prometheus text file for node_exporter's textfile collector (src/run/metrics.ts),
   * written by the service; unset: none.
   */
  metricsFile?: string;
}

/** Default locations and values (DESIGN.md §3, §8, §15). */
export const DEFAULTS = {
  stateDir: "/var/lib/mesh-host",
  configPath: "/etc/mesh-host/host.json",
  bundlePath: "/usr/share/nox-mesh-host/substrate.lock",
  managedRoots: ["/etc", "/srv", "/opt", "/var/lib", "/var/log", "/usr/local", "/home"],
  driftIntervalSeconds: 600,
  heartbeatIntervalSeconds: 30,
  confirmWindowSeconds: 120,
  outbox: { maxReports: 1000, maxAgeSeconds: 7 * 24 * 3600 },
  memoryCeilingMiB: 256,
  fullReadBackEvery: 6,
} as const;

/** Environment variables the host reads. */
export const ENV = {
  stateDir: "NOX_MESH_HOST_STATE_DIR",
  config: "NOX_MESH_HOST_CONFIG",
} as const;

export { ConfigError } from "./errors.ts";

const absolute = v.pipe(
  v.string(),
  v.check((p) => pathProblem(p) === undefined, (i) => `${pathProblem(i.input)}`),
);

const FileSchema = v.strictObject({
  stateDir: v.optional(absolute),
  managedRoots: v.optional(
    v.pipe(v.array(absolute), v.minLength(1, "name at least one managed root")),
  ),
  bundle: v.optional(absolute),
  metricsFile: v.optional(
    v.pipe(
      absolute,
      v.check(
        (p) => p.endsWith(".prom"),
        "the textfile collector reads only files named *.prom; end the name with .prom",
      ),
    ),
  ),
  packageManager: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[a-z][a-z0-9-]{0,31}$/, "a package manager's name, such as pacman or apk"),
    ),
  ),
  driftIntervalSeconds: v.optional(
    v.pipe(v.number(), v.safeInteger(), v.minValue(10, "at least 10 seconds")),
  ),
  heartbeatIntervalSeconds: v.optional(
    v.pipe(v.number(), v.safeInteger(), v.minValue(5, "at least 5 seconds")),
  ),
  confirmWindowSeconds: v.optional(
    v.pipe(
      v.number(),
      v.safeInteger(),
      v.minValue(5, "at least 5 seconds"),
      v.maxValue(3600, "at most 3600 seconds (a node cut off waits that long to come back)"),
    ),
  ),
  outbox: v.optional(v.strictObject({
    maxReports: v.optional(
      v.pipe(v.number(), v.safeInteger(), v.minValue(1), v.maxValue(100_000)),
    ),
    maxAgeSeconds: v.optional(
      v.pipe(v.number(), v.safeInteger(), v.minValue(60, "at least 60 seconds")),
    ),
  })),
  memoryCeilingMiB: v.optional(
    v.pipe(v.number(), v.safeInteger(), v.minValue(32, "at least 32 MiB")),
  ),
  fullReadBackEvery: v.optional(
    v.pipe(v.number(), v.safeInteger(), v.minValue(1, "at least 1 (1: every apply)")),
  ),
  permit: v.optional(v.strictObject({
    sysctls: v.optional(v.array(v.pipe(
      v.string(),
      v.check(
        (k) => isSettingName(k) && isGuardedSetting(canonicalSetting(k)),
        (i) =>
          `${
            JSON.stringify(i.input)
          } is not a kernel setting the safe parse refuses (those that run programs or ` +
          "turn a protection off, listed in nox-mesh-host-declaration(5)); nothing to permit",
      ),
    ))),
    services: v.optional(v.array(v.pipe(
      v.string(),
      v.check(
        (n) => stopsTheNode(n) !== undefined,
        (i) =>
          `${
            JSON.stringify(i.input)
          } is not a service the safe parse refuses (those that reboot, power off or ` +
          "isolate the node, listed in nox-mesh-host-declaration(5)); nothing to permit",
      ),
    ))),
    groups: v.optional(v.array(v.pipe(
      v.string(),
      v.check(
        (n) => confersRoot(n) !== undefined,
        (i) =>
          `${JSON.stringify(i.input)} is not a group the safe parse refuses (those that ` +
          "confer root or read secrets, listed in nox-mesh-host-declaration(5); root's own is " +
          "never given); nothing to permit",
      ),
    ))),
    users: v.optional(v.array(v.pipe(
      v.string(),
      v.check(
        (n) => ACCOUNT_NAME.test(n) && !RESERVED_NAMES.has(n),
        (i) =>
          `${JSON.stringify(i.input)} is not an account a declaration may adopt (a user name ` +
          "of lowercase letters, digits, _ and -; never root, nobody or nogroup)",
      ),
    ))),
  })),
  limits: v.optional(v.strictObject({
    maxBytes: v.optional(v.pipe(v.number(), v.safeInteger(), v.minValue(1))),
    maxResources: v.optional(v.pipe(v.number(), v.safeInteger(), v.minValue(1))),
    maxFileBytes: v.optional(v.pipe(v.number(), v.safeInteger(), v.minValue(0))),
    maxReferencedBytes: v.optional(v.pipe(v.number(), v.safeInteger(), v.minValue(0))),
  })),
});

/** What the command line says about configuration (flags win over the file). */
export interface ConfigFlags {
  stateDir?: string;
  configPath?: string;
  /** Read an environment variable; `undefined` when unset or not permitted. */
  env?: (name: string) => string | undefined;
  /**
   * The installation's own paths (packaging/own_paths_by_os.ts, which the entry
   * point hands in); the configured state, configuration and bundle paths and the
   * running program are added to them.
   */
  ownPaths?: readonly string[];
  /**
   * The installation's bundle, when not DEFAULTS.bundlePath (the entry point passes the
   * one its build carries); the configuration file's `bundle` still wins.
   */
  bundlePath?: string;
}

/**
 * Load the configuration: defaults < file < environment < flags.
 *
 * @example
 * ```ts
 * const config = await loadConfig({ stateDir: "/tmp/state" });
 * ```
 */
export async function loadConfig(flags: ConfigFlags = {}): Promise<HostConfig> {
  const env = flags.env ?? readEnv;
  const explicit = flags.configPath ?? env(ENV.config);
  const configPath = explicit ?? DEFAULTS.configPath;
  const file = await readConfigFile(configPath, explicit !== undefined);
  const stateDir = flags.stateDir ?? env(ENV.stateDir) ?? file.stateDir ?? DEFAULTS.stateDir;
  for (const [what, path] of [["state directory", stateDir], ["configuration file", configPath]]) {
    const problem = pathProblem(path);
    if (problem) throw new ConfigError("config.path", `the ${what} ${problem}`);
  }
  const bundlePath = file.bundle ?? flags.bundlePath ?? DEFAULTS.bundlePath;
  const config: HostConfig = {
    stateDir,
    configPath,
    managedRoots: [...(file.managedRoots ?? DEFAULTS.managedRoots)],
    bundlePath,
    driftIntervalSeconds: file.driftIntervalSeconds ?? DEFAULTS.driftIntervalSeconds,
    heartbeatIntervalSeconds: file.heartbeatIntervalSeconds ?? DEFAULTS.heartbeatIntervalSeconds,
    confirmWindowSeconds: file.confirmWindowSeconds ?? DEFAULTS.confirmWindowSeconds,
    outbox: { ...DEFAULTS.outbox, ...file.outbox },
    memoryCeilingMiB: file.memoryCeilingMiB ?? DEFAULTS.memoryCeilingMiB,
    fullReadBackEvery: file.fullReadBackEvery ?? DEFAULTS.fullReadBackEvery,
    ...(file.packageManager ? { packageManager: file.packageManager } : {}),
    limits: { ...DEFAULT_LIMITS, ...file.limits },
    permit: {
      sysctls: (file.permit?.sysctls ?? []).map(canonicalSetting),
      services: (file.permit?.services ?? []).map((n) => n.split(/[.@]/, 1)[0]),
      groups: file.permit?.groups ?? [],
      users: file.permit?.users ?? [],
    },
    own: {
      paths: [
        ...(flags.ownPaths ?? []),
        stateDir,
        configPath === DEFAULTS.configPath ? posix.dirname(configPath) : configPath,
        posix.dirname(bundlePath),
        ...runningProgramFiles(),
        // The launcher writes its state beside the metrics file (launcher/README.md).
        ...(file.metricsFile
          ? [posix.join(posix.dirname(file.metricsFile), LAUNCHER_METRICS_FILE)]
          : []),
      ],
      services: [PROGRAM],
    },
    ...(file.metricsFile ? { metricsFile: file.metricsFile } : {}),
  };
  if (config.metricsFile) checkMetricsFile(config.metricsFile, config);
  return config;
}

/**
 * The metrics file must lie where the host may write (inside a managed root, which the
 * permission set grants) and among none of its own files (its state directory, its
 * configuration, its installation): the host's output is not one of its inputs.
 */
function checkMetricsFile(path: string, config: HostConfig): void {
  const refuse = (why: string) => {
    throw new ConfigError("config.metrics-file", `metricsFile ${path} ${why}`, {
      hint: "point it into node_exporter's textfile directory, e.g. " +
        "/var/lib/prometheus/node-exporter/nox_mesh_host.prom",
    });
  };
  const own = ownRelation(path, compileOwnPaths(config.own.paths));
  if (own) refuse(`lies among the host's own files (${own.own})`);
  const roots = config.managedRoots;
  if (!roots.some((root) => isWithin(path, root) && path !== root)) {
    refuse(`is outside the managed roots (${roots.join(", ")}), where the host may not write`);
  }
}

async function readConfigFile(
  path: string,
  required: boolean,
): Promise<v.InferOutput<typeof FileSchema>> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound && !required) return {};
    throw new ConfigError(
      "config.read",
      `cannot read the configuration file ${path}: ${(error as Error).message}`,
      {
        hint: "create it, or point --config / NOX_MESH_HOST_CONFIG at another file",
        cause: error,
      },
    );
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new ConfigError("config.json", `${path} is not valid JSON (${(error as Error).message})`);
  }
  const result = v.safeParse(FileSchema, data, { abortEarly: false });
  if (!result.success) {
    const lines = result.issues.map((issue) => {
      const at = (issue.path ?? []).map((p) => String(p.key)).join(".") || "(top level)";
      return issue.kind === "validation"
        ? `${at}: ${issue.message}`
        : issue.expected === "never"
        ? `${at}: is not a known setting`
        : `${at}: expected ${issue.expected}, got ${issue.received}`;
    });
    throw new ConfigError(
      "config.invalid",
      `${path} has invalid settings:\n  ${lines.join("\n  ")}`,
      {
        hint: "fix them; the known settings are listed in host.json(5)",
      },
    );
  }
  return result.output;
}

/** The program file this process runs from (compiled binary or bundle), when it can be known. */
function runningProgramFiles(): string[] {
  const files: string[] = [];
  try {
    if (Deno.mainModule.startsWith("file:")) files.push(new URL(Deno.mainModule).pathname);
  } catch { /* not knowable under this permission set */ }
  try {
    // The runtime's executable; started through the glibc loader a package carries (the
    // tarball, Alpine), that loader: a file of the installation too.
    files.push(Deno.execPath());
  } catch { /* not knowable under this permission set */ }
  return files.filter((f) => pathProblem(f) === undefined);
}

function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}
