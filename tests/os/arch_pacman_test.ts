import assert from "node:assert/strict";
import { archPacman, parsePacmanQuery } from "../../os/arch-pacman/mod.ts";
import { PackageNotFoundError } from "../../src/providers.ts";
import { pacmanRoot, TEST_PACKAGE } from "./_pacman_root.ts";

const NAME = TEST_PACKAGE.name;
const [OLD, NEW] = TEST_PACKAGE.versions;

Deno.test("pacman: installed() is null for a package that is not installed", async () => {
  await using r = await pacmanRoot();
  assert.equal(await r.pacman.installed(NAME), null);
});

Deno.test("pacman: install with a stale sync database says not found and why; only the full upgrade refreshes it", async () => {
  await using r = await pacmanRoot();
  const error = await r.pacman.install(NAME).then(() => null, (e) => e);
  assert.ok(error instanceof PackageNotFoundError);
  assert.match(
    error.message,
    /never refreshes it alone, since pacman -Sy then -S is a partial upgrade/,
  );
  assert.match(error.hint ?? "", /"upgrade": "full"/);
  assert.equal("refresh" in r.pacman, false, "pacman offers no refresh alone");
  await r.pacman.upgradeAll();
  assert.match(await Deno.readTextFile(`${r.root}/var/log/pacman.log`), /Running '.* -Syu /);
  await r.pacman.install(NAME);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: NEW });
  const script = await Deno.readTextFile(`${r.root}/usr/bin/${NAME}`);
  assert.match(script, new RegExp(`${NAME} ${NEW}`));
});

Deno.test("pacman: an exact version the repository offers is installed from it", async () => {
  await using r = await pacmanRoot();
  await r.pacman.upgradeAll();
  await r.pacman.install(NAME, NEW);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: NEW });
});

Deno.test("pacman: an exact version only a package file has is installed from the file (downgrade, then upgrade)", async () => {
  await using r = await pacmanRoot();
  await r.pacman.upgradeAll();
  await r.pacman.install(NAME);
  await r.pacman.install(NAME, OLD);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: OLD });
  assert.match(await Deno.readTextFile(`${r.root}/usr/bin/${NAME}`), new RegExp(OLD));
  await r.pacman.install(NAME, NEW);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: NEW });
});

Deno.test("pacman: a version nobody offers is PackageNotFoundError naming where it looked", async () => {
  await using r = await pacmanRoot();
  await r.pacman.upgradeAll();
  const error = await r.pacman.install(NAME, "9.9-9").then(() => null, (e) => e);
  assert.ok(error instanceof PackageNotFoundError);
  assert.match(error.message, /no configured repository offers noxlab-hello=9\.9-9/);
  assert.ok(error.message.includes(r.repo));
});

Deno.test("pacman: installFile installs exactly that file", async () => {
  await using r = await pacmanRoot();
  await r.pacman.installFile(`${r.repo}/${NAME}-${OLD}-any.pkg.tar.gz`);
  assert.deepEqual(await r.pacman.installed(NAME), { name: NAME, version: OLD });
});

Deno.test("pacman: argv carries every configured location, never a removal", async () => {
  await using r = await pacmanRoot();
  const argv = r.pacman.argv("-Q");
  for (const flag of ["--config", "--root", "--dbpath", "--cachedir", "--logfile", "--gpgdir"]) {
    assert.ok(argv.includes(flag), flag);
  }
  const source = await Deno.readTextFile(new URL("../../os/arch-pacman/mod.ts", import.meta.url));
  assert.doesNotMatch(source, /"-R/);
});

Deno.test("parsePacmanQuery reads 'name version' and ignores other names", () => {
  assert.deepEqual(parsePacmanQuery("bash 5.2.026-2\n", "bash"), {
    name: "bash",
    version: "5.2.026-2",
  });
  assert.deepEqual(parsePacmanQuery("foo 1:2.0-1\n", "foo"), { name: "foo", version: "1:2.0-1" });
  assert.equal(parsePacmanQuery("bash-completion 2.11-3\n", "bash"), null);
});

Deno.test("pacman: the upstream version drops pkgrel (the launcher records versions so)", () => {
  const pacman = archPacman({});
  assert.equal(pacman.upstreamVersion("0.2.0-1"), "0.2.0");
  assert.equal(pacman.upstreamVersion("1:2.0.1-12"), "1:2.0.1");
  assert.equal(pacman.upstreamVersion("0.2.0-1.1"), "0.2.0");
  assert.equal(pacman.upstreamVersion("0.2.0-r1"), "0.2.0-r1", "apk's form is not pacman's");
});
