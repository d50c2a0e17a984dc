/**
 * The file system boundary as an attacker meets it (DESIGN.md §18): a local user
 * who owns a directory holding a managed file (a home directory with
 * authorized_keys) swaps names for symlinks or FIFOs while the host works there.
 * The swaps are made by the unprivileged user `nobody` (setpriv), at the exact
 * moment an attacker would aim for: the adapter's test hook `afterCreate` (right
 * after it created a temporary file or a directory, before owner and mode are
 * set), or a wrapper around the real adapter (between the kind's look and its act).
 */
import assert from "node:assert/strict";
import { applyText, openEngine, planText } from "../src/engine/mod.ts";
import { posixFileSystem, type PosixFileSystemOptions } from "../os/posix-fs/mod.ts";
import type { FileSystem } from "../src/providers.ts";
import { exists, modeOf, runHost, type Scratch, scratch } from "./_helpers.ts";

const NOBODY = 65534;

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
