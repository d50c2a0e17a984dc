// The run loop's work queue: reconciles coalesce, declarations never do, and a coalesced
// reconcile says the event that asked for it rather than the drift timer beside it.
import assert from "node:assert/strict";
import { WorkQueue } from "../src/run/queue.ts";

Deno.test("queue: reconciles coalesce into one, which names the event, not the drift timer beside it", async () => {
  const queue = new WorkQueue();
  queue.push({ kind: "reconcile", trigger: "drift" });
  queue.push({ kind: "reconcile", trigger: "unhold" });
  queue.push({ kind: "reconcile", trigger: "drift" });
  const first = await queue.next();
  assert.deepEqual(first, { kind: "reconcile", trigger: "unhold" });
});

Deno.test("queue: an event's reconcile waiting keeps its trigger when the drift timer fires", async () => {
  const queue = new WorkQueue();
  queue.push({ kind: "reconcile", trigger: "reconnect" });
  queue.push({ kind: "reconcile", trigger: "drift" });
  assert.deepEqual(await queue.next(), { kind: "reconcile", trigger: "reconnect" });
});

Deno.test("queue: declarations never coalesce, and keep their order with reconciles", async () => {
  const queue = new WorkQueue();
  const data = new Uint8Array([1]);
  queue.push({ kind: "declaration", data, trigger: "declaration" });
  queue.push({ kind: "reconcile", trigger: "drift" });
  queue.push({ kind: "declaration", data, trigger: "declaration" });
  assert.deepEqual((await queue.next())?.kind, "declaration");
  assert.deepEqual((await queue.next())?.kind, "reconcile");
  assert.deepEqual((await queue.next())?.kind, "declaration");
  queue.close();
  assert.equal(await queue.next(), undefined);
});
