/**
 * One process of `deno task bench:broker` (tests/bench/broker_floor.ts): many NATS client
 * connections, each shaped as a node's link holds it (src/link/connection.ts: the npm
 * client, no reconnect inside it, a ping every 10 s, the node's own inbox prefix), and,
 * when asked, the node's subscriptions: its push subject and the client's request inbox,
 * which the client makes on the node's first request (below). Nothing else is sent: the
 * connections stay idle, so what the broker holds for them is what an idle node costs.
 *
 * Input: a JSON file (argv[0]) `{ca?, subs, atOnce, clients: [{node, url, jwt?, seed?}]}`.
 * Output: JSON lines on stdout: `progress` (how many are up), `ready` (all up), `failed`
 * (why). Ends on SIGTERM, closing every connection.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jwtAuth } from "../../src/link/connection.ts";
import { subjectsOf } from "../../src/link/subjects.ts";

const input = JSON.parse(await Deno.readTextFile(Deno.args[0])) as {
  /** The CA the servers' certificates chain to (TLS), absent for plain TCP. */
  ca?: string;
  /** Whether each connection holds the node's subscriptions. */
  subs: boolean;
  /** How many connect at once. */
  atOnce: number;
  clients: { node: string; url: string; jwt?: string; seed?: string }[];
};

const say = (event: Record<string, unknown>) => console.log(JSON.stringify(event));
const open: NatsConnection[] = [];
let failed = 0;

async function one(c: (typeof input.clients)[number]): Promise<void> {
  const s = subjectsOf(c.node);
  const nc = await connect({
    servers: c.url,
    name: `floor ${c.node}`,
    reconnect: false,
    ignoreClusterUpdates: true,
    timeout: 20_000,
    pingInterval: 10_000,
    maxPingOut: 2,
    inboxPrefix: s.inboxPrefix,
    ...(c.jwt && c.seed ? { authenticator: jwtAuth(c.jwt, new TextEncoder().encode(c.seed)) } : {}),
    ...(input.ca ? { tls: { ca: input.ca } } : {}),
  });
  open.push(nc);
  if (input.subs) {
    nc.subscribe(s.push, { callback: () => {} });
    // The request inbox: made by the client on its first request. Asked on a subject of the
    // node's own that nothing imports or hears, so that the broker answers "no responders"
    // at once: the catch-up itself, unanswered here (no stream behind its import), would
    // leave the broker holding a response import per node until its threshold (2 min),
    // which a node whose catch-up is answered does not cost.
    await nc.request(`mesh.node.${c.node}.floor`, new Uint8Array(0), { timeout: 10_000 })
      .catch(() => {});
  }
  await nc.flush();
}

let next = 0;
let last = 0;
await Promise.all(
  Array.from({ length: Math.max(1, input.atOnce) }, async () => {
    while (next < input.clients.length) {
      const c = input.clients[next++];
      // A connection refused under load is tried again, three times, then counted.
      for (let attempt = 1;; attempt++) {
        try {
          await one(c);
          break;
        } catch (error) {
          if (attempt >= 3) {
            failed++;
            say({ event: "failed", node: c.node, why: (error as Error).message });
            break;
          }
          await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
        }
      }
      if (open.length + failed - last >= 250) {
        last = open.length + failed;
        say({ event: "progress", up: open.length, failed });
      }
    }
  }),
);
say({ event: "ready", up: open.length, failed });

await new Promise<void>((resolve) => Deno.addSignalListener("SIGTERM", () => resolve()));
await Promise.all(open.map((nc) => nc.close().catch(() => {})));
Deno.exit(0);
