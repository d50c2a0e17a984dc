import assert from "node:assert/strict";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { parseDeclaration } from "../../src/engine/parse.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { pacmanRoot, TEST_PACKAGE } from "../os/_pacman_root.ts";

const NAME = TEST_PACKAGE.name;
const [OLD, NEW] = TEST_PACKAGE.versions;
const pkg = (version?: string) => ({
  type: "package",
  id: "hello",
  name: NAME,
  ...(version ? { version } : {}),
});

/** The lines pacman logged for the commands it ran ("Running '…'"). */
async function pacmanRuns(root: string): Promise<string[]> {
  const log = await Deno.readTextFile(`${root}/var/log/pacman.log`).catch(() => "");
  return log.split("\n").filter((l) => l.includes("Running '"));
}

Deno.test("package: not in a stale sync database fails naming the cause; pacman's database is never refreshed alone", async () => {
  await using r = await pacmanRoot();
  await using engine = await testEngine({ fs: posixFileSystem(), packages: r.pacman });
  const report = await engine.apply([pkg()]);
  assert.equal(report.outcome, "failed");
  assert.match(report.error ?? "", /no configured repository offers noxlab-hello/);
  assert.match(report.error ?? "", /partial upgrade/);
  assert.match(report.error ?? "", /"upgrade": "full"/);
  assert.equal(await r.pacman.installed(NAME), null);
  assert.deepEqual(
    (await pacmanRuns(r.root)).filter((l) => / -S[a-z]*y/.test(l)),
    [],
    "no -Sy of any kind ran",
  );
  assert.equal(engine.store.managed().length, 0);
});

Deno.test('package: "upgrade": "full" upgrades the whole machine (pacman -Syu) before installing', async () => {
  await using r = await pacmanRoot();
  // An older build is installed; the repository offers a newer one the stale database does not know.
  await r.pacman.installFile(`${r.repo}/${NAME}-${OLD}-any.pkg.tar.gz`);
  await using engine = await testEngine({ fs: posixFileSystem(), packages: r.pacman });
  const report = await engine.apply([{ ...pkg(NEW), upgrade: "full" }]);
  assert.equal(report.outcome, "converged", report.error);
  assert.deepEqual(report.results[0].changes, [`version ${OLD} → ${NEW}`]);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: NEW });
  const runs = await pacmanRuns(r.root);
  assert.ok(runs.some((l) => / -Syu /.test(l)), runs.join("\n"));
  assert.deepEqual(runs.filter((l) => / -Sy /.test(l)), [], "never -Sy alone");
});

Deno.test("package: installed, read back, then unchanged", async () => {
  await using r = await pacmanRoot();
  await r.pacman.upgradeAll(); // a machine whose sync database is current
  await using engine = await testEngine({ fs: posixFileSystem(), packages: r.pacman });
  const first = await engine.apply([pkg()]);
  assert.equal(first.outcome, "converged", first.error);
  assert.deepEqual(outcomes(first), ["hello:changed"]);
  assert.deepEqual(first.results[0].changes, ["install"]);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: NEW });
  const again = await engine.apply([pkg()]);
  assert.deepEqual(outcomes(again), ["hello:unchanged"]);
});

Deno.test("package: an exact version is installed (downgrade from a package file), then held", async () => {
  await using r = await pacmanRoot();
  await r.pacman.upgradeAll();
  await using engine = await testEngine({ fs: posixFileSystem(), packages: r.pacman });
  await engine.apply([pkg()]);
  const pinned = await engine.apply([pkg(OLD)]);
  assert.equal(pinned.outcome, "converged", pinned.error);
  assert.deepEqual(pinned.results[0].changes, [`version ${NEW} → ${OLD}`]);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: OLD });
  assert.deepEqual(outcomes(await engine.apply([pkg(OLD)])), ["hello:unchanged"]);
  const upgraded = await engine.apply([pkg(NEW)]);
  assert.deepEqual(upgraded.results[0].changes, [`version ${OLD} → ${NEW}`]);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: NEW });
});

Deno.test("package: no longer declared is forgotten, never uninstalled", async () => {
  await using r = await pacmanRoot();
  await r.pacman.upgradeAll();
  await using engine = await testEngine({ fs: posixFileSystem(), packages: r.pacman });
  await engine.apply([pkg()]);
  const dropped = await engine.apply([]);
  assert.equal(dropped.outcome, "converged");
  assert.deepEqual(outcomes(dropped), ["hello:forgotten"]);
  assert.match(dropped.results[0].detail ?? "", /never uninstalled/);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: NEW });
  assert.equal(engine.store.managed().length, 0);
});

Deno.test("package: a version nobody offers fails the apply and records nothing", async () => {
  await using r = await pacmanRoot();
  await using engine = await testEngine({ fs: posixFileSystem(), packages: r.pacman });
  const report = await engine.apply([pkg("9.9-9")]);
  assert.equal(report.outcome, "failed");
  assert.match(report.error ?? "", /no configured repository offers noxlab-hello=9\.9-9/);
  assert.equal(engine.store.managed().length, 0);
});

Deno.test("package: without a package manager the apply fails with NoProviderError's sentence", async () => {
  await using engine = await testEngine({ fs: posixFileSystem() });
  const report = await engine.apply([pkg()]);
  assert.equal(report.outcome, "failed");
  assert.match(report.results[0].detail ?? "", /no provider on this machine for package resources/);
});

Deno.test("package: the host's own package may be declared with a version (fleet upgrade path)", async () => {
  const text = JSON.stringify({
    version: 1,
    resources: [{ type: "package", id: "host", name: "nox-mesh-host", version: "0.2.0-1" }],
  });
  const decl = await parseDeclaration(text, {
    managedRoots: ["/etc"],
    own: { paths: ["/usr/bin/nox-mesh-host"], services: ["nox-mesh-host"] },
  });
  assert.equal(decl.resources[0].type, "package");
});

Deno.test("package: the host's own package at a version the launcher rolled back from is refused, with why", async () => {
  await using r = await pacmanRoot();
  await using engine = await testEngine(
    { fs: posixFileSystem(), packages: r.pacman },
    { rolledBackFrom: new Set(["0.2.0"]) },
  );
  const own = (version: string) => ({
    type: "package",
    id: "host",
    name: "nox-mesh-host",
    version,
  });
  // pacman's release suffix is -N; the upstream version is what the launcher records.
  for (const version of ["0.2.0", "0.2.0-1"]) {
    const report = await engine.apply([own(version)]);
    assert.equal(report.outcome, "failed");
    assert.match(
      report.error ?? "",
      new RegExp(
        `nox-mesh-host ${version} failed to start on this machine and the launcher rolled it back`,
      ),
    );
  }
  // apk's -rN is not pacman's form: to pacman "0.2.0-r1" is another version.
  const apkForm = await engine.apply([own("0.2.0-r1")]);
  assert.doesNotMatch(apkForm.error ?? "", /rolled it back/);
  // Another version is not refused for that reason (here nothing offers it, so pacman says so).
  const other = await engine.apply([own("0.2.1-1")]);
  assert.doesNotMatch(other.error ?? "", /rolled it back/);
  assert.match(other.error ?? "", /no configured repository offers nox-mesh-host=0\.2\.1-1/);
  // Another package at that version is not the host: not refused for it either.
  const hello = await engine.apply([pkg("0.2.0")]);
  assert.doesNotMatch(hello.error ?? "", /rolled it back/);
});
