/**
 * Test helpers for the link: a real nats-server on 127.0.0.1 with the stand-in
 * control plane (lab/mesh), and the host as a long-running real process under
 * the development permission set (never -A).
 */
import { posix } from "node:path";
import {
  type LocalBroker,
  type LocalCluster,
  startLocalBroker,
  startLocalCluster,
} from "../lab/mesh/local_broker.ts";
import { ControlPlane } from "../lab/mesh/control.ts";
import { hostPermissionFlags } from "./_helpers.ts";

const REPO = new URL("..", import.meta.url).pathname;

/** A broker plus a connected control plane answering enrolments. */
export interface Mesh extends AsyncDisposable {
  dir: string;
  broker: LocalBroker;
  control: ControlPlane;
  /** Stop the broker (the control plane keeps trying to reconnect). */
  stopBroker(): Promise<void>;
  /** Start the broker again on the same port with the same state and streams. */
  startBroker(): Promise<void>;
}

/** A three-server cluster on 127.0.0.1 and its control plane, in a fresh directory. */
export interface ClusterMesh extends AsyncDisposable {
  dir: string;
  cluster: LocalCluster;
  control: ControlPlane;
}

/**
 * Start a cluster of three and open its control plane (answering enrolments when
 * `enrolments`); disposing closes the control plane, stops the servers and removes
 * the directory.
 */
export async function startClusterMesh(
  prefix: string,
  { enrolments = false, sites = false, leafAdvertise }: {
    enrolments?: boolean;
    sites?: boolean;
    /** The leaf address each member tells leaf servers of (lab/mesh/local_broker.ts). */
    leafAdvertise?: string[];
  } = {},
): Promise<ClusterMesh> {
  const dir = await Deno.makeTempDir({ prefix });
  let cluster: LocalCluster | undefined;
  try {
    cluster = await startLocalCluster(dir, { size: 3, sites, leafAdvertise });
    const control = await ControlPlane.open(dir);
    if (enrolments) control.serveEnrolments();
    control.serveObjects();
    const started = cluster;
    return {
      dir,
      cluster: started,
      control,
      async [Symbol.asyncDispose]() {
        await control.close();
        await started.stop();
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      },
    };
  } catch (error) {
    await cluster?.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw error;
  }
}

/**
 * Start a broker on loopback and its control plane, answering enrolments; `ips`: more
 * addresses the broker's certificate names (where a test's relay makes it reachable).
 */
export async function startMesh({ ips }: { ips?: string[] } = {}): Promise<Mesh> {
  const dir = await Deno.makeTempDir({ prefix: "noxln-mesh-" });
  let broker: LocalBroker | undefined;
  let control: ControlPlane | undefined;
  try {
    broker = await startLocalBroker(dir, { ips });
    control = await ControlPlane.open(dir);
    control.serveEnrolments();
    control.serveObjects();
  } catch (error) {
    await control?.close();
    await broker?.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw error;
  }
  const mesh: Mesh = {
    dir,
    broker,
    control,
    async stopBroker() {
      await mesh.broker.stop();
    },
    async startBroker() {
      mesh.broker = await startLocalBroker(dir, { ips });
    },
    async [Symbol.asyncDispose]() {
      await mesh.control.close();
      await mesh.broker.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
  return mesh;
}

/** A host process that keeps running (`run`), with its log collected. */
export interface HostProcess extends AsyncDisposable {
  child: Deno.ChildProcess;
  /** Everything it wrote on stderr so far. */
  log(): string;
  /** Wait until the log matches; returns the match. */
  waitLog(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Resolves with the exit code. */
  exited: Promise<number>;
  /** Send a signal and wait for the exit code. */
  stop(signal?: Deno.Signal): Promise<number>;
}

/** The program to run: the source entry point, or a bundle file. */
export type Program = { source: true } | { bundle: string };

/**
 * Start `nox-mesh-host ARGS` as a real process under the development permission set;
 * `via` runs it through a prefix (`ip netns exec NS`: inside a test's network namespace).
 */
export async function spawnHost(
  args: string[],
  env: Record<string, string>,
  program: Program = { source: true },
  via: readonly string[] = [],
): Promise<HostProcess> {
  const entry = "bundle" in program ? program.bundle : posix.join(REPO, "mod.ts");
  const argv = [
    ...via,
    Deno.execPath(),
    "run",
    "--quiet",
    ...(await hostPermissionFlags()),
    entry,
    ...args,
  ];
  const child = new Deno.Command(argv[0], {
    args: argv.slice(1),
    env,
    cwd: REPO,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  const reading = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) text += decoder.decode(chunk, { stream: true });
  })();
  const exited = child.status.then(async (s) => {
    await reading;
    return s.code;
  });
  let done = false;
  exited.then(() => done = true);
  const host: HostProcess = {
    child,
    log: () => text,
    async waitLog(pattern, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = text.match(pattern);
        if (m) return m;
        if (done) throw new Error(`the host exited before logging ${pattern}; log:\n${text}`);
        if (Date.now() > deadline) {
          throw new Error(`the host did not log ${pattern} in time; log:\n${text}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    exited,
    async stop(signal = "SIGTERM") {
      if (!done) {
        try {
          child.kill(signal);
        } catch { /* already gone */ }
      }
      return await exited;
    },
    async [Symbol.asyncDispose]() {
      if (done) return;
      const timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch { /* gone */ }
      }, 15_000);
      await host.stop("SIGTERM");
      clearTimeout(timer);
    },
  };
  return host;
}

/** Wait until `probe` returns something other than undefined. */
export async function until<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A file resource owned by root (declaration JSON). */
export function fileResource(id: string, path: string, content: string): Record<string, unknown> {
  return { type: "file", id, path, content, mode: "0644", owner: "root", group: "root" };
}
