/**
 * A node in a network namespace of its own that reaches a test's broker (on the test's
 * loopback) the way a machine reaches one through a router: its veth to an "uplink"
 * namespace, a default route there (metric 100, as a DHCP client sets it), and in the
 * uplink a relay listening on {@link BROKER_ADDRESS} that carries each connection over a
 * Unix socket to the broker. A firewall rule or an address the host applies inside the
 * node's namespace cuts that path for real. Nothing is sent from the test's own
 * namespace but to loopback; every address here lives only in namespaces made here.
 */
import { posix } from "node:path";
import { decodeToken, encodeToken } from "../src/link/token.ts";
import { cable, type Netns, netns } from "./resources/_netns.ts";

/** Where the node finds its broker (the relay, in the uplink namespace). */
export const BROKER_ADDRESS = "10.254.0.1";
const BROKER_PORT = 4222;
const RELAY = new URL("./fixtures/unix_relay.ts", import.meta.url).pathname;

/**
 * The node's namespace, its uplink, and the broker URL as the node sees it (the broker's
 * certificate must name BROKER_ADDRESS: `startMesh({ ips: [BROKER_ADDRESS] })`).
 */
export interface NodeNet extends AsyncDisposable {
  node: Netns;
  uplink: Netns;
  /** `tls://10.254.0.1:4222`. */
  url: string;
  /** Rewrite an enrolment token so that it names the broker as the node sees it. */
  token(text: string): string;
}

/** Make the namespaces and the relay to the broker listening on 127.0.0.1:`brokerPort`. */
export async function nodeNet(brokerPort: number): Promise<NodeNet> {
  const dir = await Deno.makeTempDir({ prefix: "noxcf-net-" });
  const node = await netns("cfn");
  const uplink = await netns("cfu");
  const socketPath = posix.join(dir, "broker.sock");
  const listener = Deno.listen({ transport: "unix", path: socketPath });
  const open: Deno.Conn[] = [];
  let relay: Deno.ChildProcess | undefined;
  const dispose = async () => {
    listener.close();
    for (const c of open) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    try {
      relay?.kill("SIGKILL");
    } catch { /* ended */ }
    await relay?.status;
    await node[Symbol.asyncDispose]();
    await uplink[Symbol.asyncDispose]();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    await cable(node, "10.253.0.1/30", uplink, "10.253.0.2/30");
    await uplink.must(["ip", "address", "add", `${BROKER_ADDRESS}/32`, "dev", "lo"]);
    await node.must(["ip", "route", "add", "default", "via", "10.253.0.2", "metric", "100"]);
    (async () => {
      for await (const conn of listener) {
        open.push(conn);
        (async () => {
          const broker = await Deno.connect({ hostname: "127.0.0.1", port: brokerPort });
          open.push(broker);
          await Promise.allSettled([
            conn.readable.pipeTo(broker.writable),
            broker.readable.pipeTo(conn.writable),
          ]);
        })().catch(() => conn.close());
      }
    })().catch(() => {});
    relay = new Deno.Command("ip", {
      args: [
        ...["netns", "exec", uplink.name, Deno.execPath(), "run", "--quiet"],
        ...["--allow-net", "--allow-read", "--allow-write", RELAY],
        ...[BROKER_ADDRESS, String(BROKER_PORT), socketPath],
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = relay.stdout.getReader();
    const first = await reader.read();
    reader.releaseLock();
    relay.stdout.cancel().catch(() => {});
    if (!new TextDecoder().decode(first.value ?? new Uint8Array()).includes("listening")) {
      throw new Error("the relay in the uplink namespace did not start");
    }
  } catch (error) {
    await dispose();
    throw error;
  }
  const url = `tls://${BROKER_ADDRESS}:${BROKER_PORT}`;
  return {
    node,
    uplink,
    url,
    token(text) {
      const token = decodeToken(text);
      return encodeToken({ ...token, brokers: token.brokers.map(() => url) });
    },
    [Symbol.asyncDispose]: dispose,
  };
}
