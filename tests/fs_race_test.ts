/**
 * The file system boundary as an attacker meets it (DESIGN.md §18): a local user
 * who owns a directory holding a managed file (a home directory with
 * authorized_keys) swaps names for symlinks or FIFOs while the host works there,
 * the directories above the file included. The swaps are made by the unprivileged
 * user `nobody` (setpriv): at the exact moment an attacker would aim for (the
 * adapter's test hooks `afterCreate` and `beforeAct`, or a wrapper around the real
 * adapter between the kind's look and its act), and by a real process of nobody's
 * swapping two names with renameat2(RENAME_EXCHANGE) as fast as it can while the
 * host applies, creates and removes thousands of times (tests/fixtures/
 * flip_names.ts). Container mount sources, which the runtime resolves by name,
 * are tested with a real podman.
 */
import assert from "node:assert/strict";
import { flipping, NOBODY } from "./_flipper.ts";
import { applyText, openEngine, planText } from "../src/engine/mod.ts";
import { type FsAct, posixFileSystem, type PosixFileSystemOptions } from "../os/posix-fs/mod.ts";
import type { FileSystem } from "../src/providers.ts";
import { exists, modeOf, runHost, type Scratch, scratch } from "./_helpers.ts";
import { privatePodman, SERVE } from "./os/_podman.ts";

/** Run a shell snippet as nobody:nogroup, synchronously (hooks are synchronous). */
function asNobody(script: string, ...args: string[]): void {
  const out = new Deno.Command("setpriv", {
    args: [
      `--reuid=${NOBODY}`,
      `--regid=${NOBODY}`,
      "--clear-groups",
      "sh",
      "-eu",
      "-c",
      script,
      "sh",
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
}

/** As nobody: move `name` aside and put a symlink to `target` in its place. */
function swapForSymlink(name: string, target: string): void {
  asNobody('mv -- "$1" "$1.moved" && ln -s -- "$2" "$1"', name, target);
}

/** As nobody: move `name` aside and put a FIFO in its place. */
function swapForFifo(name: string): void {
  asNobody('mv -- "$1" "$1.moved" && mkfifo -- "$1"', name);
}

/**
 * A scratch machine with a home directory owned by nobody inside the managed
 * root, and root-owned 0600/0700 victims outside every managed root.
 */
async function world() {
  const s = await scratch();
  // Traversable, as / and /home are, so nobody reaches its own directory.
  await Deno.chmod(s.dir, 0o755);
  await Deno.chmod(s.root, 0o755);
  const home = `${s.root}/home`;
  await Deno.mkdir(home);
  await Deno.chown(home, NOBODY, NOBODY);
  const victim = `${s.dir}/victim`;
  await Deno.writeTextFile(victim, "root's secret\n", { mode: 0o600 });
  await Deno.chmod(victim, 0o600);
  const victimDir = `${s.dir}/victim-dir`;
  await Deno.mkdir(victimDir, { mode: 0o700 });
  await Deno.chmod(victimDir, 0o700);
  return { s, home, victim, victimDir };
}

/** The victim is exactly as it was: root's, same mode, same content. */
async function assertUntouched(path: string, mode: number, content?: string): Promise<void> {
  const info = await Deno.lstat(path);
  assert.equal(info.uid, 0, `${path} changed owner`);
  assert.equal(info.gid, 0, `${path} changed group`);
  assert.equal(info.mode! & 0o7777, mode, `${path} changed mode`);
  if (content !== undefined) assert.equal(await Deno.readTextFile(path), content);
}

async function hostWith(s: Scratch, fs: FileSystem) {
  return await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs }),
  });
}

const text = (resources: unknown[]) => JSON.stringify({ version: 1, resources });
const apply = (host: Awaited<ReturnType<typeof hostWith>>, resources: unknown[]) =>
  applyText(host, text(resources), { source: "file", origin: "test" });

const owned = { owner: "nobody", group: "nogroup" };

/** The adapter with its test hook: `swap` runs once, for the first created name it accepts. */
function hooked(accept: (path: string) => boolean, swap: (path: string) => void) {
  const seen = { swaps: 0 };
  const options: PosixFileSystemOptions = {
    afterCreate(path) {
      if (seen.swaps === 0 && accept(path)) {
        seen.swaps++;
        swap(path);
      }
    },
  };
  return { fs: posixFileSystem(options), seen };
}

Deno.test("a file's temporary name swapped for a symlink before owner and mode are set changes nothing outside", async () => {
  const { s, home, victim } = await world();
  await using _ = s;
  const keys = `${home}/authorized_keys`;
  const { fs, seen } = hooked((p) => p.startsWith(`${home}/`), (p) => swapForSymlink(p, victim));
  using host = await hostWith(s, fs);
  const resource = {
    type: "file",
    id: "keys",
    path: keys,
    content: "ssh-ed25519 AAAA user\n",
    mode: "0644",
    ...owned,
  };
  const report = await apply(host, [resource]);
  assert.equal(seen.swaps, 1, "the swap happened");
  await assertUntouched(victim, 0o600, "root's secret\n");
  if (report.outcome === "converged") {
    assert.equal((await Deno.lstat(keys)).isFile, true);
  } else {
    assert.equal(report.outcome, "failed");
    assert.match(
      report.error!,
      /authorized_keys\.nox-new .*was replaced while it was being written/,
    );
    assert.equal((await Deno.lstat(keys).catch(() => null))?.isSymlink ?? false, false);
  }
  // Once nobody stops, the next apply writes the real file (the planted name is no obstacle).
  const again = await apply(host, [resource]);
  assert.equal(again.outcome, "converged", again.error);
  const info = await Deno.lstat(keys);
  assert.ok(info.isFile);
  assert.equal(info.uid, NOBODY);
  assert.equal(info.mode! & 0o7777, 0o644);
  await assertUntouched(victim, 0o600, "root's secret\n");
});

Deno.test("a new directory swapped for a symlink before owner and mode are set changes nothing outside", async () => {
  const { s, home, victimDir } = await world();
  await using _ = s;
  const ssh = `${home}/.ssh`;
  const { fs, seen } = hooked((p) => p === ssh, (p) => swapForSymlink(p, victimDir));
  using host = await hostWith(s, fs);
  const report = await apply(host, [
    { type: "directory", id: "ssh", path: ssh, mode: "0755", ...owned },
  ]);
  assert.equal(seen.swaps, 1, "the swap happened");
  await assertUntouched(victimDir, 0o700);
  assert.equal(report.outcome, "failed");
  assert.match(
    report.error!,
    /\/home\/\.ssh is no longer the directory the host just made: it is a symlink/,
  );
});

Deno.test("an existing directory swapped for a symlink before its drifted mode is repaired changes nothing outside", async () => {
  const { s, home, victimDir } = await world();
  await using _ = s;
  const ssh = `${home}/.ssh`;
  const real = posixFileSystem();
  let swaps = 0;
  // The real adapter, with the swap between the kind's last look and its act.
  const racing: FileSystem = {
    ...real,
    setAttributes(path, attributes) {
      if (path === ssh) {
        swaps++;
        swapForSymlink(path, victimDir);
      }
      return real.setAttributes(path, attributes);
    },
  };
  using host = await hostWith(s, racing);
  const resources = [{ type: "directory", id: "ssh", path: ssh, mode: "0700", ...owned }];
  assert.equal((await apply(host, resources)).outcome, "converged");
  asNobody('chmod 0755 -- "$1"', ssh); // the user's own drift
  const report = await apply(host, resources);
  assert.equal(swaps, 1, "the swap happened");
  await assertUntouched(victimDir, 0o700);
  assert.equal(report.outcome, "failed");
  assert.match(report.error!, /\/home\/\.ssh is not a directory: it is a symlink/);
});

/**
 * Start a process that opens `fifo` for writing after a while, so a host that
 * blocks on it (as main did) is released and the test fails instead of hanging.
 */
function releaseLater(fifo: string): Deno.ChildProcess {
  return new Deno.Command("sh", {
    args: ["-c", 'sleep 30 && : > "$1"', "sh", fifo],
    stdout: "null",
    stderr: "null",
  }).spawn();
}

async function stop(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGKILL");
  } catch { /* already exited */ }
  await child.status;
}

Deno.test("a FIFO at a managed file's path fails plan and apply fast, naming the path, also when it appears after the look", async () => {
  const { s, home } = await world();
  await using _ = s;
  const keys = `${home}/authorized_keys`;
  const resource = {
    type: "file",
    id: "keys",
    path: keys,
    content: "ssh-ed25519 AAAA user\n",
    mode: "0644",
    ...owned,
  };
  // Old content of the same size, so the check has to read to compare.
  const SAME_SIZE = "ssh-ed25519 BBBB user\n";
  // Already there: refused by the look.
  asNobody('mkfifo -- "$1"', keys);
  {
    using host = await hostWith(s, posixFileSystem());
    const plan = await planText(host, text([resource]), { source: "file", origin: "test" });
    assert.match(plan[0].detail!, /authorized_keys is a special file, not a file/);
    const report = await apply(host, [resource]);
    assert.equal(report.outcome, "failed");
    assert.match(report.error!, /authorized_keys is a special file/);
  }
  await Deno.remove(keys);
  await Deno.writeTextFile(keys, SAME_SIZE);

  // Swapped in right before the kind reads (the check opens without looking first; a
  // regular file was there until then).
  const real = posixFileSystem();
  let swaps = 0;
  const racing: FileSystem = {
    ...real,
    async readFile(path, size) {
      if (path === keys && (await real.lstat(path))?.kind === "file") {
        swaps++;
        await Deno.remove(`${keys}.moved`).catch(() => {});
        swapForFifo(keys);
      }
      return await real.readFile(path, size);
    },
  };
  const release = releaseLater(keys);
  try {
    using host = await hostWith(s, racing);
    const plan = await planText(host, text([resource]), { source: "file", origin: "test" });
    assert.equal(swaps, 1, "the swap happened");
    assert.equal(plan[0].status, "unknown");
    assert.match(plan[0].detail!, /authorized_keys is a special file, not a file/);
    // The FIFO is refused by the look now; put a file back for the apply's race.
    await Deno.remove(keys);
    await Deno.writeTextFile(keys, SAME_SIZE);
    const report = await apply(host, [resource]);
    assert.equal(swaps, 2, "the swap happened again");
    assert.equal(report.outcome, "failed");
    assert.match(report.error!, /authorized_keys is a special file, not a file/);
  } finally {
    await stop(release);
  }
});

Deno.test("a FIFO at a managed directory's path fails fast, also when swapped in before the directory is synced", async () => {
  const { s, home } = await world();
  await using _ = s;
  const dir = `${home}/app`;
  const resources = [
    { type: "directory", id: "app", path: dir, mode: "0755", ...owned },
    { type: "file", id: "conf", path: `${dir}/conf`, content: "x\n", mode: "0644", ...owned },
  ];
  asNobody('mkfifo -- "$1"', dir);
  {
    using host = await hostWith(s, posixFileSystem());
    const plan = await planText(host, text(resources), { source: "file", origin: "test" });
    assert.match(plan[0].detail!, /\/home\/app is a special file, not a directory/);
    const report = await apply(host, resources);
    assert.equal(report.outcome, "failed");
    assert.match(report.error!, /\/home\/app is a special file, not a directory/);
  }
  await Deno.remove(dir);

  // The directory replaced by a FIFO once its file is written, before the host syncs it
  // (and before the file is recorded: its name is not durable yet).
  const release = releaseLater(dir);
  try {
    const real = posixFileSystem();
    using host = await hostWith(s, {
      ...real,
      writeFileAtomic: async (path, data, attributes, beforeRename) => {
        await real.writeFileAtomic(path, data, attributes, beforeRename);
        swapForFifo(dir);
      },
    });
    const report = await applyText(host, text(resources), { source: "file", origin: "test" });
    assert.equal(report.outcome, "failed");
    assert.deepEqual(report.results.map((r) => [r.id, r.outcome]), [
      ["app", "changed"],
      ["conf", "failed"],
    ]);
    assert.match(
      report.error!,
      /syncing .*\/home\/app to disk failed: .*\/home\/app is not a directory: it is a special file/,
    );
    assert.equal(await exists(`${dir}.moved/conf`), true, "the file was written before the swap");
  } finally {
    await stop(release);
  }
});

Deno.test("owner and mode set on a descriptor stay under the permission set: a readable, unwritable directory is refused", async () => {
  // /var/tmp: readable under the development flags (`deno task host`), not writable.
  const root = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "nox-fsfd-" });
  try {
    await using s = await scratch({ managedRoots: [root] });
    await Deno.mkdir(`${root}/d`, { mode: 0o700 });
    await Deno.chmod(`${root}/d`, 0o700);
    const decl = await s.declaration([
      { type: "directory", id: "d", path: `${root}/d`, mode: "0755", owner: "root", group: "root" },
    ]);
    const run = await runHost(["apply", "--json", decl], { env: s.env });
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stdout, /Requires write access to \\"[^"]*\/d\\"/);
    assert.equal(
      await modeOf(`${root}/d`),
      "0700",
      "the mode was not changed through a read descriptor",
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

// ---------------------------------------------------------------------------------------------
// Real races: a process of nobody's swaps two names as fast as it can while the host applies
// again and again. No hook: whatever the host does by name, it does while the names move.

/** Apply `resources` again and again for `seconds` (at most `max` times), or until `changed()`. */
async function applyWhileFlipping(
  host: Awaited<ReturnType<typeof hostWith>>,
  resources: unknown[],
  { seconds, max, changed }: { seconds: number; max: number; changed: () => Promise<boolean> },
): Promise<{ applies: number; converged: number; hit: boolean }> {
  const until = performance.now() + seconds * 1000;
  let applies = 0;
  let converged = 0;
  while (applies < max && performance.now() < until) {
    const report = await apply(host, resources);
    applies++;
    if (report.outcome === "converged") converged++;
    if (await changed()) return { applies, converged, hit: true };
  }
  return { applies, converged, hit: false };
}

/** The attribute of a path that an attack would change: owner, group and mode, and content. */
async function fingerprint(path: string): Promise<string> {
  const info = await Deno.lstat(path);
  const content = info.isFile ? await Deno.readTextFile(path) : "";
  return `${info.uid}:${info.gid}:${(info.mode! & 0o7777).toString(8)}:${content}`;
}

Deno.test("race, real processes: nobody flips ~/.local with a link to a stand-in for /usr/local while the host applies ~/.local/bin as nobody's; the stand-in is never touched", async () => {
  const { s, home } = await world();
  await using _ = s;
  // nobody's own ~/.local/bin, and the link nobody swaps in for ~/.local.
  asNobody(
    'mkdir -p -- "$1/.local/bin" && chmod 0755 -- "$1/.local/bin" && ln -s -- "$2" "$1/.local-swap"',
    home,
    `${s.dir}/usr-local`,
  );
  // A root-owned stand-in for /usr/local/bin, outside every managed root.
  const standIn = `${s.dir}/usr-local/bin`;
  await Deno.mkdir(standIn, { recursive: true });
  await Deno.chmod(`${s.dir}/usr-local`, 0o755);
  await Deno.chmod(standIn, 0o755);
  const before = await fingerprint(standIn);
  const resources = [
    { type: "directory", id: "bin", path: `${home}/.local/bin`, mode: "0755", ...owned },
  ];
  using host = await hostWith(s, posixFileSystem());
  assert.equal((await apply(host, resources)).outcome, "converged");
  let result;
  {
    await using flipper = await flipping(s.dir, `${home}/.local`, `${home}/.local-swap`, 60);
    result = await applyWhileFlipping(host, resources, {
      seconds: 15,
      max: 10_000,
      changed: async () => (await fingerprint(standIn)) !== before,
    });
    const flips = await flipper.flips();
    assert.ok(flips > 1000, `the flipper ran (${flips} swaps)`);
  }
  console.log(`    ${result.applies} applies while flipping, ${result.converged} converged`);
  assert.equal(result.hit, false, `the stand-in changed after ${result.applies} applies`);
  assert.equal(await fingerprint(standIn), before);
  assert.ok(result.applies >= 500, `enough applies ran (${result.applies})`);
  // The names may be left swapped: put them back, and the host manages the real one.
  if ((await Deno.lstat(`${home}/.local`)).isSymlink) {
    asNobody(
      'mv -- "$1/.local" "$1/.tmp" && mv -- "$1/.local-swap" "$1/.local" && mv -- "$1/.tmp" "$1/.local-swap"',
      home,
    );
  }
  assert.equal((await apply(host, resources)).outcome, "converged");
});

Deno.test("race, real processes: nobody flips ~/.ssh with a link to a root-only directory while the host writes ~/.ssh/authorized_keys as root's; the root-only file is never replaced", async () => {
  const { s, home } = await world();
  await using _ = s;
  asNobody(
    'mkdir -m 0700 -- "$1/.ssh" && ln -s -- "$2" "$1/.ssh-swap"',
    home,
    `${s.dir}/root-ssh`,
  );
  // Root's own authorized_keys, outside every managed root.
  const victim = `${s.dir}/root-ssh/authorized_keys`;
  await Deno.mkdir(`${s.dir}/root-ssh`, { mode: 0o700 });
  await Deno.writeTextFile(victim, "ssh-ed25519 ROOT root@host\n", { mode: 0o600 });
  await Deno.chmod(victim, 0o600);
  const before = await fingerprint(victim);
  const resources = [{
    type: "file",
    id: "keys",
    path: `${home}/.ssh/authorized_keys`,
    content: "ssh-ed25519 USER nobody@host\n",
    mode: "0644",
    owner: "root",
    group: "root",
  }];
  using host = await hostWith(s, posixFileSystem());
  assert.equal((await apply(host, resources)).outcome, "converged");
  let result;
  {
    await using flipper = await flipping(s.dir, `${home}/.ssh`, `${home}/.ssh-swap`, 60);
    result = await applyWhileFlipping(host, resources, {
      seconds: 15,
      max: 8000,
      changed: async () =>
        (await fingerprint(victim)) !== before ||
        [...Deno.readDirSync(`${s.dir}/root-ssh`)].length !== 1,
    });
    const flips = await flipper.flips();
    assert.ok(flips > 1000, `the flipper ran (${flips} swaps)`);
  }
  console.log(`    ${result.applies} applies while flipping, ${result.converged} converged`);
  const seen = [...Deno.readDirSync(`${s.dir}/root-ssh`)].map((e) => e.name).sort();
  assert.equal(
    result.hit,
    false,
    `root's directory changed after ${result.applies} applies: ${seen.join(", ")}; ` +
      `authorized_keys is ${await fingerprint(victim)}`,
  );
  assert.equal(await fingerprint(victim), before);
  assert.deepEqual([...Deno.readDirSync(`${s.dir}/root-ssh`)].map((e) => e.name), [
    "authorized_keys",
  ]);
  assert.ok(result.applies >= 300, `enough applies ran (${result.applies})`);
  if ((await Deno.lstat(`${home}/.ssh`)).isSymlink) {
    asNobody(
      'mv -- "$1/.ssh" "$1/.tmp" && mv -- "$1/.ssh-swap" "$1/.ssh" && mv -- "$1/.tmp" "$1/.ssh-swap"',
      home,
    );
  }
  assert.equal((await apply(host, resources)).outcome, "converged");
  assert.equal(
    await Deno.readTextFile(`${home}/.ssh/authorized_keys`),
    "ssh-ed25519 USER nobody@host\n",
  );
});

Deno.test("race, real processes: nobody flips ~/.cache with a link to a root-only directory while the host creates and releases a directory and a file there; nothing of root's is removed or changed", async () => {
  const { s, home } = await world();
  await using _ = s;
  const victimDir = `${s.dir}/root-cache`;
  asNobody('mkdir -- "$1/.cache" && ln -s -- "$2" "$1/.cache-swap"', home, victimDir);
  // Root's look-alikes of what the host creates and releases: an empty directory, a file.
  await Deno.mkdir(`${victimDir}/app`, { recursive: true, mode: 0o700 });
  await Deno.chmod(victimDir, 0o700);
  await Deno.chmod(`${victimDir}/app`, 0o700);
  await Deno.writeTextFile(`${victimDir}/app.conf`, "root's\n", { mode: 0o600 });
  await Deno.chmod(`${victimDir}/app.conf`, 0o600);
  const victims = async () =>
    `${await fingerprint(`${victimDir}/app`)} ${await fingerprint(`${victimDir}/app.conf`)} ${
      [...Deno.readDirSync(victimDir)].map((e) => e.name).sort()
    }`;
  const before = await victims();
  const declared = [
    { type: "directory", id: "app", path: `${home}/.cache/app`, mode: "0755", ...owned },
    {
      type: "file",
      id: "conf",
      path: `${home}/.cache/app.conf`,
      content: "nobody's\n",
      mode: "0644",
      ...owned,
    },
  ];
  using host = await hostWith(s, posixFileSystem());
  let releases = 0;
  let hit = false;
  let cycles = 0;
  {
    await using flipper = await flipping(s.dir, `${home}/.cache`, `${home}/.cache-swap`, 60);
    const until = performance.now() + 15_000;
    // Declared, then dropped: every cycle the host creates them and removes them again.
    while (cycles < 2000 && performance.now() < until && !hit) {
      cycles++;
      await apply(host, declared);
      const dropped = await apply(host, []);
      releases += dropped.results.filter((r) => r.outcome === "removed").length;
      hit = (await victims().catch((e) => `gone: ${e}`)) !== before;
    }
    const flips = await flipper.flips();
    assert.ok(flips > 1000, `the flipper ran (${flips} swaps)`);
  }
  console.log(`    ${cycles} create/release cycles while flipping, ${releases} removals`);
  assert.equal(
    hit,
    false,
    `root's directory changed after ${cycles} cycles: ${await victims().catch((e) => e)}`,
  );
  assert.ok(releases >= 10, `the host did remove things meanwhile (${releases})`);
});

// ---------------------------------------------------------------------------------------------
// Each act, one at a time: the adapter's hook runs inside the directory it holds, right before
// it acts; nobody then moves the directory above away and puts a link to root's look-alike in
// its place. What the host does lands in the directory it held (now moved), or nowhere.

/**
 * A home with nobody's ~/.cfg holding app/ (0700) and app.conf ("nobody's"), and root's
 * look-alike `victim` (app/ 0700 holding a file, app.conf "root's", 0600) outside every root.
 */
async function cfgWorld() {
  const w = await world();
  const cfg = `${w.home}/.cfg`;
  asNobody(
    'mkdir -m 0755 -- "$1" && mkdir -m 0700 -- "$1/app" && printf "nobody\'s\\n" > "$1/app.conf"',
    cfg,
  );
  const victim = `${w.s.dir}/root-cfg`;
  await Deno.mkdir(`${victim}/app`, { recursive: true, mode: 0o700 });
  await Deno.chmod(`${victim}/app`, 0o700);
  await Deno.writeTextFile(`${victim}/app/keep`, "");
  await Deno.writeTextFile(`${victim}/app.conf`, "root's\n", { mode: 0o600 });
  await Deno.chmod(`${victim}/app.conf`, 0o600);
  const snapshot = async () =>
    [
      await fingerprint(`${victim}/app`),
      await fingerprint(`${victim}/app.conf`),
      [...Deno.readDirSync(victim)].map((e) => e.name).sort().join(","),
      [...Deno.readDirSync(`${victim}/app`)].map((e) => e.name).sort().join(","),
    ].join(" ");
  return { ...w, cfg, victim, moved: `${cfg}.moved`, before: await snapshot(), snapshot };
}

/** The adapter whose hook swaps ~/.cfg for a link to `victim` at the first `act` on `path`. */
function swapAt(act: FsAct, path: string, cfg: string, victim: string) {
  const seen = { swaps: 0 };
  const fs = posixFileSystem({
    beforeAct(a, p) {
      if (seen.swaps === 0 && a === act && p === path) {
        seen.swaps++;
        swapForSymlink(cfg, victim);
      }
    },
  });
  return { fs, seen };
}

const conf = (cfg: string, content: string) => ({
  type: "file",
  id: "conf",
  path: `${cfg}/app.conf`,
  content,
  mode: "0644",
  ...owned,
});
const appDir = (cfg: string, mode = "0700") => ({
  type: "directory",
  id: "app",
  path: `${cfg}/app`,
  mode,
  ...owned,
});

Deno.test("each act in a held directory: a read and an lstat see what is in the directory held, not what a link put in its place", async () => {
  for (
    const [act, resource, expect] of [
      ["read", (cfg: string) => conf(cfg, "nobody's\n"), "in-sync"],
      ["lstat", (cfg: string) => appDir(cfg), "in-sync"],
    ] as const
  ) {
    const w = await cfgWorld();
    await using _ = w.s;
    const r = resource(w.cfg);
    const { fs, seen } = swapAt(act, r.path, w.cfg, w.victim);
    using host = await hostWith(w.s, fs);
    const plan = await planText(host, text([r]), { source: "file", origin: "test" });
    assert.equal(seen.swaps, 1, `${act}: the swap happened`);
    // root's look-alike differs (content, owner): had the host looked there, it would say so.
    assert.equal(plan[0].status, expect, `${act}: ${JSON.stringify(plan[0])}`);
    assert.equal(await w.snapshot(), w.before, `${act}: root's look-alike is untouched`);
  }
});

Deno.test("each act in a held directory: create, rename, mkdir, chown, remove and sync act in the directory held, never in what a link put in its place", async () => {
  const cases: {
    act: FsAct;
    at: (cfg: string) => string;
    first?: (cfg: string) => unknown[];
    then: (cfg: string) => unknown[];
    /** What the held directory (moved away by then) holds afterwards. */
    after: (moved: string) => Promise<void>;
  }[] = [
    {
      act: "create",
      at: (cfg) => `${cfg}/app.conf`,
      then: (cfg) => [conf(cfg, "declared\n")],
      // Created in the held directory; the rename, there again, finds the link and refuses.
      after: async (moved) =>
        assert.equal(await Deno.readTextFile(`${moved}/.app.conf.nox-new`), "declared\n"),
    },
    {
      act: "rename",
      at: (cfg) => `${cfg}/app.conf`,
      then: (cfg) => [conf(cfg, "declared\n")],
      after: async (moved) =>
        assert.equal(await Deno.readTextFile(`${moved}/app.conf`), "declared\n"),
    },
    {
      act: "mkdir",
      at: (cfg) => `${cfg}/new`,
      then: (cfg) => [{ ...appDir(cfg), id: "new", path: `${cfg}/new`, mode: "0750" }],
      after: async (moved) => {
        const info = await Deno.lstat(`${moved}/new`);
        assert.deepEqual([info.uid, info.mode! & 0o7777], [NOBODY, 0o750]);
      },
    },
    {
      act: "chown",
      at: (cfg) => `${cfg}/app`,
      then: (cfg) => [appDir(cfg, "0755")],
      after: async (moved) =>
        assert.equal((await Deno.lstat(`${moved}/app`)).mode! & 0o7777, 0o755),
    },
    {
      act: "remove",
      at: (cfg) => `${cfg}/made`,
      first: (cfg) => [{ ...appDir(cfg), id: "made", path: `${cfg}/made` }],
      then: () => [],
      after: async (moved) => assert.equal(await exists(`${moved}/made`), false),
    },
    {
      act: "remove",
      at: (cfg) => `${cfg}/made.conf`,
      first: (cfg) => [{ ...conf(cfg, "x\n"), id: "made", path: `${cfg}/made.conf` }],
      then: () => [],
      after: async (moved) => assert.equal(await exists(`${moved}/made.conf`), false),
    },
    {
      act: "sync",
      at: (cfg) => cfg,
      then: (cfg) => [conf(cfg, "declared\n")],
      after: async (moved) =>
        assert.equal(await Deno.readTextFile(`${moved}/app.conf`), "declared\n"),
    },
  ];
  for (const c of cases) {
    const w = await cfgWorld();
    await using _ = w.s;
    const path = c.at(w.cfg);
    const { fs, seen } = swapAt(c.act, path, w.cfg, w.victim);
    using host = await hostWith(w.s, fs);
    if (c.first) {
      const made = await apply(host, c.first(w.cfg));
      assert.equal(made.outcome, "converged", `${c.act} ${path}: ${made.error}`);
    }
    const report = await apply(host, c.then(w.cfg));
    assert.equal(seen.swaps, 1, `${c.act} ${path}: the swap happened`);
    assert.equal(await w.snapshot(), w.before, `${c.act} ${path}: root's look-alike is untouched`);
    await c.after(w.moved);
    // After the swap the path leads through a link: whatever came next was refused.
    if (report.outcome !== "converged") assert.match(report.error!, /is a symlink/);
  }
});

Deno.test("between verbs the process stands where it started, or in the state directory where the permission set does not let it go back (a service in /), never in a user's directory", async () => {
  const { s, home } = await world();
  await using _ = s;
  asNobody('mkdir -- "$1/.ssh"', home);
  const state = `${s.dir}/state-dir`;
  await Deno.mkdir(state);
  const script = `${s.dir}/write.ts`;
  const adapter = new URL("../os/posix-fs/mod.ts", import.meta.url).href;
  await Deno.writeTextFile(
    script,
    `import { posixFileSystem } from ${JSON.stringify(adapter)};
const fs = posixFileSystem({ home: ${JSON.stringify(state)} });
await fs.writeFileAtomic(${JSON.stringify(`${home}/.ssh/keys`)}, new TextEncoder().encode("k\\n"),
  { mode: 0o644, uid: 0, gid: 0 });
console.log(Deno.cwd());
`,
  );
  // Started in /, which the set does not let it read (as a service is).
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-config",
      `--allow-read=${s.dir}`,
      `--allow-write=${s.root}`,
      script,
    ],
    cwd: "/",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  assert.equal(out.code, 0, decode(out.stderr));
  assert.equal(decode(out.stdout).trim(), state);
  assert.equal(await Deno.readTextFile(`${home}/.ssh/keys`), "k\n");
  // In this process (started where it may go back to), every verb came back.
  const here = Deno.cwd();
  using host = await hostWith(s, posixFileSystem());
  const report = await apply(host, [
    { type: "file", id: "k", path: `${home}/.ssh/other`, content: "x\n", mode: "0644", ...owned },
  ]);
  assert.equal(report.outcome, "converged", report.error);
  assert.equal(Deno.cwd(), here);
});

// ---------------------------------------------------------------------------------------------
// Container mount sources: the runtime resolves a source by name at create and at every start,
// so the host cannot hold it for the runtime; a source someone but root could swap is refused.

Deno.test("container mounts (podman): a source in a directory a user owns is refused, naming it; swapped for a link to root's directory it is never mounted; a source only root can replace is mounted", async () => {
  await using p = await privatePodman();
  const { s, home } = await world();
  await using _ = s;
  const victim = `${s.dir}/root-data`;
  await Deno.mkdir(victim, { mode: 0o700 });
  await Deno.chmod(victim, 0o700);
  await Deno.writeTextFile(`${victim}/secret`, "root's secret\n", { mode: 0o600 });
  asNobody('mkdir -- "$1/data" && printf "nobody\'s\\n" > "$1/data/file"', home);
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: posixFileSystem(), containers: p.runtime }),
  });
  const box = (name: string, source: string) => ({
    type: "container",
    id: name,
    name,
    image: p.image,
    args: SERVE,
    env: {},
    mounts: [{ source, target: "/data", readOnly: true }],
    restart: "no",
  });
  // The attack: nobody puts a link to root's directory where the source is.
  swapForSymlink(`${home}/data`, victim);
  const swapped = await apply(host, [box("noxfr-swapped", `${home}/data`)]);
  const seen = await p.podman("exec", "noxfr-swapped", "cat", "/data/secret").catch(() => "");
  assert.equal(seen, "", "root's directory was mounted into the container");
  assert.equal(swapped.outcome, "failed");
  assert.match(
    swapped.error!,
    /mount source .*\/home\/data is refused: .*\/home belongs to uid 65534/,
  );
  assert.equal(await p.runtime.inspect("noxfr-swapped"), null);
  // The same source as a real directory: still refused, since nobody could swap it later
  // (the runtime resolves it again at every start); the message names whose directory it is.
  asNobody('rm -- "$1/data" && mv -- "$1/data.moved" "$1/data"', home);
  const theirs = await apply(host, [box("noxfr-owned", `${home}/data`)]);
  assert.equal(theirs.outcome, "failed");
  assert.match(
    theirs.error!,
    /the mount source .*\/home\/data is refused: .*\/home belongs to uid 65534, so a local user could put a symlink \(to \/\) at .*\/home\/data/,
  );
  const plan = await planText(host, text([box("noxfr-owned", `${home}/data`)]), {
    source: "file",
    origin: "test",
  });
  assert.match(plan[0].detail!, /\/home belongs to uid 65534/);
  assert.equal(await p.runtime.inspect("noxfr-owned"), null);
  // Where only root can replace each step (the source itself may be nobody's), it is mounted.
  await Deno.mkdir(`${s.root}/srv`, { mode: 0o755 });
  await Deno.chmod(`${s.root}/srv`, 0o755);
  await Deno.mkdir(`${s.root}/srv/data`);
  await Deno.chown(`${s.root}/srv/data`, NOBODY, NOBODY);
  await Deno.writeTextFile(`${s.root}/srv/data/file`, "served\n");
  const good = await apply(host, [box("noxfr-good", `${s.root}/srv/data`)]);
  assert.equal(good.outcome, "converged", good.error);
  assert.equal(await p.podman("exec", "noxfr-good", "cat", "/data/file"), "served");
  // A source still missing: where only root could make it, a directory declared before the
  // container makes it (plan says create); where nobody could make it first, refused.
  const made = { type: "directory", id: "made", path: `${s.root}/srv/made`, mode: "0755" };
  const planned = await planText(
    host,
    text([{ ...made, ...owned }, box("noxfr-made", `${s.root}/srv/made`)]),
    { source: "file", origin: "test" },
  );
  assert.deepEqual(
    planned.slice(0, 2).map((e) => e.status),
    ["create", "create"],
    planned[1].detail,
  );
  const missing = await apply(host, [box("noxfr-missing", `${home}/later`)]);
  assert.match(missing.error!, /\/home belongs to uid 65534, so a local user could put a symlink/);
});
