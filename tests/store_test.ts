/** The store: schema versioning, history, and what it keeps across processes. */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { StoreError } from "../src/errors.ts";
import { MIGRATIONS } from "../src/store/migrations.ts";
import { HISTORY_KEPT, Store } from "../src/store/store.ts";
import { acquireApplyLock } from "../src/lock.ts";
import { BusyError } from "../src/errors.ts";

async function tempDir(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "nox-store-" });
}

Deno.test("a new store is created at the latest schema, in WAL mode", async () => {
  const dir = await tempDir();
  using store = Store.open(`${dir}/state`);
  assert.equal(store.schemaVersion, MIGRATIONS.length);
  const db = new DatabaseSync(`${dir}/state/state.db`);
  assert.equal(
    (db.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode,
    "wal",
  );
  db.close();
  assert.equal((await Deno.stat(`${dir}/state`)).mode! & 0o777, 0o700);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a store from a newer host is refused with what to do", async () => {
  const dir = await tempDir();
  const db = new DatabaseSync(`${dir}/state.db`);
  db.exec(`PRAGMA user_version = ${MIGRATIONS.length + 5}`);
  db.close();
  assert.throws(() => Store.open(dir), (e: unknown) => {
    assert.ok(e instanceof StoreError);
    assert.equal(e.code, "store.newer");
    assert.match(
      e.message,
      /newer than this host knows.*run that version, or move the file aside/s,
    );
    return true;
  });
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a file that is not a database is refused with what to do", async () => {
  const dir = await tempDir();
  await Deno.writeTextFile(
    `${dir}/state.db`,
    "this is not sqlite, just text that is long enough to matter\n".repeat(20),
  );
  assert.throws(() => Store.open(dir), /cannot be used.*move the file aside/s);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("held resources, the declaration and history survive a reopen", async () => {
  const dir = await tempDir();
  const spec = {
    type: "file" as const,
    id: "f",
    path: "/etc/f",
    content: "x",
    mode: "0644",
    owner: "root",
    group: "root",
  };
  {
    using store = Store.open(dir);
    store.makeCurrent({ source: "file", origin: "x.json", digest: "sha256:1", body: "{}" });
    const id = store.beginApply("file", "x.json", undefined, "sha256:1");
    const result = {
      id: "f",
      type: "file" as const,
      key: "path:/etc/f",
      outcome: "changed" as const,
      changes: ["create"],
    };
    store.recordManaged(id, 0, {
      key: "path:/etc/f",
      id: "f",
      type: "file",
      position: 0,
      digest: "d",
      spec,
      created: true,
    }, result);
    store.finishApply(id, "converged", {
      changed: 1,
      unchanged: 0,
      removed: 0,
      forgotten: 0,
      failed: 0,
    });
  }
  using store = Store.open(dir);
  assert.equal(store.current()?.origin, "x.json");
  assert.deepEqual(store.managed().map((h) => [h.key, h.created, h.spec.id]), [[
    "path:/etc/f",
    true,
    "f",
  ]]);
  const last = store.lastApply()!;
  assert.equal(last.outcome, "converged");
  assert.deepEqual(store.results(last.id).map((r) => [r.id, r.outcome, r.changes]), [[
    "f",
    "changed",
    ["create"],
  ]]);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("an apply left running by a dead process is marked interrupted by the next one", async () => {
  const dir = await tempDir();
  using store = Store.open(dir);
  const dead = store.beginApply("file", "x", undefined, "sha256:1");
  store.beginApply("file", "x", undefined, "sha256:1");
  assert.equal(store.applies().find((a) => a.id === dead)?.outcome, "interrupted");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("history keeps the last applies and prunes their results with them", async () => {
  const dir = await tempDir();
  using store = Store.open(dir);
  const none = { changed: 0, unchanged: 1, removed: 0, forgotten: 0, failed: 0 };
  for (let i = 0; i < HISTORY_KEPT + 10; i++) {
    const id = store.beginApply("file", "x", i, "sha256:1");
    store.recordResult(id, 0, {
      id: "f",
      type: "file",
      key: "path:/f",
      outcome: "unchanged",
      changes: [],
    });
    store.finishApply(id, "converged", none);
  }
  assert.equal(store.applies(10_000).length, HISTORY_KEPT);
  const db = new DatabaseSync(store.path);
  const orphans = db.prepare(
    "SELECT count(*) AS n FROM results WHERE apply_id NOT IN (SELECT id FROM applies)",
  ).get();
  db.close();
  assert.equal((orphans as { n: number }).n, 0);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("one apply at a time: a second lock waits, then says busy", async () => {
  const dir = await tempDir();
  const held = await acquireApplyLock(dir);
  await assert.rejects(() => acquireApplyLock(dir, { waitMs: 100 }), (e: unknown) => {
    assert.ok(e instanceof BusyError);
    assert.match(e.message, /another apply holds .*apply\.lock.*retry/);
    return true;
  });
  held[Symbol.dispose]();
  (await acquireApplyLock(dir, { waitMs: 100 }))[Symbol.dispose]();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("another process opening and closing the store leaves a running host's writes visible", async () => {
  // SQLite's locks are POSIX record locks, which a process loses on every file it
  // closes. Opening the store files once more after SQLite holds them (to restrict
  // their modes) dropped the running process's locks: a `status` run alongside then
  // believed itself the last connection, checkpointed and deleted the WAL on close,
  // and every later write of the running host went to a deleted file nobody else saw.
  const dir = await Deno.makeTempDir({ prefix: "noxst-lock-" });
  try {
    Store.open(dir).close(); // as `enrol` leaves it: a store in WAL mode
    using running = Store.open(dir);
    running.setMeta("before", "1");
    const other = (code: string) =>
      new Deno.Command(Deno.execPath(), {
        args: [
          "eval",
          `import { Store } from ${
            JSON.stringify(new URL("../src/store/store.ts", import.meta.url).href)
          }; const s = Store.open(${JSON.stringify(dir)}); ${code}; s.close();`,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
    const first = await other(`console.log(s.meta("before"))`);
    assert.equal(
      new TextDecoder().decode(first.stdout).trim(),
      "1",
      new TextDecoder().decode(first.stderr),
    );
    running.setMeta("after", "2");
    const second = await other(`console.log(s.meta("after"))`);
    assert.equal(
      new TextDecoder().decode(second.stdout).trim(),
      "2",
      new TextDecoder().decode(second.stderr),
    );
    assert.ok((await Deno.stat(`${dir}/state.db-wal`)).isFile);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the admitted record: one, replaced by the next, ended when its declaration becomes current, kept across a reopen", async () => {
  const dir = await tempDir();
  const accepted = (serial: number) => ({
    signer: "OKEY",
    node: "n1",
    serial,
    digest: `sha256:${serial}`,
  });
  const owed = (serial: number) => ({
    admitted: {
      serial,
      digest: `sha256:${serial}`,
      node: "n1",
      origin: "subject",
      body: `{"serial":${serial}}`,
    },
  });
  {
    using store = Store.open(dir);
    assert.deepEqual(store.admitted(), {});
    store.recordLinkSerial(accepted(1), undefined, owed(1));
    store.recordLinkSerial(accepted(2), undefined, owed(2));
    assert.equal(store.admitted().record?.serial, 2, "the newer admitted one replaces it");
    assert.equal(store.admittedDigest(), "sha256:2");
    // Another declaration made current (by hand, say) leaves it owed; a drop of another too.
    store.makeCurrent({ source: "file", origin: "x.json", digest: "sha256:9", body: "{}" });
    store.dropAdmitted("sha256:1");
    assert.equal(store.admittedDigest(), "sha256:2");
  }
  {
    using store = Store.open(dir);
    const { record } = store.admitted();
    assert.equal(record?.body, `{"serial":2}`, "kept across a reopen");
    assert.equal(store.linkSerial("OKEY", "n1")?.serial, 2, "in the commit of its serial");
    store.makeCurrent({ source: "link", origin: "subject", digest: "sha256:2", body: "{}" });
    assert.deepEqual(store.admitted(), {}, "ended by being made current");
    // The replay guard alone (a rotation followed for a known one) owes nothing.
    store.recordLinkSerial(accepted(3));
    assert.deepEqual(store.admitted(), {});
    store.setMeta("link_admitted", "{not json");
    assert.equal(store.admittedDigest(), undefined);
    assert.match(store.admitted().problem ?? "", /is not an admitted declaration/);
    store.dropAdmitted();
    assert.deepEqual(store.admitted(), {});
  }
  await Deno.remove(dir, { recursive: true });
});
