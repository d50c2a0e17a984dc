/**
 * The confirm window's decisions (src/run/confirm.ts) over a real store and real
 * applies of nftables tables in a network namespace this test makes: when a window
 * opens, where it goes back to, several pushes in one window, what a restarted process
 * does with a window left open, a tampered record; and the engine's `networkFirst`
 * order, which going back uses. The link is the run loop's (tests/run_confirm_test.ts
 * runs it for real); here the probe's answer and the clock are the test's.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { nftables } from "../os/nftables/mod.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { applyDeclaration } from "../src/engine/apply.ts";
import { parseDeclaration } from "../src/engine/parse.ts";
import type { ApplyOptions, ApplyReport, EngineContext } from "../src/engine/types.ts";
import { ConfirmWindow } from "../src/run/confirm.ts";
import { META } from "../src/store/meta.ts";
import { Store } from "../src/store/store.ts";
import { type Netns, netns } from "./resources/_netns.ts";

const WINDOW_S = 60;
const SUBJECT = "mesh.decl.node-a";

function firewall(port: number, table = "edge") {
  return {
    type: "firewall",
    id: table,
    family: "inet",
    table,
    rules:
      `chain input {\n type filter hook input priority 0; policy accept;\n tcp dport ${port} drop\n}`,
  };
}

function file(root: string, name: string, content: string, owner = "root") {
  return {
    type: "file",
    id: name,
    path: posix.join(root, name),
    content,
    mode: "0644",
    owner,
    group: "root",
  };
}

/** A store, a managed root and nftables in a namespace; applies declarations from the link. */
interface World extends AsyncDisposable {
  ns: Netns;
  dir: string;
  root: string;
  store: Store;
  /** Parse (safe parse, as from the link) and apply; returns the declaration and report. */
  push(
    serial: number,
    resources: unknown[],
    options?: Partial<ApplyOptions>,
  ): Promise<{ declaration: Awaited<ReturnType<typeof parseDeclaration>>; report: ApplyReport }>;
  /** A window over this store, with the test's clock and probe. */
  window(probe?: () => Promise<boolean>): ConfirmWindow;
  /** The test's clock (ms). */
  now: number;
  log: string[];
  /** How many times a window asked the loop to go back. */
  lapses: number;
}

async function world(tag: string): Promise<World> {
  const ns = await netns(tag);
  const dir = await Deno.makeTempDir({ prefix: "noxcf-" });
  const root = posix.join(dir, "root");
  await Deno.mkdir(root);
  const store = Store.open(posix.join(dir, "state"));
  const ctx: EngineContext = {
    store,
    providers: { fs: posixFileSystem(), firewall: nftables({ via: ns.via }) },
    config: { managedRoots: [root] },
    stateDir: posix.join(dir, "state"),
  };
  const windows: ConfirmWindow[] = [];
  const w: World = {
    ns,
    dir,
    root,
    store,
    now: Date.parse("2030-01-01T00:00:00Z"),
    log: [],
    lapses: 0,
    async push(serial, resources, options = {}) {
      const declaration = await parseDeclaration(
        JSON.stringify({ version: 1, node: "node-a", serial, resources }),
        { managedRoots: [root], own: { paths: [], services: [] } },
      );
      const report = await applyDeclaration(ctx, declaration, {
        source: "link",
        origin: SUBJECT,
        ...options,
      });
      return { declaration, report };
    },
    window(probe = () => Promise.resolve(false)) {
      const window = new ConfirmWindow({
        store,
        windowSeconds: WINDOW_S,
        log: (line) => w.log.push(line),
        probe,
        lapsed: () => w.lapses++,
        now: () => w.now,
        probeEveryMs: 10,
      });
      windows.push(window);
      return window;
    },
    async [Symbol.asyncDispose]() {
      windows.forEach((window) => window.stop());
      store.close();
      await Deno.remove(dir, { recursive: true });
      await ns[Symbol.asyncDispose]();
    },
  };
  return w;
}

/** A push through a window: opened before the apply, told after it (as the run loop does). */
async function pushThrough(w: World, window: ConfirmWindow, serial: number, resources: unknown[]) {
  const declaration = await parseDeclaration(
    JSON.stringify({ version: 1, node: "node-a", serial, resources }),
    { managedRoots: [w.root], own: { paths: [], services: [] } },
  );
  await window.before(declaration, SUBJECT, true);
  const { report } = await w.push(serial, resources);
  window.applied(report);
  return report;
}

/** The open window (read through a call: an assertion about it narrows nothing). */
function pendingOf(window: ConfirmWindow) {
  return window.pending;
}

async function until(what: string, probe: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (probe()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.fail(`timed out waiting for ${what}`);
}

Deno.test({
  name: "confirm window: only a push that changes what can cut the node off opens one; " +
    "an answer to a heartbeat after its apply closes it",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world("cfopen");
    let answer = false;
    const window = w.window(() => Promise.resolve(answer));
    await pushThrough(w, window, 1, [file(w.root, "a", "1")]);
    assert.equal(pendingOf(window), undefined, "files alone: no window");

    await pushThrough(w, window, 2, [file(w.root, "a", "1"), firewall(8081)]);
    assert.equal(pendingOf(window)?.serial, 2);
    assert.equal(pendingOf(window)?.restore?.serial, 1, "goes back to what was held before");
    assert.deepEqual(pendingOf(window)?.changed.map((c) => `${c.id}:${c.outcome}`), [
      "edge:changed",
    ]);
    assert.ok(w.store.meta(META.confirmPending), "on disk before anyone asks");
    answer = true;
    await until("the window to close", () => pendingOf(window) === undefined);
    assert.equal(w.store.meta(META.confirmPending), undefined);
    assert.match(w.log.join("\n"), /confirm: serial 2 confirmed/);

    // The same table again with a file changed: nothing that can cut the node off changes.
    await pushThrough(w, window, 3, [file(w.root, "a", "2"), firewall(8081)]);
    assert.equal(pendingOf(window), undefined);
  },
});

Deno.test({
  name: "confirm window: pushes inside one window keep its place to go back to; the lapse " +
    "makes that declaration current and refuses the last serial, in one commit on disk",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world("cfmany");
    const first = w.window(() => Promise.resolve(true));
    await pushThrough(w, first, 1, [firewall(8081)]);
    await until("serial 1 confirmed", () => pendingOf(first) === undefined);

    const open = w.window();
    await pushThrough(w, open, 2, [firewall(8082)]);
    w.now += 30_000;
    await pushThrough(w, open, 3, [firewall(8083), file(w.root, "b", "x")]);
    assert.equal(pendingOf(open)?.restore?.serial, 1);
    assert.equal(pendingOf(open)?.serial, 3);
    w.now += (WINDOW_S - 1) * 1000;
    assert.equal(await open.settle(), undefined, "the third push started the window again");
    w.now += 2000;
    const lapse = await open.settle();
    assert.ok(lapse);
    assert.equal(lapse.serial, 3);
    assert.match(
      lapse.message,
      /went back to serial 1, the one it held before; serial 3 is refused/,
    );
    assert.equal(w.store.currentHead()?.serial, 1);
    assert.ok(open.refuses(lapse.digest));

    // Another process reads the same.
    using again = Store.open(posix.join(w.dir, "state"));
    assert.equal(again.currentHead()?.serial, 1);
    assert.equal(again.meta(META.confirmPending), undefined);
    assert.equal(JSON.parse(again.meta(META.confirmRefused)!).serial, 3);
    const next = w.window();
    const lapses = w.lapses;
    next.resume();
    assert.ok(next.refuses(lapse.digest));
    assert.ok(!next.refuses("sha256:another"));
    // Ended before it went back: the next process goes back first thing.
    assert.equal(w.lapses, lapses + 1, "going back is owed");
    assert.match(w.log.join("\n"), /ended before it went back; going back now/);
    await w.push(1, [firewall(8081)], { networkFirst: true });
    w.window().resume();
    assert.equal(w.lapses, lapses + 1, "went back: nothing owed");
  },
});

Deno.test({
  name: "confirm window: a process that died inside it leaves it to the next, which gives it " +
    "at most one window more and counts an answer only after applying it again",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world("cfresume");
    const first = w.window(() => Promise.resolve(true));
    await pushThrough(w, first, 1, [firewall(8081)]);
    await until("serial 1 confirmed", () => pendingOf(first) === undefined);
    const dying = w.window();
    await pushThrough(w, dying, 2, [firewall(8082)]);
    dying.stop(); // the process dies

    // A deadline far away (a clock set back, or an edited store) is cut to one window.
    const record = JSON.parse(w.store.meta(META.confirmPending)!);
    w.store.setMeta(
      META.confirmPending,
      JSON.stringify({ ...record, deadline: "2099-01-01T00:00:00.000Z" }),
    );
    let answered = false;
    const next = w.window(() => Promise.resolve(answered));
    next.resume();
    assert.equal(pendingOf(next)?.serial, 2);
    assert.match(w.log.join("\n"), /not confirmed before the last process ended/);
    // Probes count only once this process applied it again.
    answered = true;
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(pendingOf(next)?.serial, 2, "no confirmation before its own apply");
    answered = false;
    w.now += WINDOW_S * 1000 + 1;
    const lapse = await next.settle();
    assert.equal(lapse?.serial, 2, "lapsed one window after resuming");
    assert.equal(w.store.currentHead()?.serial, 1);
    next.stop();

    // Resumed after a restart, applied again by this process, then answered: confirmed.
    const third = w.window();
    await pushThrough(w, third, 3, [firewall(8083)]);
    third.stop();
    answered = true;
    const fourth = w.window(() => Promise.resolve(answered));
    fourth.resume();
    // The start reconcile applies what the store holds: serial 3 again.
    fourth.applied((await w.push(3, [firewall(8083)])).report);
    await until("serial 3 confirmed", () => pendingOf(fourth) === undefined);
  },
});

Deno.test({
  name: "confirm window: an answer to a probe sent before a newer push does not confirm it",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world("cfgen");
    const answers: ((ok: boolean) => void)[] = [];
    const window = w.window(() => new Promise((resolve) => answers.push(resolve)));
    await pushThrough(w, window, 1, [firewall(8081)]);
    await until("a probe for serial 1", () => answers.length === 1);
    const declaration = await parseDeclaration(
      JSON.stringify({ version: 1, node: "node-a", serial: 2, resources: [firewall(8082)] }),
      { managedRoots: [w.root], own: { paths: [], services: [] } },
    );
    await window.before(declaration, SUBJECT, true); // serial 2 arrives while serial 1's probe waits
    answers[0](true);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(pendingOf(window)?.serial, 2, "still open for serial 2");
    const { report } = await w.push(2, [firewall(8082)]);
    window.applied(report);
    await until("a probe for serial 2", () => answers.length === 2);
    answers[1](true);
    await until("serial 2 confirmed", () => pendingOf(window) === undefined);
  },
});

Deno.test({
  name: "confirm window: an apply that did not happen (the lock busy) leaves a push waiting " +
    "for its apply, or the window open before as it was, still probed",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world("cfabandon");
    let answer = true;
    const window = w.window(() => Promise.resolve(answer));
    await pushThrough(w, window, 1, [firewall(8081)]);
    await until("serial 1 confirmed", () => pendingOf(window) === undefined);
    const parse = (serial: number, port: number) =>
      parseDeclaration(
        JSON.stringify({ version: 1, node: "node-a", serial, resources: [firewall(port)] }),
        { managedRoots: [w.root], own: { paths: [], services: [] } },
      );
    await window.before(await parse(2, 8082), SUBJECT, true);
    assert.equal(pendingOf(window)?.serial, 2);
    window.abandon();
    // Not applied: the window waits for the apply that will come (the loop's retry, or
    // the end of a hold), without a deadline.
    assert.equal(pendingOf(window)?.deadline, null);
    assert.equal(JSON.parse(w.store.meta(META.confirmPending)!).deadline, null);
    w.now += 10 * WINDOW_S * 1000;
    assert.equal(await window.settle(), undefined, "a window that waits never lapses");

    answer = false;
    await pushThrough(w, window, 2, [firewall(8082)]);
    assert.equal(pendingOf(window)?.restore?.serial, 1);
    const deadline = pendingOf(window)?.deadline;
    w.now += 10_000;
    await window.before(await parse(3, 8083), SUBJECT, true);
    window.abandon();
    assert.equal(pendingOf(window)?.serial, 2);
    assert.equal(pendingOf(window)?.deadline, deadline);
    assert.equal(JSON.parse(w.store.meta(META.confirmPending)!).serial, 2);
    answer = true;
    await until("serial 2 confirmed", () => pendingOf(window) === undefined);
  },
});

Deno.test({
  name: "confirm window: a push whose apply stops before its table waits; the drift pass " +
    "that reaches the table starts it, and a process dying in that apply leaves it running",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world("cfwait");
    let answer = true;
    const window = w.window(() => Promise.resolve(answer));
    await pushThrough(w, window, 1, [firewall(8081)]);
    await until("serial 1 confirmed", () => pendingOf(window) === undefined);
    const parse = (serial: number, resources: unknown[]) =>
      parseDeclaration(
        JSON.stringify({ version: 1, node: "node-a", serial, resources }),
        { managedRoots: [w.root], own: { paths: [], services: [] } },
      );

    // A file whose directory is missing fails before the table.
    const two = [file(posix.join(w.root, "a"), "x", "x"), firewall(8082)];
    assert.equal((await pushThrough(w, window, 2, two)).outcome, "failed");
    assert.equal(pendingOf(window)?.deadline, null, "waits: the table was not reached");
    assert.equal(pendingOf(window)?.restore?.serial, 1);
    assert.match(await w.ns.must(["nft", "list", "table", "inet", "edge"]), /dport 8081/);

    // The directory appears; the drift pass reaches the table: the window runs from it.
    await Deno.mkdir(posix.join(w.root, "a"));
    answer = false;
    await window.before(await parse(2, two), SUBJECT, false);
    const { report } = await w.push(2, two);
    assert.equal(report.outcome, "converged");
    window.applied(report);
    assert.notEqual(pendingOf(window)?.deadline, null, "running");
    assert.deepEqual(pendingOf(window)?.changed.map((c) => c.id), ["edge"]);
    answer = true;
    await until("serial 2 confirmed", () => pendingOf(window) === undefined);

    // Again, but the process dies during the drift pass that loads the table: the next
    // one finds the window running (on disk before that apply), not waiting.
    const three = [file(posix.join(w.root, "b"), "x", "x"), firewall(8083)];
    answer = false;
    assert.equal((await pushThrough(w, window, 3, three)).outcome, "failed");
    window.stop();
    await Deno.mkdir(posix.join(w.root, "b"));
    const dying = w.window();
    dying.resume();
    await dying.before(await parse(3, three), SUBJECT, false);
    await w.push(3, three); // the table is loaded; the process dies before it is told
    dying.stop();
    const next = w.window();
    next.resume();
    assert.notEqual(pendingOf(next)?.deadline, null, "running, not waiting");
    w.now += WINDOW_S * 1000 + 1;
    assert.equal((await next.settle())?.serial, 3);
    assert.equal(w.store.currentHead()?.serial, 2);
  },
});

Deno.test({
  name: "confirm window: a record that does not read is dropped and said, never acted on",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world("cftamper");
    await w.push(1, [firewall(8081)]);
    w.store.setMeta(META.confirmPending, JSON.stringify({ serial: 2, restore: "anything" }));
    const window = w.window();
    window.resume();
    assert.equal(pendingOf(window), undefined);
    assert.equal(w.store.meta(META.confirmPending), undefined);
    assert.match(w.log.join("\n"), /confirm_pending does not read .*dropped, nothing goes back/);
    w.now += 10 * WINDOW_S * 1000;
    assert.equal(await window.settle(), undefined);
    assert.equal(w.store.currentHead()?.serial, 1);
  },
});

Deno.test({
  name: "apply with networkFirst: what can cut the node off is released and applied before " +
    "a resource that fails; the declared order otherwise",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world("cffirst");
    const broken = file(w.root, "broken", "x", "no-such-user-here");
    const table = async (name = "edge") =>
      (await w.ns.exec(["nft", "list", "table", "inet", name])).stdout;
    assert.equal(
      (await w.push(1, [firewall(8081), firewall(9, "extra")])).report.outcome,
      "converged",
    );

    // In the declared order the failing file stops the apply before the table.
    const plain = (await w.push(2, [broken, firewall(8082)])).report;
    assert.equal(plain.outcome, "failed");
    assert.deepEqual(plain.results.map((r) => `${r.id}:${r.outcome}`), [
      "broken:failed",
      "edge:skipped",
    ]);
    assert.match(await table(), /dport 8081/);
    assert.match(await table("extra"), /dport 9/);

    const first = (await w.push(3, [broken, firewall(8082)], { networkFirst: true })).report;
    assert.equal(first.outcome, "failed");
    assert.deepEqual(first.results.map((r) => `${r.id}:${r.outcome}`), [
      "extra:removed",
      "edge:changed",
      "broken:failed",
    ]);
    assert.match(await table(), /dport 8082/);
    assert.equal(await table("extra"), "");
    // Positions stay the declared ones.
    assert.equal(
      w.store.managed().find((h) => h.id === "edge")?.position,
      1,
    );
  },
});
