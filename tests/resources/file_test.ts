/**
 * The file kind on a real file system: it never writes through or below a symlink (also
 * one swapped in just before its rename), an unknown owner is refused before anything is
 * written, and no temporary file is left beside the files it writes (also after an apply
 * cut short). Moved from tests/apply_test.ts (issue 25: tests mirror src/).
 */
import assert from "node:assert/strict";
import { openEngine } from "../../src/engine/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import type { FileSystem } from "../../src/providers.ts";
import { exists, file, hostOn, scratch } from "../_helpers.ts";
import { apply } from "./_apply.ts";

Deno.test("the host never writes through a symlink at the path", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  await Deno.writeTextFile(`${s.dir}/outside`, "secret\n");
  await Deno.symlink(`${s.dir}/outside`, `${s.root}/link`);
  const report = await apply(host, [file("f", `${s.root}/link`, "pwned\n")]);
  assert.equal(report.outcome, "failed");
  assert.match(report.error!, /file "f" failed: .*\/link is a symlink/);
  assert.equal(await Deno.readTextFile(`${s.dir}/outside`), "secret\n");
  assert.equal(host.store.managedCount(), 0);
});

Deno.test("the host never writes below a symlinked directory", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  await Deno.mkdir(`${s.dir}/elsewhere`);
  await Deno.symlink(`${s.dir}/elsewhere`, `${s.root}/etc`);
  const report = await apply(host, [file("f", `${s.root}/etc/conf`, "x")]);
  assert.equal(report.outcome, "failed");
  assert.match(report.error!, /\/etc \(above .*\/etc\/conf\) is a symlink/);
  assert.equal(await exists(`${s.dir}/elsewhere/conf`), false);
});

Deno.test("a parent swapped for a symlink just before the rename is refused at the rename (the temporary name is no longer the file written)", async () => {
  await using s = await scratch();
  const real = posixFileSystem();
  await Deno.mkdir(`${s.dir}/attacker`);
  await Deno.mkdir(`${s.root}/d`);
  // The real adapter, with the swap injected at the last moment before its rename.
  const racing: FileSystem = {
    ...real,
    writeFileAtomic: (path, data, attributes, beforeRename) =>
      real.writeFileAtomic(path, data, attributes, async () => {
        await Deno.rename(`${s.root}/d`, `${s.root}/d-moved`);
        await Deno.symlink(`${s.dir}/attacker`, `${s.root}/d`);
        await beforeRename?.();
      }),
  };
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: racing }),
  });
  const report = await apply(host, [file("f", `${s.root}/d/f`, "x")]);
  assert.equal(report.outcome, "failed");
  assert.match(
    report.error!,
    /\/d\/\.f\.nox-new \(the temporary file of .*\/d\/f\) was replaced while it was being written; nothing was renamed/,
  );
  assert.deepEqual(
    [...Deno.readDirSync(`${s.dir}/attacker`)],
    [],
    "nothing was renamed through the symlink",
  );
  assert.equal(await exists(`${s.root}/d-moved/f`), false);
});

Deno.test("an unknown owner fails with a reason a person can act on", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const report = await apply(host, [{
    ...file("f", `${s.root}/f`, "x"),
    owner: "no-such-user-here",
  }]);
  assert.equal(report.outcome, "failed");
  assert.match(report.error!, /user "no-such-user-here" does not exist on this machine/);
  assert.equal(await exists(`${s.root}/f`), false);
});

Deno.test("after an apply cut short, the next one removes temporary files left beside files in sync", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const resources = [file("a", `${s.root}/a`, "1"), file("b", `${s.root}/b`, "2")];
  assert.equal((await apply(host, resources)).outcome, "converged");
  // What a process killed while its window of writes synced leaves: temporary files of
  // files that are (still) as declared, and an apply recorded as running.
  await Deno.writeTextFile(`${s.root}/.a.nox-new`, "half");
  await Deno.writeTextFile(`${s.root}/.b.nox-new`, "");
  host.store.beginApply("file", "test", undefined, "sha256:cut-short");
  const report = await apply(host, resources);
  assert.equal(report.outcome, "converged");
  assert.equal(report.counts.unchanged, 2);
  assert.deepEqual([...Deno.readDirSync(s.root)].map((e) => e.name).sort(), ["a", "b"]);
});

Deno.test("no temporary files are left behind by writes", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  await apply(host, [file("a", `${s.root}/a`, "1"), file("b", `${s.root}/b`, "2")]);
  await apply(host, [file("a", `${s.root}/a`, "1b"), file("b", `${s.root}/b`, "2b")]);
  assert.deepEqual([...Deno.readDirSync(s.root)].map((e) => e.name).sort(), ["a", "b"]);
});
