/**
 * The one writer of nats-server configuration files, for the lab's broker and cluster
 * (lab/lib/lab_broker.ts, cluster.ts) and the stand-in's loopback broker, cluster and
 * leaf servers (lab/mesh/local_broker.ts): each describes its server (`NatsConfig`) and
 * `renderNatsConfig` writes the text. The control plane's accounts (users, permissions,
 * imports, exports, limits, mappings) are described the same way (`NatsAccount`) by
 * lab/mesh/auth.ts and written by `renderNatsAccounts` into files of their own, which
 * change with every admission, are checked by `nats-server -t` before a reload, and which
 * a server loads with `include`. Every string is written quoted and escaped, so a path, a
 * password or a subject is one value and never more configuration.
 */
import { LabError } from "./errors.ts";
import type { RouteCredentials } from "./routes.ts";

/** A size as nats-server reads one (`64MB`, `2GB`). */
export type NatsSize = `${number}${"KB" | "MB" | "GB"}`;

/** The certificate a server presents (and, with `caFile`, the CA it checks peers by). */
export interface NatsTls {
  certFile: string;
  keyFile: string;
  /** The CA a peer's certificate must be signed by. */
  caFile?: string;
  /** Require and verify the peer's certificate (under `caFile`). */
  verify?: boolean;
  /** Seconds the TLS handshake may take. */
  timeout?: number;
}

/** JetStream on this server, its store in `storeDir`. */
export interface NatsJetStream {
  storeDir: string;
  /** The JetStream domain (a site's leaf reaches the cluster's API through it). */
  domain?: string;
  maxMemoryStore: NatsSize;
  maxFileStore: NatsSize;
}

/**
 * The routes of a cluster member: TLS under the mesh's CA both ways (`tls` with its
 * `caFile` and `verify`), and route authorisation: a peer logs in with the cluster's
 * route user and password, which the member puts in the URLs of the routes it opens.
 */
export interface NatsCluster {
  name: string;
  listen: string;
  /** The other members' route addresses (`host:port`). */
  routes: readonly string[];
  tls: NatsTls;
  credentials: RouteCredentials;
}

/** One leaf connection this server opens, binding its local `account` to the remote's. */
export interface NatsLeafRemote {
  /** Where the remote's leaf port is (`host:port`, tried in turn). */
  hubs: readonly string[];
  /** The login on the remote (nats-server 2.9 takes no nkey for a remote: it goes in the URL). */
  login: { user: string; password: string };
  account: string;
  /** The certificate it presents and the CA it checks the remote by. */
  tls: NatsTls;
}

/** Leaf connections: a port leaf servers connect to, and those this server opens. */
export interface NatsLeafnodes {
  listen?: string;
  /** The leaf address told to leaf servers (its own when absent). */
  advertise?: string;
  /** The certificate of the leaf port (`verify`: a leaf must show one under `caFile`). */
  tls?: NatsTls;
  /** Seconds between attempts to reconnect a remote. */
  reconnect?: number;
  remotes?: readonly NatsLeafRemote[];
}

/** One nats-server, described. */
export interface NatsConfig {
  /** What wrote the file (its first line, a comment). */
  header: string;
  serverName: string;
  /** The client port (`host:port`). */
  listen: string;
  /** The largest message a client may publish. */
  maxPayload?: NatsSize;
  /** The monitoring port (`host:port`). */
  http?: string;
  pidFile?: string;
  /** How often a connection is pinged and how many pings may go unanswered. */
  ping?: { interval: string; max: number };
  jetstream?: NatsJetStream;
  /** The client port's certificate. */
  tls?: NatsTls;
  cluster?: NatsCluster;
  leafnodes?: NatsLeafnodes;
  /** Files included, each relative to this file (as nats-server resolves them). */
  include?: readonly string[];
  /** Configuration appended as it is (a block rendered elsewhere, e.g. accounts). */
  extra?: string;
}

/** A description this module will not write (LabError "usage", naming the value). */
function refuse(what: string): never {
  throw new LabError(
    "usage",
    `cannot write the nats-server configuration: ${what}; fix the server's description`,
  );
}

/** A quoted string value (JSON's escapes are nats-server's). */
function q(value: string): string {
  return JSON.stringify(value);
}

function size(value: string, what: string): string {
  if (!/^[0-9]+(KB|MB|GB)$/.test(value)) refuse(`${what} "${value}"`);
  return value;
}

function count(value: number, what: string): string {
  if (!Number.isSafeInteger(value) || value < 0) refuse(`${what} ${value}`);
  return String(value);
}

/** `user:password@`, each part escaped for a URL. */
function who(login: { user: string; password: string }): string {
  return `${encodeURIComponent(login.user)}:${encodeURIComponent(login.password)}@`;
}

/** Lines of a block, indented by `indent` (its opening and closing lines included). */
function block(open: string, lines: readonly string[], indent: string): string[] {
  return [`${indent}${open}`, ...lines.map((l) => `${indent}  ${l}`), `${indent}}`];
}

function tlsLines(tls: NatsTls): string[] {
  return [
    `cert_file: ${q(tls.certFile)}`,
    `key_file: ${q(tls.keyFile)}`,
    ...(tls.caFile !== undefined ? [`ca_file: ${q(tls.caFile)}`] : []),
    ...(tls.verify ? ["verify: true"] : []),
    `timeout: ${count(tls.timeout ?? 5, "a TLS timeout")}`,
  ];
}

function remoteLines(r: NatsLeafRemote): string[] {
  if (r.hubs.length === 0) refuse("a leaf remote without a hub");
  const urls = r.hubs.map((h) => q(`nats-leaf://${who(r.login)}${h}`));
  // A remote's tls names the CA first; each file on its own line.
  const tls = [
    ...(r.tls.caFile !== undefined ? [`ca_file: ${q(r.tls.caFile)}`] : []),
    `cert_file: ${q(r.tls.certFile)}`,
    `key_file: ${q(r.tls.keyFile)}`,
  ];
  return block("{", [
    `urls: [${urls.join(", ")}]`,
    `account: ${q(r.account)}`,
    ...block("tls: {", tls, ""),
  ], "");
}

function leafLines(l: NatsLeafnodes): string[] {
  return [
    ...(l.listen !== undefined ? [`listen: ${q(l.listen)}`] : []),
    ...(l.advertise !== undefined ? [`advertise: ${q(l.advertise)}`] : []),
    ...(l.reconnect !== undefined ? [`reconnect: ${count(l.reconnect, "a reconnect")}`] : []),
    ...(l.tls ? block("tls {", tlsLines(l.tls), "") : []),
    ...(l.remotes?.length
      ? ["remotes: [", ...l.remotes.flatMap(remoteLines).map((x) => `  ${x}`), "]"]
      : []),
  ];
}

function clusterLines(c: NatsCluster): string[] {
  return [
    `name: ${q(c.name)}`,
    `listen: ${q(c.listen)}`,
    ...block("tls {", tlsLines(c.tls), ""),
    ...block("authorization {", [
      `user: ${q(c.credentials.user)}`,
      `password: ${q(c.credentials.password)}`,
      "timeout: 5",
    ], ""),
    "routes: [",
    ...c.routes.map((r) => `  ${q(`nats-route://${who(c.credentials)}${r}`)}`),
    "]",
  ];
}

/** The text of the configuration `c` describes. */
export function renderNatsConfig(c: NatsConfig): string {
  const header = c.header.split("\n").map((l) => `# ${l}`.trimEnd());
  const js = c.jetstream;
  const lines = [
    ...header,
    `server_name: ${q(c.serverName)}`,
    `listen: ${q(c.listen)}`,
    ...(c.maxPayload !== undefined ? [`max_payload: ${size(c.maxPayload, "max_payload")}`] : []),
    ...(c.http !== undefined ? [`http: ${q(c.http)}`] : []),
    ...(c.pidFile !== undefined ? [`pid_file: ${q(c.pidFile)}`] : []),
    ...(c.ping
      ? [`ping_interval: ${q(c.ping.interval)}`, `ping_max: ${count(c.ping.max, "ping_max")}`]
      : []),
    ...(js
      ? block("jetstream {", [
        `store_dir: ${q(js.storeDir)}`,
        ...(js.domain !== undefined ? [`domain: ${q(js.domain)}`] : []),
        `max_memory_store: ${size(js.maxMemoryStore, "max_memory_store")}`,
        `max_file_store: ${size(js.maxFileStore, "max_file_store")}`,
      ], "")
      : []),
    ...(c.tls ? block("tls {", tlsLines(c.tls), "") : []),
    ...(c.cluster ? block("cluster {", clusterLines(c.cluster), "") : []),
    ...(c.leafnodes ? block("leafnodes {", leafLines(c.leafnodes), "") : []),
    ...(c.include ?? []).map((file) => `include ${q(file)}`),
    ...(c.extra ? [c.extra.replace(/\n+$/, "")] : []),
  ];
  return `${lines.join("\n")}\n`;
}

/** The connections a user may make: a client's, or a leaf server's. */
export type NatsConnectionType = "STANDARD" | "LEAFNODE";

/** Subjects a user may publish to and subscribe to (nothing else). */
export interface NatsPermissions {
  publish: readonly string[];
  subscribe: readonly string[];
}

/** A user of an account: an nkey (and its permissions), or a user and a password. */
export type NatsUser =
  | {
    nkey: string;
    connectionTypes: readonly NatsConnectionType[];
    permissions?: NatsPermissions;
  }
  | { user: string; password: string; connectionTypes: readonly NatsConnectionType[] };

/** What an account takes from another: a service (requests) or a stream (messages). */
export interface NatsImport {
  kind: "service" | "stream";
  account: string;
  subject: string;
  /** The subject it arrives as here (the same when absent). */
  to?: string;
}

/** What an account offers the accounts it names. */
export interface NatsExport {
  kind: "service" | "stream";
  subject: string;
  accounts: readonly string[];
}

/** One account of a server, described. */
export interface NatsAccount {
  name: string;
  /** A comment inside its block (what a reader of the file should know). */
  note?: string;
  jetstream?: boolean;
  users?: readonly NatsUser[];
  exports?: readonly NatsExport[];
  imports?: readonly NatsImport[];
  /** Account limits (`max_payload`, `max_connections`, …). */
  limits?: Readonly<Record<string, number>>;
  /** Subject mappings (source → destination). */
  mappings?: Readonly<Record<string, string>>;
}

/** A list of values, one per line (`[]` when empty). */
function valueList(values: readonly string[], indent: string): string {
  return values.length === 0
    ? "[]"
    : `[\n${values.map((v) => `${indent}  ${v}`).join("\n")}\n${indent}]`;
}

const strings = (xs: readonly string[]) => `[${xs.map(q).join(", ")}]`;

function userValue(u: NatsUser): string {
  const types = `allowed_connection_types: ${strings(u.connectionTypes)}`;
  if ("user" in u) return `{ user: ${q(u.user)}, password: ${q(u.password)}, ${types} }`;
  const p = u.permissions;
  const permissions = p
    ? `, permissions: { publish: { allow: ${strings(p.publish)} }, ` +
      `subscribe: { allow: ${strings(p.subscribe)} } }`
    : "";
  return `{ nkey: ${q(u.nkey)}, ${types}${permissions} }`;
}

function importValue(i: NatsImport): string {
  const to = i.to !== undefined && i.to !== i.subject ? `, to: ${q(i.to)}` : "";
  return `{ ${i.kind}: { account: ${q(i.account)}, subject: ${q(i.subject)} }${to} }`;
}

function exportValue(e: NatsExport): string {
  return `{ ${e.kind}: ${q(e.subject)}, accounts: ${strings(e.accounts)} }`;
}

function accountLines(a: NatsAccount): string[] {
  const indent = "    ";
  const limits = Object.entries(a.limits ?? {}).map(([k, v]) => {
    if (!/^[a-z_]+$/.test(k)) refuse(`an account limit named ${q(k)}`);
    return `${k}: ${count(v, k)}`;
  });
  const mappings = Object.entries(a.mappings ?? {}).map(([from, to]) => `${q(from)}: ${q(to)}`);
  return [
    ...(a.note ?? "").split("\n").filter((l) => l !== "").map((l) => `# ${l}`),
    ...(a.jetstream ? ["jetstream: enabled"] : []),
    ...(a.users ? [`users: ${valueList(a.users.map(userValue), indent)}`] : []),
    ...(a.exports ? [`exports: ${valueList(a.exports.map(exportValue), indent)}`] : []),
    ...(a.imports ? [`imports: ${valueList(a.imports.map(importValue), indent)}`] : []),
    ...(a.limits ? [`limits: { ${limits.join(", ")} }`] : []),
    ...(a.mappings ? [`mappings: { ${mappings.join(", ")} }`] : []),
  ];
}

/**
 * The text of a file holding an `accounts` block (a server includes it): the control
 * plane's accounts, rendered after every change and checked by `nats-server -t`.
 */
export function renderNatsAccounts(header: string, accounts: readonly NatsAccount[]): string {
  const names = new Set<string>();
  for (const a of accounts) {
    if (names.has(a.name)) refuse(`two accounts named ${q(a.name)}`);
    names.add(a.name);
  }
  const lines = [
    ...header.split("\n").map((l) => `# ${l}`.trimEnd()),
    ...block(
      "accounts {",
      accounts.flatMap((a) => block(`${q(a.name)} {`, accountLines(a), "")),
      "",
    ),
  ];
  return `${lines.join("\n")}\n`;
}
