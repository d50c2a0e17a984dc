/**
 * A NATS cluster inside the lab network: three (or `size`) nats-servers, each in
 * its own network namespace on the lab switch, routes between them, JetStream
 * clustered (the control plane keeps its streams with 3 replicas), one CA and a
 * certificate (and pin) per server. Optionally a leaf-node server for a "site":
 * its own namespace with an uplink on the lab switch and a second link on the
 * site's switch, where the site's machines live and reach the cluster only
 * through it.
 */
import { join } from "node:path";
import { makeCertificates } from "./certs.ts";
import { NATS_SERVER_ENV, type NatsConfig, renderNatsConfig } from "./nats_config.ts";
import { newRouteCredentials, type RouteCredentials } from "./routes.ts";
import { CgroupSet } from "./cgroup.ts";
import { LabError } from "./errors.ts";
import type { LabSwitch, Port } from "./net.ts";
import { SUBNET_PREFIX } from "./net.ts";
import { run, type RunOptions, type RunResult, sleep, tail, until } from "./_process.ts";

/** Client port of every server. */
export const NATS_PORT = 4222;
/** Route port of every cluster server. */
export const ROUTE_PORT = 6222;
/** Leaf-node port of every cluster server (a site's leaf connects to it). */
export const LEAF_PORT = 7422;
/** Monitoring port (/varz, /jsz) of every server. */
export const HTTP_PORT = 8222;
/** The name of the lab's cluster. */
export const CLUSTER_NAME = "noxlab";
/** The cluster's JetStream domain (a site's leaf reaches its API as `$JS.noxlab.API.…`). */
export const JS_DOMAIN = "noxlab";

/** What a cluster needs from its lab. */
export interface ClusterHost {
  readonly id: string;
  readonly dir: string;
  readonly net: LabSwitch;
}

/** One server as the control plane sees it (before it starts). */
export interface ServerFacts {
  name: string;
  /** URL by address (clients in lab namespaces). */
  url: string;
  address: string;
  pin: string;
  dir: string;
  configFile: string;
  pidFile: string;
  logFile: string;
}

/** One nats-server in its own namespace (a cluster member, or a site's leaf). */
export class NatsServer implements ServerFacts {
  readonly name: string;
  readonly url: string;
  readonly address: string;
  readonly pin: string;
  readonly dir: string;
  readonly configFile: string;
  readonly pidFile: string;
  readonly logFile: string;
  readonly netns: string;
  /** The namespace's uplink on the lab switch (a leaf's uplink is cut through it). */
  readonly port: Port;
  private child: Deno.ChildProcess | undefined;
  private alive = false;
  private cgroups: CgroupSet | undefined;

  constructor(facts: ServerFacts, netns: string, port: Port) {
    this.name = facts.name;
    this.url = facts.url;
    this.address = facts.address;
    this.pin = facts.pin;
    this.dir = facts.dir;
    this.configFile = facts.configFile;
    this.pidFile = facts.pidFile;
    this.logFile = facts.logFile;
    this.netns = netns;
    this.port = port;
  }

  /** Whether nats-server runs now. */
  get running(): boolean {
    return this.alive;
  }

  /** Starts nats-server in its namespace (its own cgroup) and waits until it is ready. */
  async start(timeoutMs = 30_000): Promise<void> {
    if (this.alive) return;
    const before = (await this.logText()).length;
    this.cgroups ??= await CgroupSet.create(this.netns);
    this.child = new Deno.Command("/bin/sh", {
      args: [
        "-c",
        `${this.cgroups.joinScript()} && exec setsid /usr/bin/nsenter --net="/run/netns/$1" -- ` +
        `nats-server -c "$2" -l "$3"`,
        "lab-nats",
        this.netns,
        this.configFile,
        this.logFile,
      ],
      env: { ...NATS_SERVER_ENV },
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    this.alive = true;
    const child = this.child;
    child.status.then(() => {
      if (this.child === child) this.alive = false;
    });
    try {
      await until(`${this.name} logs "Server is ready"`, timeoutMs, async () => {
        if (!this.alive) throw new Error("nats-server exited");
        return (await this.logText()).slice(before).includes("Server is ready") ? true : undefined;
      });
    } catch (error) {
      throw new LabError(
        "broker-failed",
        `nats-server ${this.name} did not start (${
          error instanceof Error ? error.message : error
        }); log:\n${tail((await this.logText()).slice(before))}`,
      );
    }
  }

  /** SIGKILL (a crash, not a goodbye); waits until it is gone. */
  async kill(): Promise<void> {
    if (!this.child || !this.alive) return;
    try {
      this.child.kill("SIGKILL");
    } catch { /* gone */ }
    await this.child.status;
  }

  /** Stops nats-server (TERM, KILL after 5 s) and removes its cgroups. */
  async stop(): Promise<void> {
    if (this.child && this.alive) {
      try {
        this.child.kill("SIGTERM");
      } catch { /* gone */ }
      const done = await Promise.race([
        this.child.status.then(() => true),
        sleep(5000).then(() => false),
      ]);
      if (!done) await this.kill();
    }
    await this.cgroups?.destroy();
    this.cgroups = undefined;
  }

  /** Runs argv on the host's file system inside this server's network namespace. */
  exec(argv: readonly string[], options: RunOptions = {}): Promise<RunResult> {
    return run(["/usr/bin/nsenter", `--net=/run/netns/${this.netns}`, "--", ...argv], {
      check: false,
      ...options,
    });
  }

  /** A monitoring endpoint's JSON (e.g. "varz", "jsz?accounts=true"), read in its namespace. */
  async monitor(path: string): Promise<Record<string, unknown>> {
    const r = await this.exec(
      ["curl", "-sf", "--max-time", "5", `http://${this.address}:${HTTP_PORT}/${path}`],
      { timeoutMs: 10_000 },
    );
    if (r.code !== 0) {
      throw new LabError("broker-failed", `${this.name} /${path}: curl exit ${r.code}`);
    }
    return JSON.parse(r.stdout);
  }

  /** The nats-server log so far. */
  logText(): Promise<string> {
    return Deno.readTextFile(this.logFile).catch(() => "");
  }
}

/** Options of {@link BrokerCluster.start}. */
export interface ClusterOptions {
  /** Number of servers (default 3). */
  size?: number;
  /**
   * Called after the certificates exist and before any server starts: returns the
   * configuration each server appends (the control plane's operator and the server's
   * own account resolver), so that the accounts exist from the first start on.
   */
  prepare?: (
    servers: readonly ServerFacts[],
  ) => Promise<(server: ServerFacts) => string> | ((server: ServerFacts) => string);
  /**
   * The credentials the servers' routes log in with (keep them with the mesh's
   * state); fresh random ones when absent.
   */
  routes?: RouteCredentials;
}

/** First address of the cluster's servers on the lab switch (.3, .4, .5). */
const FIRST_SERVER = 3;
/** The leaf's uplink address on the lab switch. */
const LEAF_UPLINK = 9;

/** The lab's NATS cluster (and its sites' leaf servers). */
export class BrokerCluster {
  readonly servers: readonly NatsServer[];
  /** The lab CA (PEM) every server's certificate is signed by. */
  readonly caPem: string;
  readonly dir: string;
  readonly leaves: NatsServer[] = [];
  private readonly host: ClusterHost;

  private constructor(host: ClusterHost, servers: NatsServer[], caPem: string, dir: string) {
    this.host = host;
    this.servers = servers;
    this.caPem = caPem;
    this.dir = dir;
  }

  /** Makes the certificates, namespaces and configurations, then starts every server. */
  static async start(host: ClusterHost, options: ClusterOptions = {}): Promise<BrokerCluster> {
    const size = options.size ?? 3;
    const dir = join(host.dir, "cluster");
    const facts: ServerFacts[] = [];
    let caPem = "";
    for (let i = 1; i <= size; i++) {
      const name = `nats${i}`;
      const address = `${SUBNET_PREFIX}.${FIRST_SERVER + i - 1}`;
      const serverDir = join(dir, name);
      await Deno.mkdir(join(serverDir, "jetstream"), { recursive: true });
      const certs = await makeCertificates(dir, {
        names: [`${name}.lab`],
        ips: [address],
        caName: "nox-mesh-host lab CA",
        server: name,
      });
      caPem = certs.caPem;
      facts.push({
        name,
        url: `tls://${address}:${NATS_PORT}`,
        address,
        pin: certs.fingerprint256,
        dir: serverDir,
        configFile: join(serverDir, "nats.conf"),
        pidFile: join(serverDir, "nats.pid"),
        logFile: join(serverDir, "nats.log"),
      });
    }
    const extra = options.prepare ? await options.prepare(facts) : () => "";
    const routes = options.routes ?? newRouteCredentials();
    const servers: NatsServer[] = [];
    for (const f of facts) {
      // It holds the route and leaf passwords: root's alone.
      await Deno.writeTextFile(
        f.configFile,
        memberConfig(
          f,
          dir,
          facts.filter((o) => o !== f).map((o) => o.address),
          extra(f),
          routes,
        ),
        { mode: 0o600 },
      );
      const netns = `${host.id}-${f.name}`;
      servers.push(new NatsServer(f, netns, await host.net.attach(netns, f.address)));
    }
    const cluster = new BrokerCluster(host, servers, caPem, dir);
    try {
      // The servers wait for each other's routes: start all, then wait for all.
      await Promise.all(servers.map((s) => s.start()));
    } catch (error) {
      await cluster.stop().catch(() => {});
      throw error;
    }
    return cluster;
  }

  /** URLs of the cluster's servers (by address). */
  get urls(): string[] {
    return this.servers.map((s) => s.url);
  }

  /**
   * Starts a leaf-node server for a site: its namespace has an uplink (eth0) on the
   * lab switch and a link (site0) on `site` (a second switch) at `siteAddress`. It runs
   * no JetStream, and binds each of its local accounts to the cluster over a leaf
   * connection (to any server of the cluster), logging in as the site's own users.
   * It listens for the site's clients with its own certificate under the lab CA.
   * `prepare` runs before it starts, once its name and address are known: the control
   * plane records it (site tokens name it) and returns its logins and the configuration
   * it appends (the operator, trusted with its accounts preloaded).
   */
  async startLeaf(
    site: LabSwitch,
    siteAddress: string,
    prepare: (leaf: ServerFacts) => Promise<LeafSetup>,
  ): Promise<NatsServer> {
    const name = `leaf${this.leaves.length + 1}`;
    const dir = join(this.dir, name);
    await Deno.mkdir(join(dir, "jetstream"), { recursive: true });
    const certs = await makeCertificates(this.dir, {
      names: [`${name}.site`],
      ips: [siteAddress],
      caName: "nox-mesh-host lab CA",
      server: name,
    });
    const netns = `${this.host.id}-${name}`;
    const uplinkAddress = `${SUBNET_PREFIX}.${LEAF_UPLINK + this.leaves.length}`;
    const port = await this.host.net.attach(netns, uplinkAddress);
    await site.plugIn(netns, siteAddress, "site0");
    const facts: ServerFacts = {
      name,
      url: `tls://${siteAddress}:${NATS_PORT}`,
      address: siteAddress,
      pin: certs.fingerprint256,
      dir,
      configFile: join(dir, "nats.conf"),
      pidFile: join(dir, "nats.pid"),
      logFile: join(dir, "nats.log"),
    };
    const setup = await prepare(facts);
    await Deno.writeTextFile(
      facts.configFile,
      leafConfig(facts, this.dir, this.servers.map((s) => s.address), setup),
      { mode: 0o600 },
    );
    const leaf = new NatsServer(facts, netns, port);
    this.leaves.push(leaf);
    await leaf.start();
    return leaf;
  }

  /** Stops every server and leaf and removes their cgroups (namespaces go with the switch). */
  async stop(): Promise<void> {
    const problems: string[] = [];
    await Promise.all(
      [...this.leaves, ...this.servers].map((s) =>
        s.stop().catch((e) => problems.push(`${s.name}: ${e}`))
      ),
    );
    if (problems.length) {
      throw new LabError("broker-failed", `cannot stop the cluster:\n${problems.join("\n")}`);
    }
  }
}

/** What every server of the lab's (members and leaves) has: its ports, certificate, `extra`. */
function common(f: ServerFacts, certDir: string, extra: string) {
  return {
    serverName: f.name,
    listen: `${f.address}:${NATS_PORT}`,
    // The control plane publishes up to this; each node is held to less (its user JWT:
    // lab/mesh/operator.ts).
    maxPayload: "8MB",
    http: `${f.address}:${HTTP_PORT}`,
    pidFile: f.pidFile,
    tls: { certFile: join(certDir, `${f.name}.pem`), keyFile: join(certDir, `${f.name}.key`) },
    extra,
  } satisfies Partial<NatsConfig>;
}

/** What a site's leaf server needs from the control plane before it starts. */
export interface LeafSetup {
  /**
   * Its leaf connections: each binds a local account (its public key) to the cluster's,
   * logging in as a user of the site's (a creds file).
   */
  remotes: { account: string; credentials: string }[];
  /** Configuration it appends (the operator, its accounts preloaded). */
  extra: string;
}

/** The configuration of one server of the lab's cluster (exported for its test). */
export function memberConfig(
  f: ServerFacts,
  certDir: string,
  others: string[],
  extra: string,
  routes: RouteCredentials,
): string {
  const tls = {
    certFile: join(certDir, `${f.name}.pem`),
    keyFile: join(certDir, `${f.name}.key`),
    caFile: join(certDir, "ca.pem"),
    verify: true,
  };
  return renderNatsConfig({
    header: "nox-mesh-host lab: one server of the cluster (generated)",
    ...common(f, certDir, extra),
    jetstream: {
      domain: JS_DOMAIN,
      storeDir: join(f.dir, "jetstream"),
      maxMemoryStore: "64MB",
      maxFileStore: "2GB",
    },
    cluster: {
      name: CLUSTER_NAME,
      listen: `${f.address}:${ROUTE_PORT}`,
      routes: others.map((a) => `${a}:${ROUTE_PORT}`),
      tls,
      credentials: routes,
    },
    // A leaf server shows a certificate of the lab CA (as every site's leaf has one) and
    // then logs in as a user of the control plane's accounts: each site's leaf as its
    // site's own users, whose scoped signing keys carry only what that site's nodes use.
    leafnodes: { listen: `${f.address}:${LEAF_PORT}`, tls },
  });
}

/** The configuration of a site's leaf server (exported for its test). */
export function leafConfig(
  f: ServerFacts,
  certDir: string,
  hub: string[],
  setup: LeafSetup,
): string {
  return renderNatsConfig({
    header: "nox-mesh-host lab: a site's leaf-node server (generated)",
    // No JetStream: the cluster's answers every $JS.API request of CONTROL.
    ...common(f, certDir, setup.extra),
    // A cut uplink is noticed within seconds (the default pings every 2 minutes).
    ping: { interval: "2s", max: 2 },
    leafnodes: {
      reconnect: 1,
      remotes: setup.remotes.map((r) => ({
        hubs: hub.map((a) => `${a}:${LEAF_PORT}`),
        credentials: r.credentials,
        account: r.account,
        tls: {
          caFile: join(certDir, "ca.pem"),
          certFile: join(certDir, `${f.name}.pem`),
          keyFile: join(certDir, `${f.name}.key`),
        },
      })),
    },
  });
}
