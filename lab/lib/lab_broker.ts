import { join } from "node:path";
import { makeCertificates } from "./certs.ts";
import { CgroupSet } from "./cgroup.ts";
import { LabError } from "./errors.ts";
import { NATS_SERVER_ENV, renderNatsConfig } from "./nats_config.ts";
import { BROKER_ADDRESS } from "./net.ts";
import type { LabSwitch } from "./net.ts";
import { run, type RunOptions, type RunResult, sleep, tail, until } from "./_process.ts";

/** Options of the lab broker. */
export interface BrokerOptions {
  /** Extra nats-server configuration appended to the lab's (e.g. `accounts { … }`). */
  extraConfig?: string;
}

/** What the broker needs from its lab. */
export interface BrokerHost {
  readonly id: string;
  readonly dir: string;
  readonly net: LabSwitch;
}

/** The name under which machines reach the broker (in every machine's /etc/hosts). */
export const BROKER_NAME = "broker.lab";
/** The broker's client port. */
export const BROKER_PORT = 4222;

/**
 * Debian's nats-server in its own lab namespace on the lab switch, with JetStream
 * (store in the lab's temp dir) and TLS from a CA made for this lab run.
 */
export class Broker {
  /** URL as seen from machines. */
  readonly url: string = `tls://${BROKER_NAME}:${BROKER_PORT}`;
  /** URL by address (for clients in the broker's namespace, which has no /etc/hosts entry). */
  readonly addressUrl: string = `tls://${BROKER_ADDRESS}:${BROKER_PORT}`;
  readonly address: string = BROKER_ADDRESS;
  /** The lab CA certificate (PEM) clients must trust; also at /lab/broker-ca.pem in machines. */
  readonly caPem: string;
  /** SHA-256 fingerprint of the server certificate, "AB:CD:…" (node:tls fingerprint256 form). */
  readonly fingerprint256: string;
  /** Network namespace of the broker (in /run/netns). */
  readonly netns: string;
  readonly dir: string;
  private readonly cgroups: CgroupSet;
  private child: Deno.ChildProcess;
  private extraConfig: string;
  private stopped = false;

  private constructor(
    host: BrokerHost,
    caPem: string,
    fingerprint: string,
    cgroups: CgroupSet,
    child: Deno.ChildProcess,
    extraConfig: string,
  ) {
    this.netns = `${host.id}-broker`;
    this.dir = join(host.dir, "broker");
    this.caPem = caPem;
    this.fingerprint256 = fingerprint;
    this.cgroups = cgroups;
    this.child = child;
    this.extraConfig = extraConfig;
  }

  /** Makes the certificates, starts nats-server and waits until it is ready. */
  static async start(host: BrokerHost, options: BrokerOptions = {}): Promise<Broker> {
    const dir = join(host.dir, "broker");
    const netns = `${host.id}-broker`;
    await Deno.mkdir(join(dir, "jetstream"), { recursive: true });
    const { caPem, fingerprint256: fingerprint } = await makeCertificates(dir, {
      names: [BROKER_NAME, "broker"],
      ips: [BROKER_ADDRESS],
      caName: "nox-mesh-host lab CA",
    });
    await Deno.writeTextFile(
      join(dir, "nats.conf"),
      labBrokerConfig(dir, options.extraConfig ?? ""),
    );
    await host.net.attach(netns, BROKER_ADDRESS);
    const cgroups = await CgroupSet.create(netns);
    const child = spawn(cgroups, netns, dir);
    const broker = new Broker(host, caPem, fingerprint, cgroups, child, options.extraConfig ?? "");
    try {
      await broker.waitLog("Server is ready", 20_000);
    } catch (error) {
      await broker.stop().catch(() => {});
      throw error;
    }
    return broker;
  }

  /** Runs argv on the host's file system inside the broker's network namespace. */
  exec(argv: readonly string[], options: RunOptions = {}): Promise<RunResult> {
    return run(["/usr/bin/nsenter", `--net=/run/netns/${this.netns}`, "--", ...argv], {
      check: false,
      ...options,
    });
  }

  /** Replaces the extra configuration and reloads nats-server (SIGHUP). */
  async reload(extraConfig: string): Promise<void> {
    this.extraConfig = extraConfig;
    const before = await this.logText();
    await Deno.writeTextFile(join(this.dir, "nats.conf"), labBrokerConfig(this.dir, extraConfig));
    Deno.kill(this.child.pid, "SIGHUP");
    await until("nats-server reloads its configuration", 10_000, async () => {
      const text = (await this.logText()).slice(before.length);
      if (/\[(ERR|FTL)\]/.test(text)) {
        throw new LabError("broker-failed", `nats-server refused the new configuration:\n${text}`);
      }
      return /Reloaded server configuration/.test(text) ? true : undefined;
    });
  }

  /**
   * Replaces the extra configuration and starts nats-server again with it (its JetStream
   * store kept): what a reload cannot change, such as the operator (NATS operator mode).
   */
  async restart(extraConfig: string): Promise<void> {
    this.extraConfig = extraConfig;
    await Deno.writeTextFile(join(this.dir, "nats.conf"), labBrokerConfig(this.dir, extraConfig));
    const before = (await this.logText()).length;
    try {
      this.child.kill("SIGTERM");
    } catch { /* gone */ }
    await this.child.status;
    this.child = spawn(this.cgroups, this.netns, this.dir);
    let exited = false;
    this.child.status.then(() => exited = true);
    try {
      await until('nats-server logs "Server is ready" again', 20_000, async () => {
        if (exited) throw new Error("nats-server exited");
        return (await this.logText()).slice(before).includes("Server is ready") ? true : undefined;
      });
    } catch (error) {
      throw new LabError(
        "broker-failed",
        `the lab broker did not start again (${error instanceof Error ? error.message : error}); ` +
          `log:\n${tail((await this.logText()).slice(before))}`,
      );
    }
  }

  /** The nats-server log so far. */
  logText(): Promise<string> {
    return Deno.readTextFile(join(this.dir, "nats.log")).catch(() => "");
  }

  /** Stops nats-server (SIGKILL after 5 s) and removes its cgroups. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    try {
      Deno.kill(this.child.pid, "SIGTERM");
    } catch { /* gone */ }
    const done = await Promise.race([
      this.child.status.then(() => true),
      sleep(5000).then(() => false),
    ]);
    if (!done) await this.cgroups.destroy();
    await this.child.status;
    await this.cgroups.destroy();
  }

  private async waitLog(line: string, timeoutMs: number): Promise<void> {
    let exited = false;
    this.child.status.then(() => exited = true);
    try {
      await until(`nats-server logs "${line}"`, timeoutMs, async () => {
        if (exited) throw new Error("nats-server exited");
        return (await this.logText()).includes(line) ? true : undefined;
      });
    } catch (error) {
      throw new LabError(
        "broker-failed",
        `the lab broker did not start (${error instanceof Error ? error.message : error}); ` +
          `log:\n${tail(await this.logText())}`,
      );
    }
  }
}

/** nats-server for the lab's broker in its namespace and cgroup, its output its log. */
function spawn(cgroups: CgroupSet, netns: string, dir: string): Deno.ChildProcess {
  return new Deno.Command("/bin/sh", {
    args: [
      "-c",
      `${cgroups.joinScript()} && exec setsid /usr/bin/nsenter --net="/run/netns/$1" -- ` +
      `nats-server -c "$2/nats.conf" -l "$2/nats.log"`,
      "lab-broker",
      netns,
      dir,
    ],
    env: { ...NATS_SERVER_ENV },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
}

/** The lab broker's configuration (exported for its test): `extra` appended as it is. */
export function labBrokerConfig(dir: string, extra: string): string {
  return renderNatsConfig({
    header: "nox-mesh-host lab broker (generated)",
    serverName: "noxlab_broker",
    listen: `${BROKER_ADDRESS}:${BROKER_PORT}`,
    // The control plane publishes up to this; each node is held to less (its user JWT:
    // lab/mesh/operator.ts).
    maxPayload: "8MB",
    http: `${BROKER_ADDRESS}:8222`,
    jetstream: { storeDir: join(dir, "jetstream"), maxMemoryStore: "64MB", maxFileStore: "2GB" },
    tls: { certFile: join(dir, "server.pem"), keyFile: join(dir, "server.key") },
    extra,
  });
}
