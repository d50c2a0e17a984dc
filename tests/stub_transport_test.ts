// What adding a transport takes (issue 36; docs/contributing.md, "Add a transport"): its
// folder, which implements the run loop's uplink (src/run/uplink.ts) and an opener for it,
// and the one line of src/cli/_link.ts that names the opener `run` uses. Here: nothing of
// src/run, src/trust or src/engine reaches the NATS transport; outside its folder only that
// line names it; and a transport that exists only in this test (tests/_memory_uplink.ts),
// handed to the real run loop, carries declarations in and reports, heartbeats and content
// as the NATS link does: no broker, no other file.
import assert from "node:assert/strict";
import { join, posix, relative } from "node:path";
import { createSigningKey, signDeclaration } from "../src/link/signature.ts";
import { sha256Hex } from "../src/declaration/canonical.ts";
import { runService } from "../src/run/loop.ts";
import { readRunStatus } from "../src/run/run_status.ts";
import { scratch } from "./_helpers.ts";
import { MemoryUplink, memoryUplinks } from "./_memory_uplink.ts";
import { enrolled, fileAt, until } from "./_enrolled.ts";

const root = new URL("../", import.meta.url).pathname;

/** Every .ts file of the program (not tests) under `dirs`, relative to the repository. */
async function sources(...dirs: string[]): Promise<string[]> {
  const out: string[] = [];
  const walk = async (at: string) => {
    for await (const entry of Deno.readDir(at)) {
      const path = join(at, entry.name);
      if (entry.isDirectory) await walk(path);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith("_test.ts")) {
        out.push(relative(root, path));
      }
    }
  };
  for (const dir of dirs) await walk(join(root, dir));
  return out.sort();
}

/** The modules `file` imports (static, type-only and dynamic), as repository paths or bare names. */
async function importsOf(file: string): Promise<string[]> {
  const text = await Deno.readTextFile(join(root, file));
  return [
    ...text.matchAll(/^\s*(?:import|export)\b[^;]*?from\s+"([^"]+)"/gms),
    ...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g),
  ].map((m) => m[1]).map((s) =>
    s.startsWith(".") ? relative(root, new URL(s, `file://${join(root, file)}`).pathname) : s
  );
}

/**
 * The NATS transport's own modules: the connection, the link, its subjects, its object
 * store, its opener, and the client. What src/run and src/trust use of src/link besides
 * is the mesh's, whatever carries it: the node's identity, the messages, signatures and
 * the brokers' trust list.
 */
const TRANSPORT = [
  "src/link/link.ts",
  "src/link/connection.ts",
  "src/link/subjects.ts",
  "src/link/object_source.ts",
  "src/link/nats_uplink.ts",
];
const reachesTransport = (i: string) => TRANSPORT.includes(i) || i.startsWith("@nats-io/");

Deno.test("stub transport: the run loop, the trust module and the engine never reach the NATS transport", async () => {
  const found: string[] = [];
  for (const file of await sources("src/run", "src/trust", "src/engine")) {
    for (const i of await importsOf(file)) if (reachesTransport(i)) found.push(`${file} -> ${i}`);
  }
  assert.deepEqual(found, []);
  for (const file of await sources("src/engine")) {
    const link = (await importsOf(file)).filter((i) => i.startsWith("src/link/"));
    assert.deepEqual(link, [], `${file} imports the link`);
  }
});

Deno.test("stub transport: outside its folder, the NATS transport's opener is named by one line of src/cli/_link.ts", async () => {
  const naming: string[] = [];
  for (const file of await sources("src", "os", "packaging", "lab")) {
    if (file.startsWith("src/link/")) continue;
    const text = await Deno.readTextFile(join(root, file));
    text.split("\n").forEach((line, n) => {
      if (/nats_uplink|natsUplink|\bnew Link\(/.test(line) && !/^\s*(\/\/|\*)/.test(line)) {
        naming.push(`${file}:${n + 1}`);
      }
    });
  }
  assert.equal(naming.length, 1, `named at ${naming.join(", ")}`);
  assert.match(naming[0], /^src\/cli\/_link\.ts:\d+$/);
  // `run` takes whatever that line exports: the opener is not named again.
  const run = await Deno.readTextFile(join(root, "src/cli/cmd_run.ts"));
  assert.match(run, /uplink: openUplink\(\)/);
});

Deno.test({
  name:
    "stub transport: a transport of the test's own carries declarations in and reports, refusals, heartbeats and content up (no broker)",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await using s = await scratch();
    const key = createSigningKey();
    using host = await enrolled(s, "node-m", key.getPublicKey());
    const { open, opened } = memoryUplinks();
    const stop = new AbortController();
    const lines: string[] = [];
    const running = runService(host, {
      signal: stop.signal,
      log: (line) => lines.push(line),
      uplink: open,
      program: null,
      heartbeatIntervalSeconds: 1,
    });
    const say = () => `log:\n${lines.join("\n")}`;
    const push = (uplink: MemoryUplink, body: Record<string, unknown>, sign = true) => {
      const data = new TextEncoder().encode(
        JSON.stringify({ version: 1, node: "node-m", ...body }),
      );
      uplink.push({ data, ...(sign ? { signature: signDeclaration(key, "node-m", data) } : {}) });
    };
    const report = (uplink: MemoryUplink, kind: string, serial: number) =>
      uplink.of("report").find((r) => r.kind === kind && r.serial === serial);
    try {
      const uplink = await until("the uplink opened", () => opened[0]);
      await until("the uplink up", () => uplink.state.phase === "up" || undefined);
      const f = posix.join(s.root, "f");
      push(uplink, { serial: 1, resources: [fileAt("f", f, "one\n")] });
      const applied = await until("the report of serial 1", () => report(uplink, "apply", 1));
      assert.equal(applied.outcome, "converged", say());
      assert.equal(applied.trigger, "declaration");
      assert.equal(await Deno.readTextFile(f), "one\n");
      assert.equal(host.store.current()?.origin, "memory:node-m", "its origin is the uplink's");
      // The same serial with other content is a replay; an unsigned one is refused unread.
      push(uplink, { serial: 1, resources: [fileAt("f", f, "replayed\n")] });
      const replay = await until("the replay refused", () => report(uplink, "refused", 1));
      assert.equal(replay.reason, "replay");
      push(uplink, { serial: 2, resources: [fileAt("f", f, "unsigned\n")] }, false);
      const unsigned = await until("the unsigned refused", () => report(uplink, "refused", 2));
      assert.equal(unsigned.reason, "unsigned");
      assert.equal(await Deno.readTextFile(f), "one\n", "nothing refused was applied");
      await until("a heartbeat", () => uplink.of("heartbeat").length > 0 || undefined);
      // Content by digest comes over the uplink.
      const bytes = new TextEncoder().encode("from the uplink\n");
      const sha = await sha256Hex(bytes);
      uplink.content.set(sha, bytes);
      const g = posix.join(s.root, "g");
      const { content: _, ...owned } = fileAt("g", g, "");
      const byDigest = { ...owned, contentSha256: sha, size: bytes.length };
      push(uplink, { serial: 3, resources: [byDigest] });
      assert.equal(
        (await until("serial 3", () => report(uplink, "apply", 3))).outcome,
        "converged",
      );
      assert.equal(await Deno.readTextFile(g), "from the uplink\n", say());
      // Pushed while cut off: the catch-up on the way up brings it (a reconnect).
      uplink.cut();
      push(uplink, { serial: 4, resources: [fileAt("f", f, "four\n")] });
      uplink.restore();
      const caught = await until("serial 4 caught up", () => report(uplink, "apply", 4));
      assert.equal(caught.trigger, "reconnect", say());
      assert.equal(await Deno.readTextFile(f), "four\n");
      // Every report was delivered once, under its own id.
      const ids = uplink.sent.filter((x) => x.kind === "report").map((x) => x.id);
      assert.equal(new Set(ids).size, ids.length);
    } finally {
      stop.abort();
      await running;
    }
    assert.equal(opened[0].closed, true, "the loop closes its uplink when it stops");
  },
});

Deno.test({
  name:
    "stub transport: an uplink that cannot open is the status record's link problem, and the machine is held from the store",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await using s = await scratch();
    using host = await enrolled(s, "node-n", createSigningKey().getPublicKey());
    const stop = new AbortController();
    const lines: string[] = [];
    const running = runService(host, {
      signal: stop.signal,
      log: (line) => lines.push(line),
      uplink: () => Promise.reject(new Error("its key cannot be read")),
      program: null,
    });
    try {
      const status = await until("the status", () => {
        const r = readRunStatus(host.store);
        return r?.phase === "running" && r.linkProblem ? r : undefined;
      });
      assert.equal(status.linkProblem, "its key cannot be read");
      assert.equal(status.link, null);
      await until(
        "the start reconcile",
        () => lines.some((l) => l.includes("nothing to hold yet")) || undefined,
      );
    } finally {
      stop.abort();
      await running;
    }
  },
});

Deno.test({
  name:
    "stub transport: a declaration refused as expired by a clock that is wrong is taken once the clock is right; the same one again is known, not a replay",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await using s = await scratch();
    const key = createSigningKey();
    using host = await enrolled(s, "node-e", key.getPublicKey());
    const { open, opened } = memoryUplinks();
    const stop = new AbortController();
    const lines: string[] = [];
    let skew = 2 * 3600_000; // this node's clock is two hours ahead
    const running = runService(host, {
      signal: stop.signal,
      log: (line) => lines.push(line),
      uplink: open,
      program: null,
      heartbeatIntervalSeconds: 1,
      now: () => Date.now() + skew,
    });
    try {
      const uplink = await until(
        "the uplink up",
        () => opened[0]?.state.phase === "up" ? opened[0] : undefined,
      );
      const f = posix.join(s.root, "e");
      const data = new TextEncoder().encode(JSON.stringify({
        version: 1,
        node: "node-e",
        serial: 1,
        resources: [fileAt("e", f, "in time\n")],
      }));
      const notAfter = new Date(Date.now() + 3600_000);
      const signature = signDeclaration(key, "node-e", data, { notAfter });
      uplink.push({ data, signature });
      const refused = await until(
        "the refusal",
        () => uplink.of("report").find((r) => r.kind === "refused" && r.serial === 1),
      );
      assert.equal(refused.reason, "expired");
      assert.equal(await Deno.readTextFile(f).catch(() => null), null, "nothing applied");
      skew = 0; // the clock set right: the next tick hands it on again, no network asked
      const applied = await until(
        "the apply",
        () => uplink.of("report").find((r) => r.kind === "apply" && r.serial === 1),
      );
      assert.equal(applied.outcome, "converged", lines.join("\n"));
      assert.equal(await Deno.readTextFile(f), "in time\n");
      assert.equal(
        uplink.of("report").filter((r) => r.kind === "refused").length,
        1,
        "the refusal was said once",
      );
      uplink.push({ data, signature });
      await until("known", () => lines.some((l) => l.includes("serial 1 again")) || undefined);
      assert.equal(uplink.of("report").filter((r) => r.serial === 1).length, 2);
    } finally {
      stop.abort();
      await running;
    }
  },
});
