/**
 * Crash consistency (R4): SIGKILL the host at random moments during applies of
 * a large declaration, many times. After every kill the store opens, nothing
 * it records as held is missing from disk or torn, nothing on disk is forgotten, every
 * identity the store keeps for a file that still has it vouches for exactly the held
 * bytes (an apply reads no such file: issue 28), and the next apply converges. One version
 * writes its files in windows that fsync each file, the other in one window whose waves are
 * synced by one sync of the file system between their writes and their renames.
 * NOX_CRASH_KILLS raises the number of kills (40) for a longer run.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { Store } from "../src/store/store.ts";
import type { Resource } from "../src/resources/mod.ts";
import type { FileResource } from "../src/resources/file.ts";
import { type FileIdentity, sameIdentity } from "../src/providers.ts";
import { hostPermissionFlags, scratch } from "./_helpers.ts";

const KILLS = Number(Deno.env.get("NOX_CRASH_KILLS") ?? 40);
const REPO = new URL("..", import.meta.url).pathname;

/**
 * A declaration of `dirs` directories with `files` files each; `tag` varies the content.
 * `together`: every directory first, then every file, so the files are one window whose waves
 * the engine syncs with one sync of the file system each (128 changes or more); else each
 * directory is followed by its files, windows of `files` that fsync each file.
 */
function declaration(
  root: string,
  dirs: number[],
  files: number,
  tag: string,
  together = false,
): Resource[] {
  const resources: Resource[] = [];
  const made: Resource[] = [];
  for (const d of dirs) {
    (together ? made : resources).push({
      type: "directory",
      id: `d${d}`,
      path: `${root}/d${d}`,
      mode: "0755",
      owner: "root",
      group: "root",
    });
    for (let f = 0; f < files; f++) {
      resources.push({
        type: "file",
        id: `d${d}-f${f}`,
        path: `${root}/d${d}/f${f}`,
        content: `${tag} ${d}/${f}\n`.repeat(1 + (f % 7)),
        mode: f % 2 ? "0600" : "0644",
        owner: "root",
        group: "root",
      });
    }
  }
  return [...made, ...resources];
}

async function startApply(path: string, env: Record<string, string>): Promise<Deno.ChildProcess> {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      ...(await hostPermissionFlags()),
      posix.join(REPO, "mod.ts"),
      "apply",
      "--quiet",
      path,
    ],
    env,
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

/**
 * Every held resource is on disk, whole: its content is exactly what one of the
 * declarations says (a killed round may have written a newer version than the
 * store records, never a torn one). And everything on disk under the root
 * (which only the host writes to here) is known to the store as held or as a
 * half-done create/removal.
 */
function assertManagedIsOnDisk(
  root: string,
  stateDir: string,
  written: Map<string, Set<string>>,
  round: number,
) {
  using store = Store.open(stateDir);
  const index = store.managedIndex();
  const known = new Set([...index.keys(), ...store.intents().map((i) => i.key)]);
  for (const path of listTree(root)) {
    const key = `path:${path.replace(/\/\.([^/]+)\.nox-new$/, "/$1")}`;
    if (!known.has(key)) {
      const history = store.applies(100).reverse().map((a) =>
        `#${a.id} ${a.outcome} ${a.origin.replace(/.*\//, "")}: ` +
        store.results(a.id).filter((r) => r.key === key || r.key.startsWith(`${key}/`))
          .map((r) => `${r.key.replace(/.*\//, "")}=${r.outcome}${r.detail ? `(${r.detail})` : ""}`)
          .join(" ")
      );
      const inside = Deno.statSync(path).isDirectory
        ? [...Deno.readDirSync(path)].map((e) => e.name).join(" ")
        : "";
      assert.fail(
        `round ${round}: ${path} is on disk but the store has forgotten it (leaked)\n${
          history.join("\n")
        }\ninside: ${inside}`,
      );
    }
  }
  for (const held of store.managed()) {
    const spec = held.spec as Resource & { path: string };
    let info: Deno.FileInfo;
    try {
      info = Deno.lstatSync(spec.path);
    } catch {
      assert.fail(`round ${round}: the store holds ${held.key}, which is not on disk`);
    }
    if (spec.type === "directory") {
      assert.ok(info.isDirectory, `round ${round}: ${spec.path} is held as a directory`);
      continue;
    }
    assert.ok(info.isFile, `round ${round}: ${spec.path} is held as a file`);
    const content = Deno.readTextFileSync(spec.path);
    assert.ok(
      written.get(held.key)?.has(content),
      `round ${round}: ${spec.path} holds content no declaration gave it (a torn write?)`,
    );
    // An identity the store keeps vouches that the file is as held: if the file still has
    // it (the next apply would not read it), its bytes are exactly the held declaration's.
    const seen = index.get(held.key)?.identity;
    if (seen === undefined) continue;
    identities.recorded++;
    if (sameIdentity(seen, identityOf(info))) {
      identities.vouching++;
      assert.equal(
        content,
        (spec as FileResource).content,
        `round ${round}: the store's identity of ${spec.path} vouches for bytes it does not hold`,
      );
    }
  }
}

/** How often the store kept an identity, and one that still matched the file, after a kill. */
const identities = { recorded: 0, vouching: 0 };

/** A file's identity as the posix-fs adapter takes it (Deno's lstat). */
function identityOf(info: Deno.FileInfo): FileIdentity {
  return {
    dev: info.dev,
    ino: info.ino!,
    size: info.size,
    mtimeNs: BigInt(info.mtime!.getTime()) * 1_000_000n,
    ctimeNs: BigInt(info.ctime!.getTime()) * 1_000_000n,
  };
}

function listTree(dir: string): string[] {
  const out: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const path = `${dir}/${entry.name}`;
    out.push(path);
    if (entry.isDirectory) out.push(...listTree(path));
  }
  return out;
}

Deno.test({
  name:
    `SIGKILL at ${KILLS} random moments never leaves an inconsistent store; the next apply converges`,
  async fn() {
    await using s = await scratch();
    const versions = [
      declaration(s.root, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 30, "a"),
      declaration(s.root, [0, 1, 2, 3, 4, 10, 11, 12, 13, 14], 30, "b", true),
      [],
    ];
    const paths = await Promise.all(versions.map((v) => s.declaration(v)));
    // Every content each path is ever declared with, across the versions.
    const written = new Map<string, Set<string>>();
    for (const r of versions.flat()) {
      if (r.type !== "file") continue;
      const key = `path:${r.path}`;
      written.set(key, (written.get(key) ?? new Set()).add(r.content!));
    }

    // How long one full apply takes here, so kills land across its whole length.
    const t0 = performance.now();
    const full = await (await startApply(paths[0], s.env)).output();
    assert.equal(full.code, 0, new TextDecoder().decode(full.stderr));
    const span = performance.now() - t0;

    for (let round = 0; round < KILLS; round++) {
      const pick = round % 5 === 4 ? 2 : Math.floor(Math.random() * 2);
      const child = await startApply(paths[pick], s.env);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * span * 1.1));
      try {
        child.kill("SIGKILL");
      } catch { /* it had already finished */ }
      await child.status;
      await child.stderr.cancel();
      assertManagedIsOnDisk(s.root, s.stateDir, written, round);
    }

    // Identities for certain: once every file's change time is a second old, an apply
    // records them; one more kill lands in an apply that trusts them.
    const converged = await (await startApply(paths[1], s.env)).output();
    assert.equal(converged.code, 0, new TextDecoder().decode(converged.stderr));
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const recorded = await (await startApply(paths[1], s.env)).output();
    assert.equal(recorded.code, 0, new TextDecoder().decode(recorded.stderr));
    const child = await startApply(paths[1], s.env);
    await new Promise((resolve) => setTimeout(resolve, Math.random() * span * 0.5));
    try {
      child.kill("SIGKILL");
    } catch { /* it had already finished */ }
    await child.status;
    await child.stderr.cancel();
    assertManagedIsOnDisk(s.root, s.stateDir, written, KILLS);
    assert.ok(identities.vouching > 0, `no identity was kept: ${JSON.stringify(identities)}`);

    // Converge on the second version, then check the machine and the store agree exactly.
    const last = await (await startApply(paths[1], s.env)).output();
    assert.equal(last.code, 0, new TextDecoder().decode(last.stderr));
    const again = await (await startApply(paths[1], s.env)).output();
    assert.equal(again.code, 0);
    using store = Store.open(s.stateDir);
    assert.equal(store.lastApply()?.counts.changed, 0, "a converged machine needs no change");
    assert.equal(store.intents().length, 0, "no half-done create or removal is left");
    const declared = versions[1].map((r) => (r as FileResource).path).sort();
    assert.deepEqual(
      listTree(s.root).sort(),
      declared,
      "exactly the declared paths exist: nothing leaked, no temp files",
    );
    for (const r of versions[1]) {
      if (r.type === "file") assert.equal(Deno.readTextFileSync(r.path), r.content);
    }
  },
});
