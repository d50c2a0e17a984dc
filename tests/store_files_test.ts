/**
 * The store's files on disk (DESIGN.md §18): 0600 whatever they were, set on
 * descriptors (a symlink in their place is refused, never followed), and the
 * link's last accepted serial committed with a sync of the WAL.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { StoreError } from "../src/errors.ts";
import { Store, storeFiles } from "../src/store/store.ts";
import { modeOf } from "./_helpers.ts";
import { repoModule, straced } from "./_strace.ts";

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "nox-storefiles-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a new store's database and WAL files are 0600 whatever the umask", () =>
  withDir(async (dir) => {
    const old = Deno.umask(0o000);
    try {
      using store = Store.open(dir);
      store.setMeta("k", "v");
      for (const file of storeFiles(store.path)) assert.equal(await modeOf(file), "0600", file);
    } finally {
      Deno.umask(old);
    }
  }));

Deno.test("store files that already exist with wider modes are made 0600 on open", () =>
  withDir(async (dir) => {
    {
      using store = Store.open(dir);
      store.setMeta("k", "v");
    }
    const path = posix.join(dir, "state.db");
    for (const file of storeFiles(path)) {
      await Deno.writeFile(file, new Uint8Array(), { append: true });
      await Deno.chmod(file, 0o666);
    }
    using store = Store.open(dir);
    assert.equal(store.meta("k"), "v");
    for (const file of storeFiles(path)) assert.equal(await modeOf(file), "0600", file);
  }));

Deno.test("a symlink in place of a store file is refused and its target left as it was", () =>
  withDir(async (dir) => {
    const target = posix.join(dir, "elsewhere");
    await Deno.writeTextFile(target, "someone's file\n");
    await Deno.chmod(target, 0o644);
    const state = posix.join(dir, "state");
    await Deno.mkdir(state);
    await Deno.symlink(target, posix.join(state, "state.db-wal"));
    assert.throws(() => Store.open(state), (e: unknown) => {
      assert.ok(e instanceof StoreError);
      assert.match(e.message, /state\.db-wal is a symbolic link; the store never follows one/);
      return true;
    });
    assert.equal(await modeOf(target), "0644");
    assert.equal(await Deno.readTextFile(target), "someone's file\n");
  }));

/**
 * Run a script that opens a store and writes once with `setMeta`, once with the link's
 * `recordAdmitted` (src/trust/admission.ts), under strace: the fsync/fdatasync calls on the
 * WAL made by each write, counted between markers the script prints.
 */
async function walSyncsPerWrite(dir: string): Promise<{ plain: number; durable: number }> {
  const script = `
    import { Store } from ${repoModule("src/store/store.ts")};
    import { recordAdmitted } from ${repoModule("src/trust/admission.ts")};
    const store = Store.open(Deno.args[0]);
    store.setMeta("warm", "up");
    const mark = (m) => Deno.statSync("/").isDirectory && Deno.lstat("/nonexistent-" + m).catch(() => {});
    await mark("plain-begin");
    store.setMeta("other", "7");
    await mark("plain-end");
    recordAdmitted({ store }, { signer: "OKEY", node: "n1", serial: 8, digest: "sha256:x" });
    await mark("durable-end");
    store.close();
  `;
  const lines = await straced(dir, script, "fsync,fdatasync,lstat,newfstatat,statx", [
    posix.join(dir, "state"),
  ]);
  const at = (m: string) => lines.findIndex((l) => l.includes(`/nonexistent-${m}`));
  const syncs = (from: number, to: number) =>
    lines.slice(from, to).filter((l) => /(fsync|fdatasync)\(\d+<[^>]*state\.db-wal>/.test(l))
      .length;
  const [begin, mid, end] = [at("plain-begin"), at("plain-end"), at("durable-end")];
  assert.ok(begin >= 0 && mid > begin && end > mid, "the markers are in the trace");
  return { plain: syncs(begin, mid), durable: syncs(mid, end) };
}

Deno.test("the link's last serial is committed with the WAL synced (synchronous = FULL); other meta is not", () =>
  withDir(async (dir) => {
    const { plain, durable } = await walSyncsPerWrite(dir);
    assert.equal(plain, 0, "a plain meta write does not sync the WAL (synchronous = NORMAL)");
    assert.ok(durable >= 1, `the durable write synced the WAL ${durable} times`);
    using store = Store.open(posix.join(dir, "state"));
    assert.deepEqual(store.linkSerial("OKEY", "n1"), { serial: 8, digest: "sha256:x" });
  }));
