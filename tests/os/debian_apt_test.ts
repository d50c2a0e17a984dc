/**
 * The apt provider against the real apt and dpkg of a lab machine (Debian 12, as mmdebstrap
 * makes it): its only source the lab's repository, signed with the lab key and trusted for
 * that repository alone. What counts as installed, exact versions and downgrades, held
 * packages, and the states dpkg leaves half done, each reported as such.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  debianApt,
  DpkgStateError,
  HeldPackageError,
  parseDpkgStatus,
} from "../../os/debian-apt/mod.ts";
import { PackageNotFoundError } from "../../src/providers.ts";
import {
  APT_KEYRING,
  aptKeyring,
  buildDeb,
  ensureTestDebs,
  signedAptRepo,
  TEST_DEB,
} from "../../lab/lib/apt_repo.ts";
import { CAN_RAISE, machineTest, oneMachine } from "./_machine.ts";

const NAME = TEST_DEB.name;
const [OLD, NEW] = TEST_DEB.versions;

Deno.test("apt: dpkg-query's line of a package, the installed architecture's first", () => {
  const line = (arch: string, status: string, version: string, want = "install") =>
    `${NAME}:${arch}\t${want}\t${status}\tok\t${version}`;
  assert.deepEqual(parseDpkgStatus(`${line("amd64", "installed", "1.1-1")}\n`, NAME), {
    name: NAME,
    want: "install",
    status: "installed",
    error: "ok",
    version: "1.1-1",
  });
  const two = [line("i386", "config-files", "1.0-1"), line("amd64", "installed", "1.1-1")];
  assert.equal(parseDpkgStatus(two.join("\n"), NAME)?.version, "1.1-1");
  assert.equal(parseDpkgStatus(`other\tinstall\tinstalled\tok\t1\n`, NAME), null);
  assert.equal(debianApt().upstreamVersion("1:2.3.4-5ubuntu1"), "2.3.4");
  assert.equal(debianApt().upstreamVersion("0.1.0-1"), "0.1.0");
  assert.equal(debianApt().upstreamVersion("0.1.0"), "0.1.0");
});

Deno.test("apt: never removes a package, never asks (its argv, its environment)", async () => {
  const source = await Deno.readTextFile(new URL("../../os/debian-apt/mod.ts", import.meta.url));
  for (const word of ['"remove"', '"purge"', '"autoremove"', '"full-upgrade"', '"dist-upgrade"']) {
    assert.ok(!source.includes(word), word);
  }
  const argv = debianApt({ config: ["Dir::Etc::SourceList=/x"] }).aptArgv("install");
  assert.deepEqual(argv, ["apt-get", "-o", "Dir::Etc::SourceList=/x", "install"]);
});

Deno.test(
  { name: machineTest("apt: the real apt and dpkg in a lab machine"), ignore: !CAN_RAISE },
  async (t) => {
    await using m = await oneMachine("plain");
    const work = await Deno.makeTempDir({ prefix: "noxad-apt-" });
    try {
      const run = async (argv: string[], code = 0) => {
        const r = await m.machine.exec(argv);
        assert.equal(r.code, code, `${argv.join(" ")}: ${r.stdout}${r.stderr}`);
        return r.stdout;
      };
      // The lab repository: noxlab-hello 1.0-1 and 1.1-1, and two packages whose maintainer
      // scripts fail while a file says so (dpkg then leaves them half done).
      const debs = [
        ...await ensureTestDebs(),
        await buildDeb(work, {
          name: "noxlab-broken",
          version: "1.0-1",
          scripts: { postinst: 'if [ -e /etc/noxlab-fail ]; then echo "failing" >&2; exit 1; fi' },
        }),
        await buildDeb(work, {
          name: "noxlab-half",
          version: "1.0-1",
          scripts: {
            preinst: "if [ -e /etc/noxlab-fail ]; then exit 1; fi",
            postrm: "if [ -e /etc/noxlab-fail ]; then exit 1; fi",
          },
        }),
      ];
      await signedAptRepo(join(m.lab.shareDir, "apt"), debs);
      await m.machine.copyIn(await aptKeyring(), APT_KEYRING);
      await m.machine.writeFile(
        "/etc/apt/sources.list",
        `deb [signed-by=${APT_KEYRING}] file:/lab/apt stable main\n`,
      );
      await run(["sh", "-c", "rm -f /etc/apt/sources.list.d/*"]);
      const apt = debianApt({ via: m.via, root: `/proc/${m.machine.leader}/root` });
      const script = () => run(["sh", "-c", `${NAME} 2>&1 || true`]);

      await t.step(
        "not installed: null; with stale indexes, not found until refreshed",
        async () => {
          assert.equal(await apt.installed(NAME), null);
          assert.equal(await apt.status(NAME), null, "dpkg knows no such package");
          const error = await apt.install(NAME).then(() => null, (e) => e);
          assert.ok(error instanceof PackageNotFoundError, String(error));
          assert.match(error.message, /apt: no configured repository offers noxlab-hello/);
          assert.match(error.message, /Unable to locate package noxlab-hello|as far as apt's/);
          await apt.refresh!();
          await apt.install(NAME);
          assert.deepEqual(await apt.installed(NAME), { name: NAME, version: NEW });
          assert.equal(await script(), `${NAME} ${NEW}\n`);
        },
      );

      await t.step("an exact version: a downgrade is allowed for it (and only then)", async () => {
        await apt.install(NAME, OLD);
        assert.deepEqual(await apt.installed(NAME), { name: NAME, version: OLD });
        assert.equal(await script(), `${NAME} ${OLD}\n`);
        const log = await run(["cat", "/var/log/dpkg.log"]);
        assert.match(log, new RegExp(`upgrade ${NAME}:all ${NEW} ${OLD}`), "dpkg downgraded it");
      });

      await t.step("a held package is not changed, and the refusal says so", async () => {
        await run(["apt-mark", "hold", NAME]);
        const error = await apt.install(NAME, NEW).then(() => null, (e) => e);
        assert.ok(error instanceof HeldPackageError, String(error));
        assert.match(error.message, /noxlab-hello is held \(apt-mark hold\) at 1\.0-1/);
        assert.match(error.hint ?? "", /apt-mark unhold noxlab-hello/);
        assert.deepEqual(await apt.installed(NAME), { name: NAME, version: OLD }, "still held");
        await run(["apt-mark", "unhold", NAME]);
      });

      await t.step("upgradeAll refreshes and upgrades what is installed", async () => {
        await apt.upgradeAll();
        assert.deepEqual(await apt.installed(NAME), { name: NAME, version: NEW });
      });

      await t.step(
        "a version no repository offers: from a package file in apt's cache",
        async () => {
          const error = await apt.install(NAME, "0.9-1").then(() => null, (e) => e);
          assert.ok(error instanceof PackageNotFoundError, String(error));
          assert.match(
            error.message,
            /offers noxlab-hello=0\.9-1, and no package file of it is in \/var\/cache\/apt\/archives/,
          );
          const file = await buildDeb(work, { name: NAME, version: "0.9-1" });
          await m.machine.copyIn(file, `/var/cache/apt/archives/${NAME}_0.9-1_all.deb`);
          await apt.install(NAME, "0.9-1");
          assert.deepEqual(await apt.installed(NAME), { name: NAME, version: "0.9-1" });
        },
      );

      await t.step(
        "half-configured (its postinst failed): reported as such, not installed",
        async () => {
          await run(["touch", "/etc/noxlab-fail"]);
          await assert.rejects(apt.install("noxlab-broken"), /exited 100/);
          const error = await apt.installed("noxlab-broken").then(() => null, (e) => e);
          assert.ok(error instanceof DpkgStateError, String(error));
          assert.match(error.message, /noxlab-broken 1\.0-1 is half-configured: its configuration/);
          assert.match(error.hint ?? "", /dpkg --configure noxlab-broken/);
          // What the hint says, once the cause is gone, finishes it.
          await run(["rm", "/etc/noxlab-fail"]);
          await run(["dpkg", "--configure", "noxlab-broken"]);
          assert.deepEqual(await apt.installed("noxlab-broken"), {
            name: "noxlab-broken",
            version: "1.0-1",
          });
        },
      );

      await t.step(
        "half-installed (its preinst and its undo failed): reported as such",
        async () => {
          await run(["touch", "/etc/noxlab-fail"]);
          await assert.rejects(apt.install("noxlab-half"), /exited 100/);
          const error = await apt.installed("noxlab-half").then(() => null, (e) => e);
          assert.ok(error instanceof DpkgStateError, String(error));
          assert.match(
            error.message,
            /noxlab-half 1\.0-1 is half-installed \(reinstallation required\): its installation/,
          );
          assert.match(error.hint ?? "", /apt-get install --reinstall noxlab-half/);
          await run(["rm", "/etc/noxlab-fail"]);
          await run(["apt-get", "install", "-q", "-y", "--reinstall", "noxlab-half"]);
          assert.equal((await apt.installed("noxlab-half"))?.version, "1.0-1");
        },
      );

      await t.step("unpacked, never configured: reported as such", async () => {
        await run(["dpkg", "--unpack", `/var/cache/apt/archives/${NAME}_0.9-1_all.deb`]);
        const error = await apt.installed(NAME).then(() => null, (e) => e);
        assert.ok(error instanceof DpkgStateError, String(error));
        assert.match(error.message, /noxlab-hello 0\.9-1 is unpacked: its files are unpacked/);
        await run(["dpkg", "--configure", NAME]);
        assert.equal((await apt.installed(NAME))?.version, "0.9-1");
      });
    } finally {
      await Deno.remove(work, { recursive: true });
    }
  },
);
