/**
 * The stand-in control plane's own records (DIR/mesh.json): the broker's
 * address and certificate facts, the control plane's key, admitted nodes and
 * minted tokens. From them it renders DIR/auth.conf, the `accounts` block
 * nats-server includes (and a site leaf's DIR/auth-leaf-NAME.conf; auth.ts), checks
 * each with `nats-server -t` before it replaces the one in use, and makes nats-server
 * reload it (SIGHUP); a reload a server refuses puts the files it last loaded back.
 * Every change runs under an exclusive lock on DIR/mesh.lock, so the CLI and a
 * running `serve` never overwrite each other.
 */
import { join } from "node:path";
import type { RouteCredentials } from "../lib/routes.ts";
import type { ServerCertificate } from "../lib/certs.ts";
import type { TrustList } from "../../src/link/trust.ts";
import { NODE_ID } from "../../src/declaration/fields.ts";
import { checkRendered, renderAuth, renderLeafAuth } from "./auth.ts";

/** One admitted node. */
export interface NodeRecord {
  publicKey: string;
  admittedAt: string;
  /** The last serial published to it. */
  serial: number;
  revoked?: boolean;
  /** The site (leaf server) it was admitted through, when not the cluster. */
  site?: string;
}

/** One minted token (by its join key's public part). */
export interface TokenRecord {
  node: string;
  expires: string;
  mintedAt: string;
  usedAt?: string;
  /** Dropped from the broker (after its enrolment was answered, or never used). */
  retired?: boolean;
  /** The site (leaf server) the token names, when not the cluster. */
  via?: string;
}

/** Everything the stand-in remembers. */
export interface MeshState {
  v: 1;
  /** The broker URL nodes use (goes into tokens). */
  url: string;
  /** The URL the control plane itself connects to (may differ inside a lab namespace). */
  controlUrl: string;
  /** The mesh's CA: the one the servers' certificates are issued by now (tokens carry it). */
  caPem: string;
  /** The single broker's certificate fingerprint (kept for tests; tokens carry no pin). */
  pin: string;
  /**
   * The files of the CA the servers' certificates are issued by, when the stand-in made
   * it (`renew-cert`, `rotate-ca` need its key); `bundleFile`: the CA file the servers
   * check each other's (routes, leaves) certificates by.
   */
  ca?: { certFile: string; keyFile: string; bundleFile?: string };
  /** A rotation under way (`rotate-ca`): the new CA's files, until `withdraw-ca`. */
  nextCa?: { certFile: string; keyFile: string };
  /**
   * The trust list published to the nodes with their declarations (src/link/trust.ts),
   * once the CA was rotated; absent: the token's CA (serial 0).
   */
  trust?: TrustList;
  /** The single broker's certificate (no cluster), to renew it. */
  cert?: ServerCertificate;
  control: { seed: string; publicKey: string };
  /**
   * The declaration signing key (an NKey operator pair): every declaration is
   * signed with it and tokens pin its public key. Whoever holds the seed holds
   * root on every node.
   */
  signer: { seed: string; publicKey: string };
  /**
   * The signing key's rotations, oldest first, each `from:to:sig` signed by the key
   * it leaves (src/link/signature.ts): sent with every declaration, so a node that
   * pins any earlier key follows them to `signer`. The keys rotated away from are
   * not kept.
   */
  rotations?: string[];
  /** nats-server's pid file and log, for reloads. */
  pidFile: string;
  logFile: string;
  /**
   * A cluster: every server (its URL for nodes, its certificate's pin, and its
   * pid file and log for reloads). Tokens then name every server; absent, the
   * one broker above.
   */
  cluster?: ClusterServer[];
  /** The URLs the control plane itself uses for a cluster (may differ inside a lab namespace). */
  controlUrls?: string[];
  /**
   * A cluster's route credentials (random per mesh): every server's routes log in
   * with them, over TLS under the mesh's CA. Never in the repository.
   */
  routes?: RouteCredentials;
  /**
   * Leaf servers of sites (by name, a node id's form): each holds its site's accounts
   * (reloaded with the cluster), logs in as its site, and a site's tokens name its leaf
   * instead of the cluster's servers.
   */
  leaves?: Record<string, LeafServer>;
  /**
   * The cluster's JetStream domain. A leaf without JetStream gets `$JS.API.>` denied on
   * its connection (nats-server: "JetStream Not Extended"), so on a leaf a node's
   * direct get is mapped to the domain's API (`$JS.<domain>.API.…`), which the
   * cluster maps back to its own.
   */
  domain?: string;
  nodes: Record<string, NodeRecord>;
  tokens: Record<string, TokenRecord>;
  /**
   * The objects each node may read (SHA-256 hex): those its last declaration names.
   * The broker grants exactly these (auth.ts); `declare` sets them before it publishes.
   */
  grants?: Record<string, string[]>;
  /** How much JetStream storage the object store reserves (bytes; streams.ts OBJECT_STORE_BYTES). */
  objectStoreBytes?: number;
  /**
   * The nodes' declaration consumers' idle heartbeat and acknowledgement wait (ms);
   * absent: DECLARATION_PUSH of src/link/subjects.ts (tests shorten them).
   */
  push?: { idleHeartbeatMs?: number; ackWaitMs?: number };
}

/** One server of a cluster, as the stand-in knows it. */
export interface ClusterServer {
  url: string;
  pin: string;
  pidFile: string;
  logFile: string;
  /** Its certificate's files and names (to renew it), when the stand-in knows them. */
  cert?: ServerCertificate;
}

/**
 * A site's leaf server: as a server of the cluster, plus its own login to the
 * cluster's leaf port (a user and a password random per site, for its site's account
 * only; nats-server 2.9 takes no nkey for a remote).
 */
export interface LeafServer extends ClusterServer {
  user?: string;
  password?: string;
}

/** Fresh login credentials for the leaf server of site `site` (keep them in mesh.json). */
export function newLeafCredentials(site: string): { user: string; password: string } {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return {
    user: `site-${site}`,
    password: Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(""),
  };
}

/**
 * The brokers a token names: the leaf of site `via` when given, else every server of
 * the cluster, or the one broker.
 */
export function tokenBrokers(state: MeshState, via?: string): string[] {
  if (via !== undefined) {
    const leaf = state.leaves?.[via];
    if (!leaf) throw new Error(`no leaf server "${via}" in this mesh`);
    return [leaf.url];
  }
  return state.cluster?.map(({ url }) => url) ?? [state.url];
}

/** Every server whose certificate the stand-in knows (the cluster and its leaves, or the one broker). */
export function certifiedServers(state: MeshState): { cert: ServerCertificate }[] {
  const all: { cert?: ServerCertificate }[] = state.cluster
    ? [...state.cluster, ...Object.values(state.leaves ?? {})]
    : [{ cert: state.cert }];
  return all.filter((s): s is { cert: ServerCertificate } => s.cert !== undefined);
}

/** The state file, the auth blocks and the lock of a mesh directory. */
export function meshFiles(
  dir: string,
): { state: string; auth: string; leafAuth: (site: string) => string; lock: string } {
  return {
    state: join(dir, "mesh.json"),
    auth: join(dir, "auth.conf"),
    leafAuth: (site: string) => join(dir, `auth-leaf-${site}.conf`),
    lock: join(dir, "mesh.lock"),
  };
}

/** Every broker configuration file the state renders, with its text. */
function renderAll(dir: string, state: MeshState): [string, string][] {
  const files = meshFiles(dir);
  // A site's name becomes an account name and a file name: the same rule as a node's.
  for (const site of Object.keys(state.leaves ?? {})) checkNodeName(site);
  return [
    [files.auth, renderAuth(state)],
    ...Object.keys(state.leaves ?? {}).sort().map((site): [string, string] => [
      files.leafAuth(site),
      renderLeafAuth(state, site),
    ]),
  ];
}

/** Read the state of a mesh directory. */
export async function readState(dir: string): Promise<MeshState> {
  try {
    return JSON.parse(await Deno.readTextFile(meshFiles(dir).state));
  } catch (error) {
    throw new Error(
      `${dir} is not a mesh directory (${
        (error as Error).message
      }); run "deno task mesh up" or "init" first`,
    );
  }
}

/**
 * Refuses a node name that is not a node id (src/declaration/fields.ts NODE_ID): the
 * name becomes an account name and subject tokens of the broker's configuration, where
 * a `.`, `*` or `>` would widen a node's permissions to other nodes' subjects and a quote
 * or newline would be configuration of its own.
 */
export function checkNodeName(node: string): void {
  if (!NODE_ID.test(node)) {
    throw new Error(
      `refusing node name ${JSON.stringify(node)}: a node id is 1–63 lowercase letters, ` +
        "digits and -, starting with a letter or digit",
    );
  }
}

/**
 * Write state and the auth blocks it implies (atomically each). Every block is rendered
 * and each one that changed is checked by nats-server (`-t`) first: a state that cannot
 * be rendered (a hostile node name) or that the broker would not load (a key of the
 * wrong type) writes nothing.
 */
export async function writeState(dir: string, state: MeshState): Promise<void> {
  const rendered = renderAll(dir, state);
  for (const [path, text] of rendered) {
    if (text !== await Deno.readTextFile(path).catch(() => undefined)) {
      await checkRendered(path, text);
    }
  }
  await atomicWrite(meshFiles(dir).state, JSON.stringify(state, null, 2) + "\n");
  for (const [path, text] of rendered) await atomicWrite(path, text);
}

/**
 * Run `change` on the state under the directory's lock, write it, and (with
 * `reload`) make nats-server load the new auth block before the lock is released.
 */
export async function withState<T>(
  dir: string,
  change: (state: MeshState) => T | Promise<T>,
  { reload = false }: { reload?: boolean } = {},
): Promise<T> {
  const lock = await Deno.open(meshFiles(dir).lock, { create: true, write: true });
  try {
    await lock.lock(true);
    const state = await readState(dir);
    const result = await change(state);
    await writeState(dir, state);
    if (reload) await reloadBroker(dir, state);
    return result;
  } finally {
    lock.close();
  }
}

/**
 * Reloads of mesh directory `dir` for one process (the enrolment service): a caller
 * waits for a reload that starts after its call; callers that arrive while one waits
 * or runs share the next one, and reloads are at least `gapMs` apart (the first is
 * at once). Each reload is a configuration reload of every server, and nats-server
 * closes on each one every connection still in its handshake (src/link/enrol.ts,
 * JOIN_RETRY_MS): eight enrolments at a time asked for sixteen back-to-back reloads,
 * and a node connecting then was refused on every try. Changes are written with
 * `withState` (no reload) before the call; the reload takes the lock, so it never
 * interleaves with another process's.
 */
export function reloader(dir: string, gapMs = 500): () => Promise<void> {
  let pending: Promise<void> | undefined;
  let previous: Promise<void> = Promise.resolve();
  let lastEnded = 0;
  return () => {
    if (pending) return pending;
    const after = previous;
    const next: Promise<void> = (async () => {
      await after.catch(() => {});
      const wait = lastEnded + gapMs - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      // From here on a caller's change may miss this reload's read: it waits for the next.
      pending = undefined;
      try {
        await withState(dir, () => {}, { reload: true });
      } finally {
        lastEnded = Date.now();
      }
    })();
    pending = next;
    previous = next;
    return next;
  };
}

/**
 * Make every server load the current auth blocks: SIGHUP, then wait for each log to
 * say it reloaded (or why it did not). The files every server took are kept
 * (`FILE.loaded`); when a server refuses them, those last loaded go back in place and
 * are loaded again, so that no server keeps a file on disk it would not start with,
 * and the error says what the server refused.
 */
export async function reloadBroker(
  dir: string,
  state: MeshState,
  timeoutMs = 10_000,
): Promise<void> {
  // A server that is down (killed by a scenario) reads the file when it starts again.
  const servers = state.cluster ? [...state.cluster, ...Object.values(state.leaves ?? {})] : [
    state,
  ];
  const files = renderedFiles(dir, state);
  try {
    await Promise.all(servers.map((server) => reloadOne(server, timeoutMs, !!state.cluster)));
  } catch (error) {
    let restored = 0;
    for (const path of files) {
      const loaded = await Deno.readTextFile(`${path}.loaded`).catch(() => undefined);
      if (loaded === undefined) continue;
      await atomicWrite(path, loaded);
      restored++;
    }
    if (restored > 0) {
      await Promise.allSettled(servers.map((server) => reloadOne(server, timeoutMs, true)));
    }
    throw new Error(
      `${(error as Error).message}; ${
        restored > 0
          ? "the configuration every server loaded last is back in place and loaded again"
          : "no configuration had been loaded before, nothing to put back"
      }`,
    );
  }
  for (const path of files) {
    await atomicWrite(`${path}.loaded`, await Deno.readTextFile(path));
  }
}

/** The auth files of a mesh directory's state (auth.conf, then each site's). */
function renderedFiles(dir: string, state: MeshState): string[] {
  const files = meshFiles(dir);
  return [files.auth, ...Object.keys(state.leaves ?? {}).sort().map(files.leafAuth)];
}

async function reloadOne(
  state: { pidFile: string; logFile: string },
  timeoutMs: number,
  skipDown = false,
): Promise<void> {
  const before = count(await readLog(state.logFile));
  let pid: number;
  try {
    pid = Number((await Deno.readTextFile(state.pidFile)).trim());
    Deno.kill(pid, "SIGHUP");
  } catch (error) {
    if (skipDown) return;
    throw error;
  }
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const log = await readLog(state.logFile);
    if (count(log) > before) return;
    const failed = /Failed to reload server configuration: ([^\n]*)/.exec(log.slice(-4000));
    if (
      failed &&
      log.lastIndexOf("Failed to reload") > log.lastIndexOf("Reloaded server configuration")
    ) {
      throw new Error(`nats-server refused the new configuration: ${failed[1]}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nats-server did not reload within ${timeoutMs} ms (log ${state.logFile})`);
}

function count(log: string): number {
  return log.split("Reloaded server configuration").length - 1;
}

async function readLog(path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch {
    return "";
  }
}

async function atomicWrite(path: string, text: string): Promise<void> {
  const temp = `${path}.tmp`;
  await Deno.writeTextFile(temp, text, { mode: 0o600 }); // mesh.json holds the signing seed
  await Deno.rename(temp, path);
}
