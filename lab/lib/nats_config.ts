/**
 * The one writer of nats-server configuration files, for the lab's broker and cluster
 * (lab/lib/lab_broker.ts, cluster.ts) and the stand-in's loopback broker, cluster and
 * leaf servers (lab/mesh/local_broker.ts): each describes its server (`NatsConfig`) and
 * `renderNatsConfig` writes the text. Accounts and users are no part of it: every server
 * runs in NATS's operator mode (`operator`: the control plane's operator file, which the
 * server includes, and its account resolver), and the accounts and users are JWTs
 * (lab/mesh/operator.ts). Every string is written quoted and escaped, so a path, a
 * password or a subject is one value and never more configuration.
 */
import { LabError } from "./errors.ts";
import type { RouteCredentials } from "./routes.ts";

/**
 * The environment every nats-server of the lab and of the stand-in runs with, and what
 * docs/cluster.md recommends for a mesh's broker (its service's environment): Go's
 * collector started at half the heap's growth it starts at by default (GOGC=50 for
 * 100). An idle fleet allocates little, so the collector runs seldom either way, and the
 * heap it lets grow between two collections is broker memory per node:
 * tests/bench/RESULTS.md, "The broker's floor".
 */
export const NATS_SERVER_ENV: Readonly<Record<string, string>> = { GOGC: "50" };

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
  /** The user it logs in as on the remote: a creds file (a user JWT and its seed). */
  credentials: string;
  /** Its local account (in operator mode: the account's public key). */
  account: string;
  /** The certificate it presents and the CA it checks the remote by. */
  tls: NatsTls;
}

/**
 * NATS's operator mode: the operator file the server includes (the operator's JWT, the
 * system account, the accounts preloaded: lab/mesh/operator.ts), and its account resolver
 * (a full one keeping JWTs in `dir`, or the preloads alone in memory).
 */
export interface NatsOperator {
  /** The operator file, relative to the configuration (as nats-server resolves includes). */
  include: string;
  resolver: { dir: string } | "memory";
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
  /** Operator mode (every server of a mesh). */
  operator?: NatsOperator;
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

/** `user:password@`, each part escaped for a URL (the routes' login). */
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
  const urls = r.hubs.map((h) => q(`nats-leaf://${h}`));
  // A remote's tls names the CA first; each file on its own line.
  const tls = [
    ...(r.tls.caFile !== undefined ? [`ca_file: ${q(r.tls.caFile)}`] : []),
    `cert_file: ${q(r.tls.certFile)}`,
    `key_file: ${q(r.tls.keyFile)}`,
  ];
  return block("{", [
    `urls: [${urls.join(", ")}]`,
    `account: ${q(r.account)}`,
    `credentials: ${q(r.credentials)}`,
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
    ...(c.operator ? operatorLines(c.operator) : []),
    ...(c.include ?? []).map((file) => `include ${q(file)}`),
    ...(c.extra ? [c.extra.replace(/\n+$/, "")] : []),
  ];
  return `${lines.join("\n")}\n`;
}

/** The resolver and the include of operator mode. */
function operatorLines(o: NatsOperator): string[] {
  const resolver = o.resolver === "memory"
    ? "resolver: MEMORY"
    : `resolver: { type: full, dir: ${q(o.resolver.dir)}, allow_delete: false, interval: "2m" }`;
  return [resolver, `include ${q(o.include)}`];
}
