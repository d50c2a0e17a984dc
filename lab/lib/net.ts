import { LabError } from "./errors.ts";
import { run } from "./_process.ts";

/** The lab subnet. It exists only inside the lab's own network namespaces. */
export const SUBNET_PREFIX = "10.250.0";
/** The site network (scenario site): machines there reach the lab only through a leaf server. */
export const SITE_PREFIX = "10.251.0";
/** The broker's address on the lab switch. */
export const BROKER_ADDRESS = `${SUBNET_PREFIX}.2`;
/** Where the lab's apt repository is served (lib/lab.ts aptRepo), and its name there. */
export const APT_ADDRESS = `${SUBNET_PREFIX}.8`;
export const APT_HOST = "apt.lab";

const IP = "/usr/sbin/ip";

/** One machine's (or the broker's) connection to the lab switch. */
export interface Port {
  /** Network namespace of the machine, as in /run/netns. */
  netns: string;
  /** The switch-side veth (exists only inside the switch namespace). */
  switchDev: string;
  /** The switch's namespace. */
  switchNetns: string;
  address: string;
}

/**
 * The lab switch: a bridge inside its own network namespace, with one veth per
 * attached namespace. Nothing is created in the host's own namespace.
 */
export class LabSwitch {
  readonly id: string;
  readonly netns: string;
  private readonly namespaces = new Set<string>();
  private nextPort = 1;

  private constructor(id: string) {
    this.id = id;
    this.netns = `${id}-sw`;
  }

  /** Creates the switch namespace and its bridge. */
  static async create(id: string): Promise<LabSwitch> {
    const sw = new LabSwitch(id);
    await sw.addNetns(sw.netns);
    await ip(["-n", sw.netns, "link", "add", "br0", "type", "bridge"], "create the lab bridge");
    await ip(["-n", sw.netns, "link", "set", "br0", "up"], "bring the lab bridge up");
    return sw;
  }

  /** Creates a network namespace (registered for teardown) with loopback up. */
  async addNetns(name: string): Promise<void> {
    await ip(["netns", "add", name], `create network namespace ${name}`);
    this.namespaces.add(name);
    await ip(["-n", name, "link", "set", "lo", "up"], `bring lo up in ${name}`);
  }

  /** Deletes one namespace created by this switch (its veth goes with it). */
  async removeNetns(name: string): Promise<void> {
    const result = await run([IP, "netns", "del", name], { check: false });
    if (result.code !== 0 && !/No such file/.test(result.stderr)) {
      throw new LabError("network-failed", `cannot delete namespace ${name}: ${result.stderr}`);
    }
    this.namespaces.delete(name);
  }

  /** Creates namespace `netns`, plugs it into the switch as eth0 with `address`/24. */
  async attach(netns: string, address: string): Promise<Port> {
    await this.addNetns(netns);
    return await this.plugIn(netns, address, "eth0");
  }

  /**
   * Plugs an existing namespace into this switch as `dev` with `address`/24 (a leaf
   * server's second link, on a site's switch).
   */
  async plugIn(netns: string, address: string, dev: string): Promise<Port> {
    const switchDev = `${this.id}p${this.nextPort++}`;
    if (switchDev.length > 15) {
      throw new LabError(
        "usage",
        `switch id ${this.id} is too long for interface names (prefix at most 8)`,
      );
    }
    await ip(
      [
        "-n",
        this.netns,
        "link",
        "add",
        switchDev,
        "type",
        "veth",
        "peer",
        "name",
        dev,
        "netns",
        netns,
      ],
      `create the veth of ${netns}`,
    );
    await ip(["-n", this.netns, "link", "set", switchDev, "master", "br0", "up"], "plug veth");
    await ip(["-n", netns, "addr", "add", `${address}/24`, "dev", dev], `address ${netns}`);
    await ip(["-n", netns, "link", "set", dev, "up"], `bring ${dev} up in ${netns}`);
    return { netns, switchDev, switchNetns: this.netns, address };
  }

  /** Pulls the cable: the switch side of the port goes down (the machine keeps its address). */
  cut(port: Port): Promise<void> {
    return cutPort(port);
  }

  /** Plugs the cable back in. */
  restore(port: Port): Promise<void> {
    return restorePort(port);
  }

  /** Deletes every namespace this switch created (veths go with them). */
  async destroy(): Promise<void> {
    const problems: string[] = [];
    for (const name of [...this.namespaces].reverse()) {
      await this.removeNetns(name).catch((e) => problems.push(e.message));
    }
    if (problems.length) {
      throw new LabError("network-failed", `cannot delete namespaces:\n${problems.join("\n")}`);
    }
  }
}

/** Sets the switch side of a port down. */
export function cutPort(port: Port): Promise<void> {
  return ip(["-n", port.switchNetns, "link", "set", port.switchDev, "down"], `cut ${port.netns}`);
}

/** Sets the switch side of a port up again. */
export function restorePort(port: Port): Promise<void> {
  return ip(["-n", port.switchNetns, "link", "set", port.switchDev, "up"], `restore ${port.netns}`);
}

async function ip(args: string[], what: string): Promise<void> {
  const result = await run([IP, ...args], { check: false, what });
  if (result.code !== 0) {
    throw new LabError(
      "network-failed",
      `cannot ${what}: ip ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`,
    );
  }
}
