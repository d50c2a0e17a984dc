/**
 * A no-op that reads nothing unchanged (issue 28): the store keeps, per held file, the
 * identity it was last read back in sync as (device, inode, size, modification and change
 * times); an apply does not read a file whose identity is still that (an lstat in the
 * directory held), except every Nth apply (host.json fullReadBackEvery), which reads
 * every file. What a person or a program does to a file changes its change time, which no
 * process can set: a user who rewrites a managed file with the same size and puts its
 * modification time back is still found and repaired. Reads are counted with the
 * adapter's own test hook (`beforeAct("read")`), on the real file system.
 */
import assert from "node:assert/strict";
import { applyText, type Engine, openEngine } from "../src/engine/mod.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { trusted } from "../src/resources/file.ts";
import { DatabaseSync } from "node:sqlite";
import { type Scratch, scratch } from "./_helpers.ts";
import { asNobody, NOBODY } from "./_nobody.ts";

interface World {
  s: Scratch;
  host: Engine;
  /** Paths read in the last apply. */
  reads: string[];
  apply(resources: unknown[]): ReturnType<typeof applyText>;
}

async function world(config: Record<string, unknown> = {}): Promise<World> {
  const s = await scratch(config);
  await Deno.chmod(s.dir, 0o755);
  await Deno.chmod(s.root, 0o755);
  const reads: string[] = [];
  const fs = posixFileSystem({ beforeAct: (act, path) => act === "read" && reads.push(path) });
  const host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs }),
  });
  return {
    s,
    host,
    reads,
    apply(resources) {
      reads.length = 0;
      return applyText(host, JSON.stringify({ version: 1, resources }), {
        source: "file",
        origin: "test",
      });
    },
  };
}

const file = (id: string, path: string, content: string, owner = "root") => ({
  type: "file",
  id,
  path,
  content,
  mode: "0644",
  owner,
  group: owner === "root" ? "root" : "nogroup",
});

/**
 * Wait until every file's change time lies a whole second (Deno reports change times to
 * the second) and the clock margin in the past: from then on a read of it is trusted.
 */
async function settle(paths: string[]): Promise<void> {
  let latest = 0;
  for (const path of paths) latest = Math.max(latest, (await Deno.lstat(path)).ctime!.getTime());
  const at = Math.floor(latest / 1000) * 1000 + 1000 + 60;
  while (Date.now() < at) await new Promise((r) => setTimeout(r, at - Date.now() + 5));
}

Deno.test("read-back identity: an apply reads no file that is as it was last read back; every Nth apply reads every file", async () => {
  const w = await world({ fullReadBackEvery: 4 });
  await using _ = w.s;
  using _host = w.host;
  const paths = Array.from({ length: 12 }, (_, i) => `${w.s.root}/f${i}.conf`);
  const resources = paths.map((p, i) => file(`f${i}`, p, `line ${i}\n`));
  // Pass 1 writes them (and reads each back at once).
  assert.equal((await w.apply(resources)).counts.changed, 12);
  await settle(paths);
  // Pass 2 reads every one (those read-backs came too soon after the writes to be trusted).
  const second = await w.apply(resources);
  assert.equal(second.counts.unchanged, 12);
  assert.deepEqual(w.reads.sort(), [...paths].sort());
  // Pass 3: nothing read, nothing changed.
  const third = await w.apply(resources);
  assert.equal(third.counts.unchanged, 12);
  assert.equal(w.reads.length, 0, "no file read when every identity is unchanged");
  // Pass 4 is the 4th since the last full read-back: every file is read.
  await w.apply(resources);
  assert.equal(w.reads.length, 12, "the full read-back reads every file");
  await w.apply(resources);
  assert.equal(w.reads.length, 0, "and the count starts again");
});

Deno.test("read-back identity: a user who rewrites a managed file with the same size and puts its times back is found (its change time moved) and repaired", async () => {
  const w = await world();
  await using _ = w.s;
  using _host = w.host;
  // A home owned by nobody (the host reads there through node's O_NOFOLLOW|O_NONBLOCK),
  // and a file of nobody's in a directory only root can change (Deno's own open).
  const home = `${w.s.root}/home`;
  await Deno.mkdir(home);
  await Deno.chown(home, NOBODY, NOBODY);
  const etc = `${w.s.root}/etc`;
  await Deno.mkdir(etc, { mode: 0o755 });
  const keys = `${home}/authorized_keys`;
  const conf = `${etc}/user.conf`;
  const resources = [
    file("keys", keys, "ssh-ed25519 AAAA host\n", "nobody"),
    file("conf", conf, "setting = declared\n", "nobody"),
  ];
  await w.apply(resources);
  await settle([keys, conf]);
  await w.apply(resources); // read, identities trusted from here
  await w.apply(resources);
  assert.equal(w.reads.length, 0, "both known by their identity");

  for (
    const [path, tampered] of [[keys, "ssh-ed25519 EVIL user\n"], [conf, "setting = attacker\n"]]
  ) {
    const before = await Deno.lstat(path);
    assert.equal(tampered.length, before.size, "same size");
    // As the file's owner: new bytes in place, then the old modification and access times.
    await asNobody(
      'printf %s "$2" > "$1" && touch -m -d "@$3" "$1"',
      path,
      tampered,
      (before.mtime!.getTime() / 1000).toFixed(3),
    );
    const after = await Deno.lstat(path);
    assert.equal(after.ino, before.ino);
    assert.equal(after.size, before.size);
    assert.equal(after.mtime!.getTime(), before.mtime!.getTime(), "its mtime put back");
  }
  const repair = await w.apply(resources);
  assert.equal(repair.counts.changed, 2, JSON.stringify(repair.results));
  assert.equal(await Deno.readTextFile(keys), "ssh-ed25519 AAAA host\n");
  assert.equal(await Deno.readTextFile(conf), "setting = declared\n");
  // After a change by an apply, the file is read in full at the next apply.
  await w.apply(resources);
  assert.deepEqual(w.reads.sort(), [keys, conf].sort());
});

Deno.test("read-back identity: a changed declaration, a changed mode or owner, a file replaced by a symlink: each is looked at, never skipped", async () => {
  const w = await world();
  await using _ = w.s;
  using _host = w.host;
  const home = `${w.s.root}/home`;
  await Deno.mkdir(home);
  await Deno.chown(home, NOBODY, NOBODY);
  const victim = `${w.s.dir}/victim`;
  await Deno.writeTextFile(victim, "root's secret\n", { mode: 0o600 });
  const a = `${w.s.root}/a.conf`, b = `${w.s.root}/b.conf`, c = `${home}/c.conf`;
  const resources = [file("a", a, "a\n"), file("b", b, "b\n"), file("c", c, "c\n", "nobody")];
  await w.apply(resources);
  await settle([a, b, c]);
  await w.apply(resources);
  await w.apply(resources);
  assert.equal(w.reads.length, 0);

  // Another content declared for a: read (its identity was for the old declaration).
  const next = [file("a", a, "a, version 2\n"), resources[1], resources[2]];
  const changed = await w.apply(next);
  assert.equal(changed.counts.changed, 1);
  assert.ok(w.reads.includes(a));
  assert.equal(await Deno.readTextFile(a), "a, version 2\n");
  // b's mode changed by hand (its identity moves too, and the lstat shows the mode).
  await Deno.chmod(b, 0o666);
  const mode = await w.apply(next);
  assert.equal(mode.results.find((r) => r.id === "b")?.outcome, "changed");
  assert.equal((await Deno.lstat(b)).mode! & 0o777, 0o644);
  // c swapped by its owner for a link to root's file: refused as before, nothing followed.
  await asNobody('rm -- "$1" && ln -s -- "$2" "$1"', c, victim);
  const link = await w.apply(next);
  assert.equal(link.outcome, "failed");
  assert.match(link.error!, /c\.conf is a symlink/);
  assert.equal(await Deno.readTextFile(victim), "root's secret\n");
  assert.equal((await Deno.lstat(victim)).mode! & 0o777, 0o600);
});

Deno.test("read-back identity: what the identity cannot see (here a store made to vouch for other bytes) the next full read-back repairs", async () => {
  const w = await world({ fullReadBackEvery: 4 });
  await using _ = w.s;
  using _host = w.host;
  const f = `${w.s.root}/f.conf`;
  const resources = [file("f", f, "declared\n")];
  await w.apply(resources); // pass 1
  await settle([f]);
  await w.apply(resources); // pass 2: read, identity recorded
  // Other bytes of the same size, and the store told that this is what was read back: the
  // identity now vouches for bytes it never saw (as if a change had kept every field).
  await Deno.writeTextFile(f, "tampered\n");
  const now = await Deno.lstat(f);
  const db = new DatabaseSync(`${w.s.stateDir}/state.db`);
  try {
    db.prepare(
      `UPDATE held SET seen_dev = ?, seen_ino = ?, seen_size = ?, seen_mtime_ns = ?,
         seen_ctime_ns = ? WHERE key = ?`,
    ).run(
      now.dev,
      now.ino!,
      now.size,
      String(BigInt(now.mtime!.getTime()) * 1_000_000n),
      String(BigInt(now.ctime!.getTime()) * 1_000_000n),
      `path:${f}`,
    );
  } finally {
    db.close();
  }
  const trusting = await w.apply(resources); // pass 3 trusts the identity
  assert.equal(trusting.counts.unchanged, 1);
  assert.equal(w.reads.length, 0);
  assert.equal(await Deno.readTextFile(f), "tampered\n", "what an identity cannot see stays");
  const full = await w.apply(resources); // pass 4 reads every file back in full
  assert.equal(full.counts.changed, 1);
  assert.equal(await Deno.readTextFile(f), "declared\n");
});

Deno.test("read-back identity: an identity is trusted only from a look a whole change-time step (and the clock margin) after the file's change time", () => {
  const second = 1_000_000_000n;
  const at = (s: number, ms: number) => ({
    dev: 1,
    ino: 2,
    size: 3,
    mtimeNs: 0n,
    ctimeNs: BigInt(s) * second + BigInt(ms) * 1_000_000n,
  });
  // Changed at 100.200 s; Deno sees the change time to the second (100 s).
  assert.equal(trusted(at(100, 200), 100_900, second), false, "within its second");
  assert.equal(trusted(at(100, 200), 101_010, second), false, "within the clock margin");
  assert.equal(trusted(at(100, 200), 101_060, second), true);
  assert.equal(trusted(at(100, 200), 100_100, second), false, "a change time after the look");
  assert.equal(trusted(at(100, 200), 200_000, undefined), false, "no step known: never");
  // An adapter with exact change times needs only the margin.
  assert.equal(trusted(at(100, 200), 100_240, 1n), false);
  assert.equal(trusted(at(100, 200), 100_260, 1n), true);
});

Deno.test("read-back identity: the adapter's identity is Deno's lstat, with the change time to the second, as CTIME_STEP_NS says", async () => {
  await using s = await scratch();
  const fs = posixFileSystem();
  assert.equal(fs.ctimeStepNs, 1_000_000_000n);
  for (let i = 0; i < 20; i++) {
    const path = `${s.root}/f${i}`;
    await Deno.writeTextFile(path, "x".repeat(i));
    const info = await fs.lstat(path);
    const stat = new TextDecoder().decode(
      (await new Deno.Command("stat", { args: ["-c", "%d %i %s %Y %Z", path] }).output()).stdout,
    ).trim().split(" ").map(Number);
    assert.deepEqual(
      [info!.identity!.dev, info!.identity!.ino, info!.identity!.size],
      stat.slice(0, 3),
    );
    // The change time as Deno reports it: whole seconds (a finer one would only be safer).
    assert.equal(
      info!.identity!.ctimeNs % 1_000_000_000n,
      0n,
      "Deno's change time is whole seconds",
    );
    assert.equal(info!.identity!.ctimeNs / 1_000_000_000n, BigInt(stat[4]));
    assert.equal(info!.identity!.mtimeNs / 1_000_000_000n, BigInt(stat[3]));
    const read = await fs.readFile(path);
    assert.deepEqual(
      read.info.identity,
      info!.identity,
      "a read carries the identity it was taken with",
    );
    await new Promise((r) => setTimeout(r, 37));
  }
});
