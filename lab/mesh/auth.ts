/**
 * The broker configuration the stand-in control plane renders from its records
 * (DESIGN.md §18): the `accounts` block every server of the mesh includes
 * (auth.conf), and one per site for that site's leaf server (auth-leaf-NAME.conf).
 * Every rendering is checked by `nats-server -t` before it is written (state.ts).
 *
 * - `CONTROL` holds the streams, each node's declaration consumer and the control
 *   plane's user. It exports, per node, where that node's consumer delivers (stream),
 *   its acknowledgements and flow control, its direct get, report, inventory, heartbeat
 *   and object reads (services) to the node's account only (the object reads are
 *   answered by the control plane, which checks the node's declaration names the
 *   object: no configuration follows what a declaration names); the enrolment service
 *   to `JOIN`.
 * - `NODE_<n>` per node: its user (nodePermissions of src/link/subjects.ts), its
 *   imports, nothing exported, and limits on what it may send (NODE_LIMITS).
 * - `JOIN`: the live join keys, each allowed to publish only its own enrolment subject.
 * - `SITE_<s>` per site: the login of that site's leaf server (a user and password of
 *   its own, leaf connections only), importing exactly what the site's nodes use: a
 *   leaf reaches no other node, no other object and no JetStream API.
 *
 * A site's leaf server holds `UPLINK` (bound to its `SITE_<s>` on the cluster) and
 * the accounts of the site's nodes and join keys only.
 */
import {
  ENROL_SUBJECTS,
  joinPermissions,
  NODE_LIMITS,
  nodePermissions,
  type Permissions,
  SITE_PUSH,
  subjectsOf,
} from "../../src/link/subjects.ts";
import { checkNodeName, type MeshState, type NodeRecord } from "./state.ts";
import {
  type NatsAccount,
  type NatsExport,
  type NatsImport,
  type NatsUser,
  renderNatsAccounts,
} from "../lib/nats_config.ts";

/** The broker account of the control plane: it alone holds the JetStream streams. */
export const CONTROL_ACCOUNT = "CONTROL";
/** The broker account of the one-time join keys (they only reach the enrolment service). */
export const JOIN_ACCOUNT = "JOIN";
/** On a site's leaf server: the account bound to its site's account on the cluster. */
export const UPLINK_ACCOUNT = "UPLINK";
/** The broker account of one node: nothing but that node's own subjects exist in it. */
export function nodeAccount(node: string): string {
  return `NODE_${node}`;
}
/** The broker account a site's leaf server logs into on the cluster. */
export function siteAccount(site: string): string {
  return `SITE_${site}`;
}

/** What a node's account may use on a server (account `limits`). */
const NODE_ACCOUNT_LIMITS = {
  max_payload: NODE_LIMITS.maxPayload,
  // A running host holds one connection (enrolment proves its key with a second, and a
  // confirm window opens a short-lived one to prove new connections get through) and
  // a few subscriptions; these bound what a node that misbehaves can make a server hold.
  max_connections: 16,
  max_subscriptions: 100,
};
/** What the join account may send: enrolment requests, a few hundred bytes each. */
const JOIN_ACCOUNT_LIMITS = { max_payload: 4096 };

/**
 * Every node with an account: admitted ones and those a token was minted for. A
 * node's account exists from its first token on, and is never removed: nats-server
 * 2.9.10 subscribes an account's service imports on a reload only when the account
 * existed before it (reload.go: addAllServiceImportSubs for carried-over accounts), so
 * an account that came with its admission reached no service until a later reload;
 * and a node whose account a reload removed and then added again got no link working
 * after readmission (seen in tests/run_service_test.ts).
 */
export function namedNodes(state: MeshState): string[] {
  const named = new Set([
    ...Object.keys(state.nodes),
    ...Object.values(state.tokens).map((token) => token.node),
  ]);
  for (const node of named) checkNodeName(node);
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

/**
 * The site whose leaf carries `node`'s declarations: the one it was admitted through,
 * else the one its latest token names; undefined for a node of the cluster.
 */
export function pushSiteOf(state: MeshState, node: string): string | undefined {
  const record = state.nodes[node];
  const known = (site: string | undefined) =>
    site !== undefined && state.leaves?.[site] !== undefined ? site : undefined;
  if (record) return known(record.site);
  let latest: { via?: string; mintedAt: string } | undefined;
  for (const token of Object.values(state.tokens)) {
    if (token.node === node && (!latest || token.mintedAt > latest.mintedAt)) latest = token;
  }
  return known(latest?.via);
}

/** Where `node`'s declaration consumer delivers, on the cluster (SITE_PUSH for a site's node). */
export function pushSubjectOf(state: MeshState, node: string): string {
  const site = pushSiteOf(state, node);
  return site === undefined ? subjectsOf(node).push : SITE_PUSH.node(site, node);
}

/** The import of stream `subject` from `from`, arriving as `local`. */
function streamImport(from: string, subject: string, local = subject): NatsImport {
  return { kind: "stream", account: from, subject, to: local };
}

/** A user entry: an nkey with its permissions, client connections only. */
function user(nkey: string, permissions: Permissions): NatsUser {
  return { nkey, connectionTypes: ["STANDARD"], permissions };
}

/** The live join keys of tokens through `via` (undefined: through the cluster). */
function joinUsers(state: MeshState, now: Date, via: string | undefined): NatsUser[] {
  const users: NatsUser[] = [];
  for (const [key, token] of Object.entries(state.tokens)) {
    if (token.via !== via || token.retired || Date.parse(token.expires) <= now.getTime()) continue;
    users.push(user(key, joinPermissions(token.node, key)));
  }
  return users;
}

/** The user of an admitted, unrevoked node, with its permissions. */
function nodeUsers(state: MeshState, node: string): NatsUser[] {
  const record = state.nodes[node] as NodeRecord | undefined;
  return record && !record.revoked ? [user(record.publicKey, nodePermissions(node))] : [];
}

/**
 * The import of `subject` from `from` as a service, arriving in the importer as
 * `local` (on a leaf: a JetStream API subject crosses as the cluster domain's).
 */
function serviceImport(from: string, subject: string, local = subject): NatsImport {
  return { kind: "service", account: from, subject, to: local };
}

/**
 * A node's account: its user, its limits, and imports of its own subjects from `from`;
 * `push` is where its consumer's deliveries arrive from `from`, imported as its push subject.
 */
function nodeAccountBlock(
  state: MeshState,
  node: string,
  from: string,
  push: string,
  remote: (subject: string) => string = (s) => s,
): NatsAccount {
  const s = subjectsOf(node);
  const imports = [
    serviceImport(from, remote(s.directGet), s.directGet),
    streamImport(from, push, s.push),
    serviceImport(from, s.ack),
    serviceImport(from, s.flowControl),
    serviceImport(from, s.report),
    serviceImport(from, s.inventory),
    serviceImport(from, s.heartbeat),
    serviceImport(from, s.objects),
  ];
  return {
    name: nodeAccount(node),
    users: nodeUsers(state, node),
    imports,
    limits: NODE_ACCOUNT_LIMITS,
  };
}

/**
 * Exports of one node's subjects to `accounts` (its own, and the sites' that carry it);
 * where its consumer delivers (`push`) to its own account only (a site imports all of its
 * nodes' at once: SITE_PUSH).
 */
function nodeExports(
  node: string,
  accounts: string[],
  directGet: string,
  push: string,
): NatsExport[] {
  const s = subjectsOf(node);
  const service = (subject: string): NatsExport => ({ kind: "service", subject, accounts });
  return [
    service(directGet),
    { kind: "stream", subject: push, accounts: [nodeAccount(node)] },
    service(s.ack),
    service(s.flowControl),
    service(s.report),
    service(s.inventory),
    service(s.heartbeat),
    service(s.objects),
  ];
}

/**
 * The cluster's accounts block (auth.conf; also the one broker's). A reply subject a
 * node chooses is a subject of its own account (a service import answers through the
 * broker's own mapping of it): a response can never land in another node's subject or
 * in the JetStream API.
 */
export function renderAuth(state: MeshState, now: Date = new Date()): string {
  const nodes = namedNodes(state);
  const siteNames = Object.keys(state.leaves ?? {}).sort();
  const exports: NatsExport[] = [
    { kind: "service", subject: ENROL_SUBJECTS, accounts: [JOIN_ACCOUNT] },
  ];
  const accounts: NatsAccount[] = [];
  const readersOf = (node: string) => [
    nodeAccount(node),
    ...sitesOf(state, node).map(siteAccount),
  ];
  for (const site of siteNames) {
    exports.push({ kind: "stream", subject: SITE_PUSH.all(site), accounts: [siteAccount(site)] });
  }
  for (const node of nodes) {
    exports.push(
      ...nodeExports(node, readersOf(node), subjectsOf(node).directGet, pushSubjectOf(state, node)),
    );
    const sites = sitesOf(state, node).map(siteAccount);
    if (sites.length > 0) {
      exports.push({ kind: "service", subject: `mesh.enrol.${node}.*`, accounts: sites });
    }
    accounts.push(nodeAccountBlock(state, node, CONTROL_ACCOUNT, pushSubjectOf(state, node)));
  }
  for (const site of siteNames) accounts.push(siteAccountBlock(state, site, nodes));
  return renderNatsAccounts("generated by lab/mesh (the stand-in control plane); do not edit", [
    {
      name: CONTROL_ACCOUNT,
      jetstream: true,
      users: [{ nkey: state.control.publicKey, connectionTypes: ["STANDARD"] }],
      exports,
    },
    {
      name: JOIN_ACCOUNT,
      users: joinUsers(state, now, undefined),
      imports: [serviceImport(CONTROL_ACCOUNT, ENROL_SUBJECTS)],
      limits: JOIN_ACCOUNT_LIMITS,
    },
    ...accounts,
  ]);
}

/**
 * A site's account on the cluster: its leaf server's login (leaf connections only) and
 * imports of what the site's nodes use. The direct gets arrive from the leaf in the
 * cluster domain's form (`$JS.<domain>.API.…`), which the cluster maps to `$JS.API.…`
 * in the leaf's account before the imports are matched.
 */
function siteAccountBlock(state: MeshState, site: string, nodes: string[]): NatsAccount {
  const leaf = state.leaves![site];
  // Every node's deliveries, present from the site's first render on (SITE_PUSH).
  const imports: NatsImport[] = [streamImport(CONTROL_ACCOUNT, SITE_PUSH.all(site))];
  for (const node of nodes.filter((n) => sitesOf(state, n).includes(site))) {
    const s = subjectsOf(node);
    imports.push(
      serviceImport(CONTROL_ACCOUNT, s.directGet),
      serviceImport(CONTROL_ACCOUNT, s.ack),
      serviceImport(CONTROL_ACCOUNT, s.flowControl),
      serviceImport(CONTROL_ACCOUNT, s.report),
      serviceImport(CONTROL_ACCOUNT, s.inventory),
      serviceImport(CONTROL_ACCOUNT, s.heartbeat),
      serviceImport(CONTROL_ACCOUNT, s.objects),
      serviceImport(CONTROL_ACCOUNT, `mesh.enrol.${node}.*`),
    );
  }
  const users: NatsUser[] = leaf.password === undefined ? [] : [
    { user: leaf.user ?? `site-${site}`, password: leaf.password, connectionTypes: ["LEAFNODE"] },
  ];
  return {
    name: siteAccount(site),
    users,
    imports,
    limits: { max_payload: NODE_LIMITS.maxPayload },
  };
}

/**
 * The accounts block of site `site`'s leaf server (auth-leaf-NAME.conf): `UPLINK`
 * (bound to the site's account on the cluster; no JetStream here) exporting to each of
 * the site's nodes its own subjects, and the site's join keys. A JetStream API subject
 * crosses the leaf connection as the cluster domain's (a leaf connection denies
 * `$JS.API.>`): a node's direct gets are imported as `$JS.<domain>.API.…` mapped to
 * the subjects the node asks for.
 */
export function renderLeafAuth(state: MeshState, site: string, now: Date = new Date()): string {
  if (!state.leaves?.[site]) throw new Error(`no leaf server "${site}" in this mesh`);
  const nodes = namedNodes(state).filter((n) => sitesOf(state, n).includes(site));
  const viaDomain = (subject: string) =>
    state.domain ? subject.replace(/^\$JS\.API\./, `$JS.${state.domain}.API.`) : subject;
  const exports: NatsExport[] = [];
  const joinImports: NatsImport[] = [];
  const accounts: NatsAccount[] = [];
  for (const node of nodes) {
    const push = SITE_PUSH.node(site, node);
    exports.push(
      ...nodeExports(node, [nodeAccount(node)], viaDomain(subjectsOf(node).directGet), push),
    );
    exports.push({ kind: "service", subject: `mesh.enrol.${node}.*`, accounts: [JOIN_ACCOUNT] });
    joinImports.push(serviceImport(UPLINK_ACCOUNT, `mesh.enrol.${node}.*`));
    accounts.push(nodeAccountBlock(state, node, UPLINK_ACCOUNT, push, viaDomain));
  }
  const header = `generated by lab/mesh (the stand-in control plane) for site ${site}; do not edit`;
  return renderNatsAccounts(header, [
    {
      name: UPLINK_ACCOUNT,
      note: `no users, no JetStream: bound to ${siteAccount(site)} on the cluster`,
      exports,
      // The answers to what the site's nodes ask come back to reply subjects of this
      // account (_R_.<prefix>.…, a new prefix after each reload). nats-server 2.9.10 tells
      // the cluster of a new prefix only while the leaf is on its first connection (its
      // account's internal client keeps the account object of that time): after the leaf
      // reconnected, a reload cut every answer off until it reconnected again. A mapping's
      // source is sent as interest on every connection: the cluster forwards them all.
      mappings: { "_R_.>": "_R_.>" },
    },
    {
      name: JOIN_ACCOUNT,
      users: joinUsers(state, now, site),
      imports: joinImports,
      limits: JOIN_ACCOUNT_LIMITS,
    },
    ...accounts,
  ]);
}

/**
 * Check a rendered configuration with the broker itself (`nats-server -t`) before it
 * replaces the one in use: throws, with nats-server's words, when it would not load.
 */
export async function checkRendered(path: string, text: string): Promise<void> {
  const candidate = `${path}.check`;
  await Deno.writeTextFile(candidate, text, { mode: 0o600 });
  try {
    const r = await new Deno.Command("nats-server", {
      args: ["-t", "-c", candidate],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!r.success) {
      const said = (new TextDecoder().decode(r.stderr) + new TextDecoder().decode(r.stdout))
        .trim().replaceAll(candidate, path);
      throw new Error(
        `nats-server would not load the rendered ${path}, so it was not written: ${said}`,
      );
    }
  } finally {
    await Deno.remove(candidate).catch(() => {});
  }
}
