// Intake's one record (issue 36, item 4): a declaration admitted from the uplink and not applied
// yet is owed by a single record of the store (src/store/store.ts `AdmittedRecord`), written in
// the commit of its serial and ended in the commit that makes it current. A service that stops
// in between applies it when it starts again, from the store alone, with no uplink; a record
// that does not match what it says is dropped, never applied.
import assert from "node:assert/strict";
import { posix } from "node:path";
import { acquireApplyLock } from "../src/lock.ts";
import { admit, canonicalBody, type Engine } from "../src/engine/mod.ts";
import { createSigningKey, signDeclaration } from "../src/link/signature.ts";
import { runService } from "../src/run/loop.ts";
import type { OpenUplink } from "../src/run/uplink.ts";
import { META } from "../src/store/meta.ts";
import { runHost, scratch } from "./_helpers.ts";
import { memoryUplinks } from "./_memory_uplink.ts";
import { enrolled, fileAt, until } from "./_enrolled.ts";

const offline = () => Promise.reject(new Error("no network"));

/** The service on `host` with `uplink`, its log into `lines`, while `work` runs; then stopped. */
async function serving(
  host: Engine,
  uplink: OpenUplink,
  lines: string[],
  work: () => Promise<unknown>,
): Promise<void> {
  const stop = new AbortController();
  const running = runService(host, {
    signal: stop.signal,
    log: (line) => lines.push(line),
    uplink,
    program: null,
  });
  try {
    await work();
  } finally {
    stop.abort();
    await running;
  }
}

Deno.test({
  name:
    "intake record: admitted while another apply holds the lock, the declaration is owed in the store; the service started again with no uplink applies it from there",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await using s = await scratch();
    const key = createSigningKey();
    using host = await enrolled(s, "node-p", key.getPublicKey());
    const f = posix.join(s.root, "owed");
    const lines: string[] = [];
    const say = () => `log:\n${lines.join("\n")}`;
    {
      using _lock = await acquireApplyLock(s.stateDir);
      const { open, opened } = memoryUplinks();
      await serving(host, open, lines, async () => {
        const uplink = await until(
          "the uplink up",
          () => opened[0]?.state.phase === "up" ? opened[0] : undefined,
        );
        const data = new TextEncoder().encode(JSON.stringify({
          version: 1,
          node: "node-p",
          serial: 7,
          resources: [fileAt("owed", f, "owed\n")],
        }));
        uplink.push({ data, signature: signDeclaration(key, "node-p", data) });
        await until(
          "the apply to find the lock taken",
          () => lines.some((l) => l.includes("stays pending")) || undefined,
        );
      });
    }
    const { record } = host.store.admitted();
    assert.equal(record?.serial, 7, say());
    assert.equal(record.node, "node-p");
    assert.equal(record.origin, "memory:node-p");
    assert.equal(host.store.current(), null, "nothing made current");
    const status = await runHost(["status", "--json"], { env: s.env });
    assert.deepEqual(JSON.parse(status.stdout).admitted, {
      serial: 7,
      digest: record.digest,
      at: record.at,
    });
    assert.match(
      (await runHost(["status"], { env: s.env })).stdout,
      /^admitted {5}serial 7 at \S+: not applied yet/m,
    );
    assert.equal(await Deno.readTextFile(f).catch(() => null), null, "nothing applied");

    lines.length = 0;
    await serving(host, offline, lines, async () => {
      await until("serial 7 current", () => host.store.current()?.serial === 7 || undefined);
      await until(
        "its apply",
        () => lines.some((l) => /serial 7\): converged/.test(l)) || undefined,
      );
    });
    assert.equal(await Deno.readTextFile(f), "owed\n", say());
    assert.equal(host.store.current()?.origin, "memory:node-p", "applied as the uplink's");
    assert.deepEqual(host.store.admitted(), {}, "no longer owed");
    assert.ok(lines.some((l) => l.includes("was not applied yet: applying it")), say());
    const kept = host.store.outbox.list().map((e) => JSON.parse(e.body));
    assert.ok(
      kept.some((r) => r.kind === "apply" && r.serial === 7),
      "its report waits in the outbox for the uplink",
    );
  },
});

Deno.test({
  name:
    "intake record: a record whose body does not match its digest, or that is for another node, is dropped and never applied",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await using s = await scratch();
    using host = await enrolled(s, "node-t", createSigningKey().getPublicKey());
    const f = posix.join(s.root, "tampered");
    const text = JSON.stringify({
      version: 1,
      node: "node-t",
      serial: 3,
      resources: [fileAt("t", f, "as signed\n")],
    });
    const declaration = await admit(host, text, { source: "link", origin: "memory:node-t" });
    const edited = canonicalBody(declaration).replace("as signed", "as edited");
    const cases = [
      { node: "node-t", body: edited, said: "does not match its digest" },
      { node: "node-other", body: canonicalBody(declaration), said: "was for node" },
    ];
    for (const c of cases) {
      host.store.setMeta(
        META.admitted,
        JSON.stringify({
          serial: 3,
          digest: declaration.digest,
          node: c.node,
          origin: "memory:node-t",
          body: c.body,
          at: new Date().toISOString(),
        }),
      );
      const lines: string[] = [];
      await serving(host, offline, lines, async () => {
        await until("the record dropped", () => lines.some((l) => l.includes(c.said)) || undefined);
        await until(
          "the reconcile",
          () => lines.some((l) => l.includes("nothing to hold")) || undefined,
        );
      });
      assert.deepEqual(host.store.admitted(), {}, `dropped (${c.said})`);
      assert.equal(host.store.current(), null);
      assert.equal(await Deno.readTextFile(f).catch(() => null), null, "nothing applied");
    }
  },
});
