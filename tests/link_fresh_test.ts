/**
 * The confirm window's new connection (Link.freshConnection) against a real three-server
 * cluster on 127.0.0.1: it is made to the server the link is up on, as the link makes
 * its own (TLS, the pin of that server, the node's key), also after the link moved to
 * another server; it is closed at once (the broker holds none of it afterwards); and a
 * link that is not up makes none.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { enrol } from "../src/link/enrol.ts";
import { Link } from "../src/link/link.ts";
import type { ClusterMember } from "../lab/mesh/local_broker.ts";
import { PROGRAM, VERSION } from "../src/version.ts";
import { hostOn, scratch } from "./_helpers.ts";
import { startClusterMesh, until } from "./_mesh.ts";

const PROBE = "node-c (confirm probe)";

/** The names of `member`'s client connections, open or recently closed. */
async function names(member: ClusterMember, state: "open" | "closed"): Promise<string[]> {
  const connz = await member.monitor(`connz?state=${state}&limit=1024`);
  return ((connz.connections ?? []) as { name?: string }[]).map((c) => c.name ?? "");
}

Deno.test("confirm probe: a new connection to the server the link is up on, also after a move; closed at once; none when the link is down", async () => {
  await using mesh = await startClusterMesh("noxln-fresh-", { enrolments: true });
  const { cluster, control } = mesh;
  await using s = await scratch();
  using engine = await hostOn(s);
  const identity = await enrol(engine, await control.mintToken("node-c"));
  const seed = new TextEncoder().encode(
    (await Deno.readTextFile(posix.join(s.stateDir, "node.nk"))).trim(),
  );
  const link = new Link(identity, seed, { onDeclaration() {}, onUp() {} }, {
    backoff: { baseMs: 100, maxMs: 500 },
  });
  link.start();
  try {
    const on = async (notOn?: string) =>
      await until("the link up", () => {
        const state = link.state;
        return state.phase === "up" && state.url !== notOn ? state.url : undefined;
      }, 90_000);
    const member = (url: string) => cluster.members.find((m) => m.url === url)!;

    const first = await on();
    assert.equal(await link.freshConnection(10_000), undefined);
    // Made to that server, and closed: it holds the link's connection only.
    // (Closed without waiting for the close: the server lists it closed a moment later.)
    await until(
      "the probe's connection closed on the first server",
      async () =>
        (await names(member(first), "closed")).includes(`${PROGRAM} ${VERSION} ${PROBE}`)
          ? true
          : undefined,
    );
    await until("the probe's connection gone", async () => {
      const open = (await names(member(first), "open")).filter((n) => n.includes("node-c"));
      return open.length === 1 && !open[0].includes(PROBE) ? true : undefined;
    });

    // The server the link is on goes away: the probe follows the link to the next one,
    // with that server's pin.
    await member(first).kill();
    const second = await on(first);
    assert.equal(await link.freshConnection(10_000), undefined);
    await until(
      "the probe's connection closed on the second server",
      async () =>
        (await names(member(second), "closed")).some((n) => n.endsWith(PROBE)) ? true : undefined,
    );
    await until("the probe's connection gone from the second server", async () => {
      const open = (await names(member(second), "open")).filter((n) => n.includes("node-c"));
      return open.length === 1 && !open[0].includes(PROBE) ? true : undefined;
    });
  } finally {
    await link.close();
  }
  // A link that is not up makes no connection, and says why.
  const down = await link.freshConnection(10_000);
  assert.equal(down?.code, "link.closed");
});
