/**
 * The outbox in the store (DESIGN.md §19), on a real SQLite file: kept in
 * order, bounded by count and age, the number dropped handed to exactly one
 * later report, message ids unique even when a sequence number comes again.
 */
import assert from "node:assert/strict";
import { Store } from "../src/store/store.ts";
import { messageId, outgoing } from "../src/run/outbox.ts";
import { loadConfig } from "../src/config.ts";
import { scratch } from "./_helpers.ts";

const WIDE = { maxReports: 1000, maxAgeSeconds: 3600 };

Deno.test("the outbox keeps reports in order until each is removed, and survives reopening", async () => {
  await using s = await scratch();
  {
    using store = Store.open(s.stateDir);
    for (let i = 1; i <= 5; i++) store.outbox.push(JSON.stringify({ n: i }), WIDE);
    const head = store.outbox.head(WIDE)!;
    assert.deepEqual(JSON.parse(head.body), { n: 1 });
    store.outbox.remove(head.seq);
  }
  using store = Store.open(s.stateDir);
  assert.deepEqual(store.outbox.list().map((e) => JSON.parse(e.body).n), [2, 3, 4, 5]);
  const seqs = store.outbox.list().map((e) => e.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
});

Deno.test("the outbox's count bound drops the oldest; the next report handed out says how many", async () => {
  await using s = await scratch();
  using store = Store.open(s.stateDir);
  const bounds = { maxReports: 3, maxAgeSeconds: 3600 };
  const drops = [];
  for (let i = 1; i <= 7; i++) {
    drops.push(store.outbox.push(JSON.stringify({ n: i }), bounds).dropped);
  }
  assert.deepEqual(drops, [0, 0, 0, 1, 1, 1, 1]);
  assert.deepEqual(store.outbox.list().map((e) => JSON.parse(e.body).n), [5, 6, 7]);
  const first = store.outbox.head(bounds)!;
  assert.equal(JSON.parse(first.body).n, 5);
  assert.equal(first.dropped, 4);
  // Handed out again (not acknowledged yet): the same count, not a second one.
  assert.equal(store.outbox.head(bounds)!.dropped, 4);
  store.outbox.remove(first.seq);
  assert.equal(store.outbox.head(bounds)!.dropped, 0, "the count travels with one report only");
  // A report that was handed a count and is then dropped itself passes the count on.
  assert.equal(store.outbox.head(bounds)!.dropped, 0); // 6, handed out with no count
  for (let i = 8; i <= 10; i++) store.outbox.push(JSON.stringify({ n: i }), bounds);
  const carrier = store.outbox.head(bounds)!; // 8: told of 6 and 7
  assert.deepEqual([JSON.parse(carrier.body).n, carrier.dropped], [8, 2]);
  for (let i = 11; i <= 13; i++) store.outbox.push(JSON.stringify({ n: i }), bounds); // drops 8–10
  const next = store.outbox.head(bounds)!;
  assert.deepEqual([JSON.parse(next.body).n, next.dropped], [11, 3 + 2]);
});

Deno.test("the outbox's age bound drops reports older than maxAgeSeconds", async () => {
  await using s = await scratch();
  using store = Store.open(s.stateDir);
  const bounds = { maxReports: 100, maxAgeSeconds: 60 };
  const t0 = new Date("2030-01-01T00:00:00Z");
  store.outbox.push(JSON.stringify({ n: 1 }), bounds, t0);
  store.outbox.push(JSON.stringify({ n: 2 }), bounds, new Date(t0.getTime() + 30_000));
  store.outbox.push(JSON.stringify({ n: 3 }), bounds, new Date(t0.getTime() + 70_000));
  // At +70 s the first (70 s old) is over the bound; the second (40 s) is not.
  assert.deepEqual(store.outbox.list().map((e) => JSON.parse(e.body).n), [2, 3]);
  const head = store.outbox.head(bounds, new Date(t0.getTime() + 95_000))!;
  assert.equal(JSON.parse(head.body).n, 3);
  assert.equal(head.dropped, 2);
});

Deno.test("outbox message ids: unique even when a sequence number is given out again", async () => {
  await using s = await scratch();
  using store = Store.open(s.stateDir);
  const first = store.outbox.push("{}", WIDE).seq;
  const firstEntry = store.outbox.head(WIDE)!;
  store.outbox.remove(first);
  store.outbox.push("{}", WIDE);
  const second = store.outbox.head(WIDE)!;
  assert.ok(second.seq > first, "a removed report's sequence number is not given out again");
  assert.match(messageId("node-a", second), /^node-a\.\d+\.[0-9a-f]{12}$/);
  assert.deepEqual(JSON.parse(outgoing(second, "x")), { id: "x" });
  // A copy of the store taken before a push (or a commit lost in a power cut)
  // gives the same seq out again: the id still differs.
  await using t = await scratch();
  const copies = [];
  for (const dir of [s.stateDir, t.stateDir]) {
    using one = Store.open(dir);
    one.outbox.push("{}", WIDE);
    copies.push(one.outbox.list().at(-1)!);
  }
  assert.equal(copies[0].seq, firstEntry.seq + 2);
  assert.equal(copies[1].seq, firstEntry.seq, "a fresh store starts at the same seq");
  assert.notEqual(messageId("n", copies[1]), messageId("n", firstEntry));
});

Deno.test("host.json outbox bounds: defaults, values, and refusals", async () => {
  await using s = await scratch();
  const defaults = await loadConfig({ configPath: s.configPath, stateDir: s.stateDir });
  assert.deepEqual(defaults.outbox, { maxReports: 1000, maxAgeSeconds: 604800 });
  await Deno.writeTextFile(
    s.configPath,
    JSON.stringify({ managedRoots: [s.root], outbox: { maxReports: 20 } }),
  );
  const set = await loadConfig({ configPath: s.configPath, stateDir: s.stateDir });
  assert.deepEqual(set.outbox, { maxReports: 20, maxAgeSeconds: 604800 });
  await Deno.writeTextFile(
    s.configPath,
    JSON.stringify({ managedRoots: [s.root], outbox: { maxReports: 0, maxAge: 5 } }),
  );
  await assert.rejects(
    loadConfig({ configPath: s.configPath, stateDir: s.stateDir }),
    /outbox\.maxReports[\s\S]*outbox\.maxAge: is not a known setting/,
  );
});
