/**
 * The stand-in control plane's own records (DIR/mesh.json): the broker's
 * address and certificate facts, the control plane's key, admitted nodes and
 * minted tokens. From them it renders DIR/auth.conf, the `accounts` block
 * nats-server includes, and makes nats-server reload it (SIGHUP). Every change
 * runs under an exclusive lock on DIR/mesh.lock, so the CLI and a running
 * `serve` never overwrite each other.
 */
import { join } from "node:path";
import type { RouteCredentials } from "../lib/routes.ts";
import { NODE_ID } from "../../src/declaration/fields.ts";
import {
  CONTENT_SUBJECTS,
  joinPermissions,
  nodePermissions,
  type Permissions,
  subjectsOf,
} from "../../src/link/subjects.ts";

/** One admitted node. */
export interface NodeRecord {
  publicKey: string;
  admittedAt: string;
  /** The last serial published to it. */
  serial: number;
  revoked?: boolean;
}

/** One minted token (by its join key's public part). */
export interface TokenRecord {
  node: string;
  expires: string;
  mintedAt: string;
  usedAt?: string;
  /** Dropped from the broker (after its enrolment was answered, or never used). */
  retired?: boolean;
}

/** Everything the stand-in remembers. */
export interface MeshState {
  v: 1;
  /** The broker URL nodes use (goes into tokens). */
  url: string;
  /** The URL the control plane itself connects to (may differ inside a lab namespace). */
  controlUrl: string;
  caPem: string;
  pin: string;
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
   * Leaf servers of sites (by name): they hold the same accounts (reloaded with the
   * cluster) and a site's tokens name its leaf instead of the cluster's servers.
   */
  leaves?: Record<string, ClusterServer>;
  /**
   * The cluster's JetStream domain. A leaf without JetStream gets `$JS.API.>` denied on
   * its connection (nats-server: "JetStream Not Extended"), so on a leaf a node's
   * direct get is mapped to the domain's API (`$JS.<domain>.API.…`), which the
   * cluster maps back to its own.
   */
  domain?: string;
  nodes: Record<string, NodeRecord>;
  tokens: Record<string, TokenRecord>;
}

/** One server of a cluster, as the stand-in knows it. */
export interface ClusterServer {
  url: string;
  pin: string;
  pidFile: string;
  logFile: string;
}

/**
 * The brokers a token names: the leaf of site `via` when given, else every server of
 * the cluster, or the one broker.
 */
export function tokenBrokers(state: MeshState, via?: string): { url: string; pin: string }[] {
  if (via !== undefined) {
    const leaf = state.leaves?.[via];
    if (!leaf) throw new Error(`no leaf server "${via}" in this mesh`);
    return [{ url: leaf.url, pin: leaf.pin }];
  }
  return state.cluster?.map(({ url, pin }) => ({ url, pin })) ??
    [{ url: state.url, pin: state.pin }];
}

/** The state file, the auth block and the lock of a mesh directory. */
export function meshFiles(
  dir: string,
): { state: string; auth: string; leafAuth: string; lock: string } {
  return {
    state: join(dir, "mesh.json"),
    auth: join(dir, "auth.conf"),
    leafAuth: join(dir, "auth-leaf.conf"),
    lock: join(dir, "mesh.lock"),
  };
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
 * Write state and the auth block it implies (atomically each). Both auth blocks are
 * rendered first: a state that cannot be rendered (a hostile node name) writes nothing.
 */
export async function writeState(dir: string, state: MeshState): Promise<void> {
  const files = meshFiles(dir);
  const auth = renderAuth(state);
  const leafAuth = state.leaves ? renderAuth(state, new Date(), false) : undefined;
  await atomicWrite(files.state, JSON.stringify(state, null, 2) + "\n");
  await atomicWrite(files.auth, auth);
  if (leafAuth !== undefined) await atomicWrite(files.leafAuth, leafAuth);
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
    if (reload) await reloadBroker(state);
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

/** The broker account of the control plane: it alone holds the JetStream streams. */
export const CONTROL_ACCOUNT = "CONTROL";
/** The broker account of the one-time join keys (they only reach the enrolment service). */
export const JOIN_ACCOUNT = "JOIN";
/** The broker account of one node: nothing but that node's own subjects exist in it. */
export function nodeAccount(node: string): string {
  return `NODE_${node}`;
}

/**
 * The broker's accounts block (DESIGN.md §18). The streams live in CONTROL.
 * Each admitted node has an account of its own that imports only its
 * declaration (stream), the direct get of it, its report, inventory and heartbeat
 * subjects (services), and exports nothing. A
 * reply subject a node chooses is therefore a subject of its own account (a
 * service import answers through the broker's own mapping of it): a response
 * can never land in another node's subject or in the JetStream API. Join keys live in JOIN, which imports
 * only the enrolment service. Per-user permissions stay as well. `jetstream` false: the
 * same block for a site's leaf server (auth-leaf.conf), whose CONTROL has no JetStream.
 */
export function renderAuth(state: MeshState, now: Date = new Date(), jetstream = true): string {
  const q = (x: string) => JSON.stringify(x);
  const list = (xs: string[], indent: string) =>
    xs.length === 0 ? "[]" : `[\n${xs.map((x) => `${indent}  ${x}`).join("\n")}\n${indent}]`;
  const controlExports = [
    `{ service: "mesh.enrol.*", accounts: [${JOIN_ACCOUNT}] }`,
  ];
  const controlImports: string[] = [];
  const contentReaders: string[] = [];
  // On a leaf (jetstream false) a JetStream API subject crosses as the domain's API.
  const viaDomain = (subject: string) =>
    !jetstream && state.domain
      ? subject.replace(/^\$JS\.API\./, `$JS.${state.domain}.API.`)
      : subject;
  const accounts: string[] = [];
  // A node's account exists from its first token on, without a user until it is admitted.
  // nats-server 2.9.10 subscribes an account's service imports on a reload only when the
  // account was there before it (reload.go: addAllServiceImportSubs for carried-over
  // accounts; configureAccounts skips them while reloading): a node whose account came
  // with its admission reached no service (reports, direct get) until a later reload.
  // For the same reason a revoked node keeps its account (only its user goes): a node
  // whose account a reload removed and then added again got no link working after
  // readmission (seen in tests/run_test.ts), so accounts are never removed.
  const named = new Set([
    ...Object.keys(state.nodes),
    ...Object.values(state.tokens).map((token) => token.node),
  ]);
  for (const node of named) {
    checkNodeName(node);
    const record = state.nodes[node] as NodeRecord | undefined;
    const users = record && !record.revoked ? [user(record.publicKey, nodePermissions(node))] : [];
    const s = subjectsOf(node);
    const account = nodeAccount(node);
    const directGet = viaDomain(s.directGet);
    // Reports and the inventory are services CONTROL exports to the node: the
    // broker maps the node's reply subject to one of its own (`_R_.…`) in CONTROL,
    // so JetStream's acknowledgement finds its way back to the node's inbox and
    // can never be steered into a subject of CONTROL (the JetStream API) or of
    // another node. The heartbeat too: it was a stream the node exported to CONTROL,
    // and with nats-server 2.9.10 in a cluster a newly admitted node's heartbeats then
    // sometimes never reached MESH_BEAT (a stream import added by a reload, its
    // interest from another server), while its reports, a service, always did.
    controlExports.push(
      `{ service: ${q(directGet)}, accounts: [${q(account)}] }`,
      `{ stream: ${q(s.declaration)}, accounts: [${q(account)}] }`,
      `{ service: ${q(s.report)}, accounts: [${q(account)}] }`,
      `{ service: ${q(s.inventory)}, accounts: [${q(account)}] }`,
      `{ service: ${q(s.heartbeat)}, accounts: [${q(account)}] }`,
    );
    contentReaders.push(q(account));
    accounts.push(`  ${q(account)} {
    users: ${list(users, "    ")}
    imports: ${
      list([
        directGet === s.directGet
          ? `{ service: { account: ${CONTROL_ACCOUNT}, subject: ${q(s.directGet)} } }`
          : `{ service: { account: ${CONTROL_ACCOUNT}, subject: ${q(directGet)} }, to: ${
            q(s.directGet)
          } }`,
        `{ stream: { account: ${CONTROL_ACCOUNT}, subject: ${q(s.declaration)} } }`,
        `{ service: { account: ${CONTROL_ACCOUNT}, subject: ${q(s.report)} } }`,
        `{ service: { account: ${CONTROL_ACCOUNT}, subject: ${q(s.inventory)} } }`,
        `{ service: { account: ${CONTROL_ACCOUNT}, subject: ${q(s.heartbeat)} } }`,
        ...[CONTENT_SUBJECTS.directGet, CONTENT_SUBJECTS.metaGet].map((subject) =>
          viaDomain(subject) === subject
            ? `{ service: { account: ${CONTROL_ACCOUNT}, subject: ${q(subject)} } }`
            : `{ service: { account: ${CONTROL_ACCOUNT}, subject: ${q(viaDomain(subject))} }, ` +
              `to: ${q(subject)} }`
        ),
      ], "    ")
    }
  }`);
  }
  // The mesh's object store: read by direct get, by every admitted node's account.
  if (contentReaders.length > 0) {
    for (const subject of [CONTENT_SUBJECTS.directGet, CONTENT_SUBJECTS.metaGet]) {
      controlExports.push(
        `{ service: ${q(viaDomain(subject))}, accounts: [${contentReaders.join(", ")}] }`,
      );
    }
  }
  const joins: string[] = [];
  for (const [key, token] of Object.entries(state.tokens)) {
    if (!token.retired && Date.parse(token.expires) > now.getTime()) {
      joins.push(user(key, joinPermissions(token.node, key)));
    }
  }
  return `# generated by lab/mesh (the stand-in control plane); do not edit
accounts {
  ${CONTROL_ACCOUNT} {
    ${
    jetstream
      ? "jetstream: enabled"
      // A site's leaf: CONTROL without JetStream of its own, so that the leaf connection
      // carries CONTROL's JetStream API to the cluster (a leaf whose CONTROL had JetStream
      // enabled denies $JS.API.> on it: "JetStream Not Extended").
      : "# no JetStream here: the cluster's answers"
  }
    users: [ { nkey: ${state.control.publicKey} } ]
    exports: ${list(controlExports, "    ")}
    imports: ${list(controlImports, "    ")}
  }
  ${JOIN_ACCOUNT} {
    users: ${list(joins, "    ")}
    imports: [ { service: { account: ${CONTROL_ACCOUNT}, subject: "mesh.enrol.*" } } ]
  }
${accounts.join("\n")}
}
`;
}

function user(nkey: string, p: Permissions): string {
  const list = (xs: string[]) => `[${xs.map((x) => JSON.stringify(x)).join(", ")}]`;
  return `{ nkey: ${nkey}, permissions: { publish: { allow: ${list(p.publish)} }, ` +
    `subscribe: { allow: ${list(p.subscribe)} } } }`;
}

/**
 * Make nats-server load the current auth block: SIGHUP, then wait for the log
 * to say it reloaded (or why it did not).
 */
export async function reloadBroker(state: MeshState, timeoutMs = 10_000): Promise<void> {
  if (!state.cluster) return await reloadOne(state, timeoutMs);
  // A server that is down (killed by a scenario) reads the file when it starts again.
  const servers = [...state.cluster, ...Object.values(state.leaves ?? {})];
  await Promise.all(servers.map((server) => reloadOne(server, timeoutMs, true)));
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
