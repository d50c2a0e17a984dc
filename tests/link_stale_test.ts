/**
 * A broker that stops answering while the node keeps publishing: the path is
 * frozen (a relay that stops reading, as a cut cable does: nothing is refused,
 * nothing is acknowledged), the node's socket buffers fill with its heartbeats,
 * and the link must still say it is down within its ping budget and try again:
 * closing the stale connection must not wait on writes a frozen path never takes.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { enrol } from "../src/link/enrol.ts";
import { Link } from "../src/link/link.ts";
import { hostOn, scratch } from "./_helpers.ts";
import { startMesh, until } from "./_mesh.ts";

/** A loopback relay to `port` that forwards both ways until `freeze()`, then reads nothing. */
function freezingRelay(port: number) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let frozen = false;
  const conns: Deno.Conn[] = [];
  const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
    const reader = from.readable.getReader();
    while (!frozen) {
      const { value, done } = await reader.read();
      if (done || frozen) break;
      await to.write(value);
    }
    // Frozen: neither side is read again, so the node's writes pile up unread.
  };
  (async () => {
    for await (const client of listener) {
      const server = await Deno.connect({ hostname: "127.0.0.1", port });
      conns.push(client, server);
      pipe(client, server).catch(() => {});
      pipe(server, client).catch(() => {});
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    freeze: () => {
      frozen = true;
    },
    [Symbol.dispose]: () => {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    },
  };
}

Deno.test("a link whose broker stops answering while the node's send buffers fill goes down within its ping budget", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  using host = await hostOn(s);
  const identity = await enrol(host, await mesh.control.mintToken("node-a"));
  const seed = new TextEncoder().encode(
    (await Deno.readTextFile(posix.join(s.stateDir, "node.nk"))).trim(),
  );
  using relay = freezingRelay(mesh.broker.port);
  const through = {
    ...identity,
    brokers: [{ url: `tls://127.0.0.1:${relay.port}`, pin: identity.brokers[0].pin }],
  };
  const logged: string[] = [];
  // A ping every second, 2 unanswered allowed: the budget is about 3 s.
  const link = new Link(through, seed, {
    onDeclaration() {},
    onUp() {},
    log: (line) => logged.push(line),
  }, { timing: { timeoutMs: 5000, pingIntervalMs: 1000, maxPingOut: 2 } });
  link.start();
  let pump: ReturnType<typeof setInterval> | undefined;
  try {
    await until("the link is up", () => link.state.phase === "up" ? true : undefined, 20_000);
    relay.freeze();
    // 64 KiB heartbeats every 10 ms: the kernel's buffers fill, then the client's own.
    const pad = "x".repeat(64 * 1024);
    pump = setInterval(() => link.publish("heartbeat", { pad }), 5);
    // Far beyond the budget: a close that waited on the unwritten data would wait as
    // long as TCP keeps retrying (minutes).
    await until(
      "the link says the broker stopped answering",
      () => logged.some((l) => l.includes("the broker stopped answering pings")) ? true : undefined,
      20_000,
    );
    assert.notEqual(link.state.phase, "up");
  } finally {
    clearInterval(pump);
    await link.close();
  }
});
