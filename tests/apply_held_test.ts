/**
 * The store is checked, not trusted (DESIGN.md §18): a held record edited in
 * state.db to name a path outside the managed roots, or one of the host's own
 * paths, is never acted on; the apply fails saying why and the file survives.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { exists, file, runHost, type Scratch, scratch } from "./_helpers.ts";

/** Apply one held file, then point its record in state.db at `victim`. */
async function tamperedHold(s: Scratch, victim: string): Promise<void> {
  const declaration = await s.declaration([file("f", `${s.root}/f`, "held\n")]);
  const applied = await runHost(["apply", declaration], { env: s.env });
  assert.equal(applied.code, 0, applied.stderr);
  const db = new DatabaseSync(posix.join(s.stateDir, "state.db"));
  try {
    const changed = db.prepare(
      `UPDATE held SET key = ?, spec = json_set(spec, '$.path', ?) WHERE key = ?`,
    ).run(`path:${victim}`, victim, `path:${s.root}/f`);
    assert.equal(changed.changes, 1);
  } finally {
    db.close();
  }
}

async function applyNothing(s: Scratch): Promise<Record<string, unknown>> {
  const empty = await s.declaration([]);
  const run = await runHost(["apply", "--json", empty], { env: s.env });
  assert.equal(run.code, 1, run.stderr + run.stdout);
  return JSON.parse(run.stdout);
}

Deno.test("a held record moved outside the managed roots is not acted on; the report says why", async () => {
  await using s = await scratch();
  const victim = posix.join(s.dir, "outside-every-root");
  await Deno.writeTextFile(victim, "not the host's\n");
  await tamperedHold(s, victim);

  const report = await applyNothing(s);
  assert.equal(report.outcome, "failed");
  assert.match(String(report.error), /releasing file "f" refused: .*is outside the managed roots/);
  const [result] = report.results as Record<string, unknown>[];
  assert.equal(result.outcome, "failed");
  assert.match(String(result.detail), /nothing was touched and the record was dropped/);
  assert.equal(await Deno.readTextFile(victim), "not the host's\n");

  // The record is gone: the next apply converges and still leaves the file alone.
  const again = await runHost(["apply", await s.declaration([])], { env: s.env });
  assert.equal(again.code, 0, again.stderr + again.stdout);
  assert.equal(await Deno.readTextFile(victim), "not the host's\n");
});

Deno.test("a held record naming one of the host's own paths is not acted on, even inside a managed root", async () => {
  await using s = await scratch();
  // The whole scratch is managed, so only the own-path rule stands between the
  // record and the host's state directory.
  await Deno.writeTextFile(
    s.configPath,
    JSON.stringify({ managedRoots: [s.dir] }),
  );
  await tamperedHold(s, `${s.root}/placeholder`);
  const victim = posix.join(s.stateDir, "node.nk");
  await Deno.writeTextFile(victim, "the node's key\n");
  const db = new DatabaseSync(posix.join(s.stateDir, "state.db"));
  db.prepare(`UPDATE held SET key = ?, spec = json_set(spec, '$.path', ?)`).run(
    `path:${victim}`,
    victim,
  );
  db.close();

  const report = await applyNothing(s);
  assert.match(String(report.error), /belongs to the host itself/);
  assert.ok(await exists(victim));
  assert.equal(await Deno.readTextFile(victim), "the node's key\n");
});

Deno.test("a held record whose key and spec disagree is not acted on", async () => {
  await using s = await scratch();
  await tamperedHold(s, `${s.root}/g`);
  await Deno.writeTextFile(`${s.root}/g`, "a person's file\n");
  const db = new DatabaseSync(posix.join(s.stateDir, "state.db"));
  db.prepare(`UPDATE held SET key = ?`).run(`path:${s.root}/elsewhere`);
  db.close();
  const report = await applyNothing(s);
  assert.match(String(report.error), /describes file path:.*\/g, not file path:.*\/elsewhere/);
  assert.equal(await Deno.readTextFile(`${s.root}/g`), "a person's file\n");
});
