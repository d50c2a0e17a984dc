/**
 * The stand-in control plane's own records (DIR/mesh.json): the broker's address and
 * certificate facts, the operator's and accounts' keys (NATS operator mode:
 * lab/mesh/operator.ts), admitted nodes and minted tokens. No server's configuration
 * holds a node, a key or a grant: what the broker must know of them goes to the servers
 * as account JWTs pushed through the system account (control.ts), which each server's
 * full resolver keeps in its own directory, across restarts. DIR/operator.conf (the
 * operator part every server includes, written once when the mesh is made) never
 * changes. Nothing here reloads a server for them.
 *
 * Every change runs under an exclusive lock on DIR/mesh.lock, so the CLI and a running
 * `serve` never overwrite each other; the changes one process makes at the same moment
 * share one read and one write of mesh.json (`withState`), which at ten thousand nodes
 * is a few megabytes.
 */
import { join } from "node:path";
import type { RouteCredentials } from "../lib/routes.ts";
import type { ServerCertificate } from "../lib/certs.ts";
import type { TrustList } from "../../src/link/trust.ts";
import { NODE_ID } from "../../src/declaration/fields.ts";
import type { AccountState, OperatorSeeds } from "./operator.ts";

/** One admitted node. */
export interface NodeRecord {
  publicKey: string;
  admittedAt: string;
  /** The last serial published to it. */
  serial: number;
  revoked?: boolean;
  /** When it was revoked (its key is on the nodes' account's revocation list since). */
  revokedAt?: string;
  /** Keys it was admitted with before (enrolled again): each revoked when it was replaced. */
  replaced?: { publicKey: string; at: string }[];
  /** The site (leaf server) it was admitted through, when not the cluster. */
  site?: string;
}

/** One minted token (by its join key's public part). */
export interface TokenRecord {
  node: string;
  expires: string;
  mintedAt: string;
  /** When it was spent (its join key is revoked since, until it expires). */
  usedAt?: string;
  /** The key it admitted (a second ask with that key is answered as the first). */
  admitted?: string;
  /** The site (leaf server) the token names, when not the cluster. */
  via?: string;
}

/** Everything the stand-in remembers. */
export interface MeshState {
  v: 2;
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
  /**
   * The operator's, the accounts' and the control plane's and system's users' seeds
   * (lab/mesh/operator.ts). Whoever holds them holds the broker.
   */
  operator: OperatorSeeds;
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
  /** nats-server's pid file and log (the single broker), for certificate reloads. */
  pidFile: string;
  logFile: string;
  /**
   * A cluster: every server (its URL for nodes, its certificate's pin, and its
   * pid file and log for certificate reloads). Tokens then name every server; absent,
   * the one broker above.
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
   * Leaf servers of sites (by name, a node id's form): each logs into the cluster as a
   * user of its site's scoped signing keys (its creds files, 0600 in the mesh
   * directory), and a site's tokens name its leaf instead of the cluster's servers.
   */
  leaves?: Record<string, LeafServer>;
  /** The cluster's JetStream domain (when sites were planned). */
  domain?: string;
  nodes: Record<string, NodeRecord>;
  tokens: Record<string, TokenRecord>;
  /**
   * The objects each node may read (SHA-256 hex): those its last declaration names.
   * The object service answers by these (control.ts); `declare` sets them before it
   * publishes. No server's configuration follows them.
   */
  grants?: Record<string, string[]>;
  /** How much JetStream storage the object store reserves (bytes; streams.ts OBJECT_STORE_BYTES). */
  objectStoreBytes?: number;
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
 * A site's leaf server: as a server of the cluster, plus the creds files of its two
 * logins into the cluster (a user of the nodes' account and one of the join account,
 * each signed by the site's scoped signing key).
 */
export interface LeafServer extends ClusterServer {
  credsFile?: string;
  joinCredsFile?: string;
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

/** The state file, the operator include and the lock of a mesh directory. */
export function meshFiles(
  dir: string,
): {
  state: string;
  operator: string;
  lock: string;
  leafCreds: (site: string) => string;
  leafJoinCreds: (site: string) => string;
} {
  return {
    state: join(dir, "mesh.json"),
    operator: join(dir, "operator.conf"),
    lock: join(dir, "mesh.lock"),
    leafCreds: (site: string) => join(dir, `site-${site}.creds`),
    leafJoinCreds: (site: string) => join(dir, `site-${site}-join.creds`),
  };
}

/**
 * Every node with a record: admitted ones and those a token was minted for (each stream
 * reserves a share for each; streams.ts).
 */
export function namedNodes(state: MeshState): string[] {
  const named = new Set([
    ...Object.keys(state.nodes),
    ...Object.values(state.tokens).map((token) => token.node),
  ]);
  return [...named].sort();
}

/** The sites a node belongs to: those its tokens named, and the one it was admitted through. */
export function sitesOf(state: MeshState, node: string): string[] {
  const sites = new Set<string>();
  for (const token of Object.values(state.tokens)) {
    if (token.node === node && token.via !== undefined) sites.add(token.via);
  }
  const site = state.nodes[node]?.site;
  if (site !== undefined) sites.add(site);
  return [...sites].filter((s) => state.leaves?.[s] !== undefined).sort();
}

const epoch = (iso: string) => Math.floor(Date.parse(iso) / 1000);

/**
 * How long after its enrolment was answered a spent join key goes on the join account's
 * revocation list. The servers close a revoked user's connection at once, and the answer
 * may still be on its way to it (across a route, from another server): revoked at once,
 * one node in six lost its answer on a three-server cluster (the answer's JWT with it).
 * Meanwhile the control plane refuses the key's second use itself; the enrolment
 * request's own timeout is 20 s.
 */
export const JOIN_REVOCATION_DELAY_MS = 25_000;

/**
 * What the account JWTs must say for `state` (lab/mesh/operator.ts): the nodes' account's
 * revocations (revoked nodes' keys, and keys a node was admitted with before), the join
 * account's (spent join keys, `joinDelayMs` after their answer, JOIN_REVOCATION_DELAY_MS
 * unless said, and until their token expires: the JWT ends then anyway), and each site's scope (its nodes that are not
 * revoked, its live join keys).
 */
export function accountState(
  state: MeshState,
  now: Date = new Date(),
  joinDelayMs: number = JOIN_REVOCATION_DELAY_MS,
): AccountState {
  const revokedNodes: Record<string, number> = {};
  for (const record of Object.values(state.nodes)) {
    for (const old of record.replaced ?? []) revokedNodes[old.publicKey] = epoch(old.at);
    if (record.revoked) {
      revokedNodes[record.publicKey] = epoch(record.revokedAt ?? record.admittedAt);
    }
  }
  const revokedJoins: Record<string, number> = {};
  const live = (t: TokenRecord) => Date.parse(t.expires) > now.getTime();
  const settled = (t: TokenRecord) => Date.parse(t.usedAt!) + joinDelayMs <= now.getTime();
  for (const [key, token] of Object.entries(state.tokens)) {
    if (token.usedAt && live(token) && settled(token)) revokedJoins[key] = epoch(token.usedAt);
  }
  const sites: AccountState["sites"] = {};
  for (const site of Object.keys(state.leaves ?? {}).sort()) {
    const nodes = namedNodes(state).filter((n) =>
      sitesOf(state, n).includes(site) && !state.nodes[n]?.revoked
    );
    const joins = Object.entries(state.tokens)
      .filter(([, t]) => t.via === site && live(t))
      .map(([key, t]) => ({ node: t.node, key }))
      .sort((a, b) => a.key.localeCompare(b.key));
    sites[site] = { nodes, joins };
  }
  return { revokedNodes, revokedJoins, sites };
}

/** Read the state of a mesh directory. */
export async function readState(dir: string): Promise<MeshState> {
  let state: MeshState;
  try {
    state = JSON.parse(await Deno.readTextFile(meshFiles(dir).state));
  } catch (error) {
    throw new Error(
      `${dir} is not a mesh directory (${
        (error as Error).message
      }); run "deno task mesh up" or "init" first`,
    );
  }
  if (state.v !== 2 || !state.operator) {
    throw new Error(
      `${dir} holds a mesh of the stand-in from before operator mode (every node's key in ` +
        "the servers' configuration): make a new mesh directory, and enrol its nodes again " +
        "with new tokens",
    );
  }
  return state;
}

/**
 * Refuses a node name that is not a node id (src/declaration/fields.ts NODE_ID): the
 * name becomes subject tokens of a node's permissions and of a site's scope, where a
 * `.`, `*` or `>` would widen a node's permissions to other nodes' subjects, and a JWT's
 * names.
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
 * Write `state` (atomically). Every node and site name is checked first: a state with a
 * name that is not a node id writes nothing.
 */
export async function writeState(dir: string, state: MeshState): Promise<void> {
  for (const node of namedNodes(state)) checkNodeName(node);
  for (const site of Object.keys(state.leaves ?? {})) checkNodeName(site);
  await atomicWrite(meshFiles(dir).state, JSON.stringify(state) + "\n");
}

/** Changes waiting for a write of one directory, in this process. */
interface Batch {
  changes: {
    change: (state: MeshState) => unknown;
    resolve: (value: unknown) => void;
    reject: (error: unknown) => void;
  }[];
  running?: Promise<void>;
}

const batches = new Map<string, Batch>();

/**
 * Run `change` on the state under the directory's lock and write it. Changes that arrive
 * while a write of the same directory is under way in this process wait for it and are
 * then made together, on one read and one write (an enrolment service admitting many
 * nodes at once writes mesh.json once for all of them). A change that throws is refused
 * alone (it must throw before it changes anything: the others' changes are written).
 */
export function withState<T>(
  dir: string,
  change: (state: MeshState) => T | Promise<T>,
): Promise<T> {
  let batch = batches.get(dir);
  if (!batch) batches.set(dir, batch = { changes: [] });
  const done = new Promise<T>((resolve, reject) => {
    batch!.changes.push({
      change,
      resolve: resolve as (value: unknown) => void,
      reject,
    });
  });
  if (!batch.running) batch.running = drain(dir, batch);
  return done;
}

async function drain(dir: string, batch: Batch): Promise<void> {
  // Let the changes of this moment gather.
  await new Promise((resolve) => setTimeout(resolve, 0));
  while (batch.changes.length > 0) {
    const changes = batch.changes.splice(0);
    const results: { ok: boolean; value: unknown }[] = [];
    try {
      const lock = await Deno.open(meshFiles(dir).lock, { create: true, write: true });
      try {
        await lock.lock(true);
        const state = await readState(dir);
        for (const { change } of changes) {
          try {
            results.push({ ok: true, value: await change(state) });
          } catch (error) {
            results.push({ ok: false, value: error });
          }
        }
        await writeState(dir, state);
      } finally {
        lock.close();
      }
    } catch (error) {
      changes.forEach(({ reject }) => reject(error));
      continue;
    }
    changes.forEach(({ resolve, reject }, i) =>
      results[i].ok ? resolve(results[i].value) : reject(results[i].value)
    );
  }
  batch.running = undefined;
}

/**
 * Make every server load its certificate files again (SIGHUP), then wait for each log to
 * say it reloaded, or why it did not: a renewed certificate, a rotated CA. Nothing about
 * nodes, tokens or grants is in a server's configuration: none of those reloads.
 */
export async function reloadBroker(
  _dir: string,
  state: MeshState,
  timeoutMs = 10_000,
): Promise<void> {
  // A server that is down (killed by a scenario) reads the files when it starts again.
  const servers = state.cluster ? [...state.cluster, ...Object.values(state.leaves ?? {})] : [
    state,
  ];
  await Promise.all(servers.map((server) => reloadOne(server, timeoutMs, !!state.cluster)));
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

/** Write `text` to `path` through a temporary file (0600: mesh.json holds every seed). */
export async function atomicWrite(path: string, text: string): Promise<void> {
  const temp = `${path}.tmp`;
  await Deno.writeTextFile(temp, text, { mode: 0o600 });
  await Deno.rename(temp, path);
}
