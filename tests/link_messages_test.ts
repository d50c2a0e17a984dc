/**
 * What a node sends stays within what the broker stores of it (NODE_LIMITS): a report
 * the broker refused for its size would stay at the head of the outbox for ever, and a
 * message above the account's max_payload would cost the connection. Reports are cut
 * to fit (unchanged results first, then the last of the others; a failure stays), a
 * refusal's problems likewise, and a heartbeat leaves its held list out.
 */
import assert from "node:assert/strict";
import type { ApplyReport } from "../src/engine/types.ts";
import type { ResourceResult } from "../src/store/records.ts";
import {
  applyMessage,
  applyReportText,
  heartbeatMessage,
  refusalMessage,
  REPORT_BUDGET,
  wireSize,
} from "../src/link/messages.ts";
import { NODE_LIMITS } from "../src/link/subjects.ts";
import { outgoing } from "../src/run/outbox.ts";
import type { OutboxEntry } from "../src/store/outbox_table.ts";
import { hostOn, scratch } from "./_helpers.ts";

function result(i: number, outcome: ResourceResult["outcome"]): ResourceResult {
  return {
    id: `file-${i}`,
    type: "file",
    key: `path:/srv/app/${"deep/".repeat(8)}file-${i}.conf`,
    outcome,
    changes: outcome === "unchanged" ? [] : ["content", "mode 0644 -> 0600"],
    ...(outcome === "failed" ? { detail: `cannot write: ${"why ".repeat(2000)}` } : {}),
  };
}

function report(results: ResourceResult[], error?: string): ApplyReport {
  return {
    applyId: 1,
    outcome: error ? "failed" : "converged",
    source: "link",
    origin: "mesh.decl.n",
    serial: 7,
    digest: "sha256:" + "0".repeat(64),
    startedAt: new Date().toISOString(),
    durationMs: 5,
    counts: { changed: 0, unchanged: 0, removed: 0, forgotten: 0, failed: 0 },
    results,
    ...(error ? { error } : {}),
  };
}

Deno.test("an apply report always fits what the broker stores of a report: unchanged results go first, then the last others; a failure stays", () => {
  // Small: as it is.
  const small = applyMessage("n", report([result(1, "changed"), result(2, "unchanged")]), "drift");
  assert.equal(small.results.length, 2);
  assert.equal(small.omitted, undefined);

  // Many unchanged and a few changed: the unchanged ones are left out.
  const mixed = [
    ...Array.from({ length: 3000 }, (_, i) => result(i, "unchanged")),
    result(3000, "changed"),
  ];
  const m = applyMessage("n", report(mixed), "drift");
  assert.ok(wireSize(m) <= REPORT_BUDGET, `${wireSize(m)} bytes`);
  assert.deepEqual(m.results.map((r) => r.id), ["file-3000"]);
  assert.equal(m.omitted, 3000);

  // Thousands changed, then one that failed with a long reason, and a long error.
  const changed = Array.from({ length: 5000 }, (_, i) => result(i, "changed"));
  const failing = report([...changed, result(5000, "failed")], `file-5000: ${"x".repeat(90_000)}`);
  const f = applyMessage("n", failing, "declaration");
  const size = wireSize(f);
  assert.ok(size <= REPORT_BUDGET, `${size} bytes`);
  assert.ok(size + 512 <= NODE_LIMITS.reportBytes, "room for the id and dropped count");
  assert.ok(f.results.length > 100, `only ${f.results.length} results kept`);
  assert.equal(f.results.at(-1)?.id, "file-5000", "the failed result is kept");
  assert.deepEqual(
    f.results.slice(0, -1).map((r) => r.id),
    changed.slice(0, f.results.length - 1).map((r) => r.id),
    "the first of the others, in order",
  );
  assert.equal(f.omitted, 5001 - f.results.length);
  assert.match(f.error ?? "", /^file-5000: x+… \(\d+ more characters\)$/);
});

Deno.test("a refusal report fits too: its message and problems are cut short, then fewer problems", () => {
  const problems = Array.from({ length: 50 }, (_, i) => ({
    path: `resources[${i}].path`,
    message: `refused: ${"a path that goes on and on/".repeat(400)}`,
  }));
  const r = refusalMessage("n", 9, "invalid", "refused: " + "m".repeat(100_000), problems);
  assert.ok(wireSize(r) <= REPORT_BUDGET, `${wireSize(r)} bytes`);
  assert.ok(r.problems.length >= 10, `${r.problems.length} problems kept`);
  assert.equal(r.problems[0].path, "resources[0].path");
  assert.match(r.message, /… \(\d+ more characters\)$/);
  // A small one is as it was.
  const plain = refusalMessage("n", 9, "replay", "serial 9 is not newer than 9", []);
  assert.equal(plain.message, "serial 9 is not newer than 9");
});

Deno.test("a heartbeat whose held list would be larger than the broker stores goes without it", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const big: [string, string][] = Array.from(
    { length: 2000 },
    (_, i) => [`path:/srv/${"d/".repeat(30)}${i}`, `sha256:${"1".repeat(64)}`],
  );
  const facts = { startedAt: performance.now(), serial: 1, nextDriftAt: null };
  const beat = heartbeatMessage("n", host.store, facts, { list: big, digest: "sha256:x" }, true);
  assert.equal(beat.heldList, undefined);
  assert.equal(beat.held.count, 2000);
  assert.ok(wireSize(beat) <= NODE_LIMITS.heartbeatBytes);
  const few = heartbeatMessage("n", host.store, facts, {
    list: big.slice(0, 3),
    digest: "sha256:x",
  }, true);
  assert.equal(few.heldList?.length, 3);
});

Deno.test("a report an earlier version kept larger is shrunk on delivery, never left at the head of the outbox", () => {
  // What the outbox of a version that cut reports at 256 KiB may hold.
  const old = {
    v: 1,
    kind: "apply",
    node: "n",
    serial: 3,
    outcome: "failed",
    counts: { changed: 2000, unchanged: 0, removed: 0, failed: 1 },
    results: Array.from({ length: 2000 }, (_, i) => result(i, "changed")),
    error: "e".repeat(50_000),
  };
  const entry: OutboxEntry = {
    seq: 1,
    key: "1.abcdef",
    body: JSON.stringify(old),
    at: new Date().toISOString(),
    dropped: 2,
  };
  const sent = outgoing(entry, "n.1.abcdef");
  assert.ok(new TextEncoder().encode(sent).length <= NODE_LIMITS.reportBytes);
  const body = JSON.parse(sent);
  assert.deepEqual(
    [body.id, body.dropped, body.serial, body.outcome, body.results, body.omitted],
    ["n.1.abcdef", 2, 3, "failed", [], 2000],
  );
  assert.deepEqual(body.counts, old.counts);
  // One that fits goes as it was kept.
  const small = { ...entry, body: JSON.stringify({ v: 1, kind: "apply", results: [] }) };
  assert.deepEqual(JSON.parse(outgoing(small, "x")), {
    v: 1,
    kind: "apply",
    results: [],
    id: "x",
    dropped: 2,
  });
});

Deno.test("an apply report is stringified once: the outbox keeps that text and sends it with its id added, not parsed again", () => {
  for (
    const results of [
      [result(1, "changed")],
      Array.from({ length: 3000 }, (_, i) => result(i, "changed")),
    ]
  ) {
    const { message, text } = applyReportText("n", report(results), "drift");
    assert.equal(text, JSON.stringify(message), "the text is the message's");
    assert.ok(new TextEncoder().encode(text).length <= REPORT_BUDGET);
    const entry: OutboxEntry = { seq: 1, key: "1.ab", body: text, at: "", dropped: 3 };
    const sent = outgoing(entry, "n.1.ab");
    assert.equal(sent, `${text.slice(0, -1)},"id":"n.1.ab","dropped":3}`);
    assert.deepEqual(JSON.parse(sent), { ...message, id: "n.1.ab", dropped: 3 });
  }
});
