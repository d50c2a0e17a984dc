// The Debian package (packaging/debian/recipe.ts) as Debian checks one: what it carries and
// where, its control fields, conffiles, lintian; and its apt repository as apt meets it on a
// Debian 12 lab machine: signed, it installs and the host runs on the runtime it carries;
// unsigned, signed by another key, or with a changed index or package, apt refuses it.
import assert from "node:assert/strict";
import { join } from "node:path";
import { build, type BuildResult } from "../packaging/build.ts";
import { MAN_PAGES } from "../packaging/make_package.ts";
import {
  aptRepository,
  conffilesOf,
  debFileName,
  debianUnit,
  packageDebian,
} from "../packaging/debian/recipe.ts";
import {
  APT_KEYRING,
  aptKeyring,
  ensureTestDebs,
  signedAptRepo,
  TEST_DEB,
} from "../lab/lib/apt_repo.ts";
import { VERSION } from "../src/version.ts";
import { setupPackages } from "./_setup_programs.ts";
import { run } from "./_pacman.ts";
import { CAN_RAISE, machineTest, oneMachine } from "./os/_machine.ts";

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;

let made: Promise<{ dir: string; b: BuildResult; deb: string }> | undefined;

/** One Debian package of this checkout (bundled form) for the tests below. */
function debian() {
  made ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "noxpk-deb-" });
    const b = await build({ os: "debian", form: "bundled", out: join(dir, "debian") });
    return { dir, b, deb: await packageDebian(b) };
  })();
  return made;
}

/** What `dpkg-deb -c` lists: mode, owner/group and path of each entry. */
async function contents(deb: string): Promise<{ mode: string; owner: string; path: string }[]> {
  const listing = await run("dpkg-deb", ["-c", deb]);
  return listing.trim().split("\n").map((line) => {
    const f = line.split(/\s+/);
    return { mode: f[0], owner: f[1], path: f[5].replace(/^\.\//, "").replace(/\/$/, "") };
  });
}

Deno.test("debian package: what it carries and where Debian puts it; no dependency; root's, with plain modes", async () => {
  const { b, deb } = await debian();
  assert.equal(deb.split("/").pop(), `nox-mesh-host_${VERSION}-1_amd64.deb`);
  assert.equal(debFileName(b), `nox-mesh-host_${VERSION}-1_amd64.deb`);
  const field = async (name: string) => (await run("dpkg-deb", ["-f", deb, name])).trim();
  assert.equal(await field("Package"), "nox-mesh-host");
  assert.equal(await field("Version"), `${VERSION}-1`);
  assert.equal(await field("Architecture"), "amd64");
  assert.equal(await field("Depends"), "", "no dependency: it carries its runtime and glibc");
  assert.equal(await field("Pre-Depends"), "");
  assert.equal(await field("Suggests"), "wireguard-tools, wireguard-go, nftables, podman");
  const all = await contents(deb);
  const paths = all.map((e) => e.path);
  for (
    const want of [
      "usr/bin/nox-mesh-host",
      "usr/bin/nox-mesh-host-launch",
      "usr/lib/nox-mesh-host/launch/apt.sh",
      "usr/lib/nox-mesh-host/nox-mesh-host.js",
      "usr/lib/nox-mesh-host/deno",
      "usr/lib/nox-mesh-host/deno.LICENSE",
      "usr/lib/nox-mesh-host/glibc/ld-linux-x86-64.so.2",
      "usr/lib/nox-mesh-host/glibc/libc.so.6",
      "usr/lib/nox-mesh-host/glibc/LICENSE.glibc",
      "usr/lib/nox-mesh-host/glibc/SOURCES",
      "usr/lib/systemd/system/nox-mesh-host.service",
      "usr/share/nox-mesh-host/substrate.lock",
      "usr/share/nox-mesh-host/images/pause.oci.tar",
      "usr/share/doc/nox-mesh-host/copyright",
      "usr/share/doc/nox-mesh-host/changelog.Debian.gz",
      "usr/share/lintian/overrides/nox-mesh-host",
      ...MAN_PAGES.map((p) => `usr/share/man/man${p.split(".").pop()}/${p}.gz`),
      "usr/share/bash-completion/completions/nox-mesh-host",
      "usr/share/zsh/vendor-completions/_nox-mesh-host",
      "usr/share/fish/vendor_completions.d/nox-mesh-host.fish",
      "var/lib/mesh-host",
    ]
  ) assert.ok(paths.includes(want), `${want} in the package`);
  for (const e of all) {
    assert.equal(e.owner, "root/root", `${e.path} owned by root`);
    assert.ok(!/[sStT]/.test(e.mode) && !/^.{5}w|^.{8}w/.test(e.mode), `${e.path}: ${e.mode}`);
    const executable = e.path.startsWith("usr/bin/") || e.path === "usr/lib/nox-mesh-host/deno" ||
      e.path.endsWith("/ld-linux-x86-64.so.2");
    const want = e.mode.startsWith("d")
      ? (e.path === "var/lib/mesh-host" ? "drwx------" : "drwxr-xr-x")
      : executable
      ? "-rwxr-xr-x"
      : "-rw-r--r--";
    assert.equal(e.mode, want, `${e.path} mode`);
  }
  // The unit is the Arch package's with the launcher's apt path.
  const x = join((await debian()).dir, "x");
  await run("dpkg-deb", ["-x", deb, x]);
  const unit = await Deno.readTextFile(join(x, "usr/lib/systemd/system/nox-mesh-host.service"));
  assert.equal(
    unit,
    debianUnit(await Deno.readTextFile(repo("packaging/arch/nox-mesh-host.service"))),
  );
  assert.match(unit, /^Environment=NOX_MESH_HOST_PKG=apt$/m);
  assert.match(unit, /^ExecStart=\/usr\/bin\/nox-mesh-host-launch run$/m);
  assert.equal(
    await Deno.readTextFile(join(x, "usr/lib/nox-mesh-host/launch/apt.sh")),
    await Deno.readTextFile(repo("launcher/pkg/apt.sh")),
  );
  const copyright = await Deno.readTextFile(join(x, "usr/share/doc/nox-mesh-host/copyright"));
  assert.match(
    copyright,
    /^Format: https:\/\/www\.debian\.org\/doc\/packaging-manuals\/copyright-format\/1\.0\/$/m,
  );
  assert.match(copyright, /^License: Apache-2\.0$/m);
  assert.match(copyright, /^Files: usr\/lib\/nox-mesh-host\/deno\nCopyright: .*\nLicense: Expat$/m);
  assert.match(copyright, /MIT License|Permission is hereby granted/);
  assert.throws(
    () => debianUnit("[Unit]\n"),
    /no longer holds "# Starts the launcher at boot\." and "Environment=NOX_MESH_HOST_PKG=pacman"/,
  );
});

Deno.test("debian package: every file it installs under /etc is a conffile (today there is none)", async () => {
  const { deb } = await debian();
  const paths = (await contents(deb)).filter((e) => !e.mode.startsWith("d")).map((e) => e.path);
  assert.deepEqual(paths.filter((p) => p.startsWith("etc/")), [], "host.json is the person's");
  const control = join((await debian()).dir, "control");
  await run("dpkg-deb", ["-e", deb, control]);
  assert.ok(
    !(await Deno.lstat(join(control, "conffiles")).then(() => true, () => false)),
    "no conffiles file for no /etc file",
  );
  assert.deepEqual(conffilesOf(["usr/bin/x", "etc/mesh-host/example.json"]), [
    "/etc/mesh-host/example.json",
  ]);
  // md5sums lists every file, as dpkg --verify reads it.
  const sums = await Deno.readTextFile(join(control, "md5sums"));
  assert.equal(sums.trim().split("\n").length, paths.length);
});

const LINTIAN = setupPackages(await Deno.readTextFile(repo("lab/setup.sh"))).includes("lintian");

Deno.test({
  name: LINTIAN
    ? "debian package: lintian reports nothing but what its overrides say, and why"
    : "debian package: lintian (skipped: lintian is not in lab/setup.sh's list, so no machine here is sure to have it)",
  ignore: !LINTIAN,
  async fn() {
    const { deb } = await debian();
    const out = await new Deno.Command("lintian", {
      args: ["--fail-on", "error,warning", "--tag-display-limit", "0", deb],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, said);
    assert.doesNotMatch(said, /^[EW]: /m, said);
  },
});

Deno.test(
  {
    name: machineTest(
      "debian package: apt installs it from the signed repository on Debian 12, and refuses the repository unsigned, signed by another key, or changed",
    ),
    ignore: !CAN_RAISE,
  },
  async (t) => {
    const { dir, deb } = await debian();
    await using m = await oneMachine("plain");
    const share = m.lab.shareDir;
    const sh = async (script: string) => await m.machine.exec(["sh", "-c", script]);
    const hello = await ensureTestDebs();
    await m.machine.copyIn(await aptKeyring(), APT_KEYRING);
    await m.machine.exec(["sh", "-c", "rm -f /etc/apt/sources.list.d/*"], { check: true });
    /** apt-get update and install of `what` from the repository at /lab/NAME. */
    const attempt = async (name: string, what: string) => {
      await m.machine.writeFile(
        "/etc/apt/sources.list",
        `deb [signed-by=${APT_KEYRING}] copy:/lab/${name} stable main\n`,
      );
      await sh("rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb");
      const update = await sh("apt-get -q update 2>&1");
      const install = await sh(`DEBIAN_FRONTEND=noninteractive apt-get -q -y install ${what} 2>&1`);
      return { update, install };
    };
    const notInstalled = async (name: string) => {
      const q = await sh(`dpkg-query -W -f '\${db:Status-Status}' ${name}`);
      assert.notEqual(q.stdout, "installed", `${name} must not be installed`);
    };

    await t.step("signed with the key the machine trusts: installed; the host runs", async () => {
      await signedAptRepo(join(share, "signed"), [deb, ...hello]);
      const r = await attempt("signed", "nox-mesh-host");
      assert.equal(r.install.code, 0, r.update.stdout + r.install.stdout);
      const v = await m.machine.exec(["nox-mesh-host", "version", "--json"]);
      assert.equal(v.code, 0, v.stderr);
      assert.match(v.stdout, new RegExp(`"version":"${VERSION}","form":"bundled"`));
      // apt kept the file it installed in its cache: what the launcher keeps for a rollback.
      const cached = await sh(`sha256sum /var/cache/apt/archives/${deb.split("/").pop()}`);
      assert.equal(cached.code, 0, cached.stderr);
    });

    await t.step("unsigned: apt refuses it; nothing installed", async () => {
      await aptRepository(join(share, "unsigned"), hello);
      const r = await attempt("unsigned", TEST_DEB.name);
      assert.notEqual(r.update.code, 0, r.update.stdout);
      assert.match(
        r.update.stdout,
        /The repository 'copy:\/lab\/unsigned stable Release' is not signed/,
      );
      assert.notEqual(r.install.code, 0);
      await notInstalled(TEST_DEB.name);
    });

    await t.step(
      "signed by a key the machine does not trust: refused; nothing installed",
      async () => {
        const home = join(dir, "other-gnupg");
        await Deno.mkdir(home, { mode: 0o700, recursive: true });
        await run("gpg", [
          "--batch",
          "--homedir",
          home,
          "--passphrase",
          "",
          "--quick-gen-key",
          "other <other@nox-mesh-host.invalid>",
          "ed25519",
          "sign",
          "never",
        ]);
        const fpr = (await run("gpg", ["--homedir", home, "--with-colons", "--list-secret-keys"]))
          .split("\n").find((l) => l.startsWith("fpr:"))!.split(":")[9];
        try {
          await aptRepository(join(share, "otherkey"), hello, { gnupgHome: home, key: fpr });
        } finally {
          await run("gpgconf", ["--homedir", home, "--kill", "all"]);
        }
        const r = await attempt("otherkey", TEST_DEB.name);
        assert.notEqual(r.update.code, 0, r.update.stdout);
        assert.match(r.update.stdout, /NO_PUBKEY|not signed/);
        await notInstalled(TEST_DEB.name);
      },
    );

    await t.step("an index changed after it was signed: refused; nothing installed", async () => {
      await signedAptRepo(join(share, "index"), hello);
      // A mirror drops the newer version from the index; the signed Release no longer matches.
      const packages = join(share, "index/dists/stable/main/binary-amd64/Packages");
      const text = await Deno.readTextFile(packages);
      await Deno.writeTextFile(packages, text.split("\n\n").slice(0, 1).join("\n\n") + "\n");
      await run("sh", ["-c", 'gzip -9n -c "$1" > "$1.gz"', "gzip", packages]);
      const r = await attempt("index", TEST_DEB.name);
      assert.notEqual(r.update.code, 0, r.update.stdout);
      assert.match(r.update.stdout, /Hash Sum mismatch|File has unexpected size/);
      await notInstalled(TEST_DEB.name);
    });

    await t.step("a package changed after it was indexed: refused; nothing installed", async () => {
      await signedAptRepo(join(share, "package"), hello);
      const file = join(
        share,
        "package/pool/main/n",
        TEST_DEB.name,
        `${TEST_DEB.name}_${TEST_DEB.latest}_all.deb`,
      );
      const changed = (await Deno.readFile(file)).slice();
      changed[changed.length - 1] ^= 0xff;
      await Deno.writeFile(file, changed);
      const r = await attempt("package", TEST_DEB.name);
      assert.equal(r.update.code, 0, r.update.stdout);
      assert.notEqual(r.install.code, 0, r.install.stdout);
      assert.match(r.install.stdout, /Hash Sum mismatch|File has unexpected size/);
      await notInstalled(TEST_DEB.name);
    });
  },
);

Deno.test("debian package: (the shared build's directory is removed)", async () => {
  if (made) await Deno.remove((await made).dir, { recursive: true });
});
