// The packages: the Arch package built with makepkg and installed and upgraded
// by a real pacman, the tarball unpacked as users will, and the APKBUILD linted
// (Alpine's apk and abuild are not available on this machine).
import assert from "node:assert/strict";
import { join } from "node:path";
import { build } from "../packaging/build.ts";
import { packageArch, packageTarball, stageAlpine } from "../packaging/make_package.ts";
import { VERSION } from "../src/version.ts";
import { runtimePins } from "../packaging/tarball/runtime.ts";
import { hideDeno, makeSandbox, place, removeSandbox, runInSandbox } from "./_sandbox.ts";
import { run } from "./_pacman.ts";

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;

async function tempDir(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-pkg-" });
  await Deno.chmod(dir, 0o755); // makepkg runs as nobody
  return dir;
}

Deno.test("arch: the PKGBUILD is shellcheck clean, carries the host's version, and .SRCINFO is current", async () => {
  await run("shellcheck", [repo("packaging/arch/PKGBUILD")]);
  const pkgbuild = await Deno.readTextFile(repo("packaging/arch/PKGBUILD"));
  assert.match(pkgbuild, new RegExp(`^pkgver=${VERSION.replaceAll(".", "\\.")}$`, "m"));
  assert.match(
    pkgbuild,
    /^options=\('!strip' '!debug'\)$/m,
    "stripping destroys a compiled Deno program",
  );
  const dir = await tempDir();
  try {
    await Deno.copyFile(repo("packaging/arch/PKGBUILD"), join(dir, "PKGBUILD"));
    await run("chown", ["-R", "nobody:nogroup", dir]);
    const srcinfo = await run("setpriv", [
      "--reuid=nobody",
      "--regid=nogroup",
      "--clear-groups",
      "--",
      "sh",
      "-c",
      `cd '${dir}' && HOME='${dir}' makepkg --printsrcinfo`,
    ]);
    assert.equal(
      srcinfo,
      await Deno.readTextFile(repo("packaging/arch/.SRCINFO")),
      "regenerate .SRCINFO",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("arch: makepkg builds the package into a local repo; pacman installs it with no deno on the machine, the host runs on the runtime it carries, -S of a newer build from the repo upgrades it", async () => {
  const dir = await tempDir();
  const s = await makeSandbox();
  try {
    const b = await build({ os: "arch", form: "bundled", out: join(dir, "arch") });
    assert.equal(b.runtime, (await runtimePins()).version);
    const first = await packageArch(b, 1);
    const second = await packageArch(b, 2);
    const repoDir = join(b.dir, "repo");
    await place(
      s,
      "/etc/noxpk-pacman.conf",
      `[options]\nArchitecture = auto\nSigLevel = Never\n[nox-mesh-host]\nServer = file://${repoDir}\n`,
    );
    // No deno on this "machine": whiteouts hide the system's (wherever npm put it, and the
    // npm package it points into), and pacman is told of none: the package needs none.
    await hideDeno(s);
    // Real paths, real pacman, inside the sandbox's overlays.
    const pacman = "pacman --config /etc/noxpk-pacman.conf --noconfirm";
    const script = `set -eu
      mkdir -p /var/lib/pacman
      if command -v deno >&2; then echo "a deno is on PATH" >&2; exit 1; fi
      ${pacman} -U '${first}' >&2
      pacman -Q nox-mesh-host
      /usr/bin/nox-mesh-host version
      pacman -Qi nox-mesh-host | grep '^Depends On'
      pacman -Qi nox-mesh-host | grep '^Architecture'
      /usr/bin/nox-mesh-host version --json | grep -o '"deno":"[^"]*"'
      /usr/lib/nox-mesh-host/deno --version | head -1
      cmp /usr/lib/nox-mesh-host/deno '${join(b.dir, "deno")}'
      cmp /usr/share/licenses/nox-mesh-host/deno.LICENSE /usr/lib/nox-mesh-host/deno.LICENSE
      grep -q 'MIT License' /usr/lib/nox-mesh-host/deno.LICENSE
      test -x /usr/bin/nox-mesh-host-launch
      test "$(stat -c %a /var/lib/mesh-host)" = 700
      cmp /usr/share/nox-mesh-host/substrate.lock '${repo("packaging/arch/substrate.lock")}'
      test "$(stat -c %a /usr/share/nox-mesh-host/images/pause.oci.tar)" = 644
      cmp /usr/share/nox-mesh-host/images/pause.oci.tar '${join(b.dir, "images/pause.oci.tar")}'
      systemd-analyze verify /usr/lib/systemd/system/nox-mesh-host.service
      ${pacman} -Sy nox-mesh-host >&2
      pacman -Q nox-mesh-host
      ls /var/cache/pacman/pkg
      grep -c 'upgraded nox-mesh-host (0.1.0-1 -> 0.1.0-2)' /var/log/pacman.log`;
    const r = await runInSandbox(s, ["sh", "-c", script]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const deno = (await runtimePins()).version;
    assert.deepEqual(r.stdout.trim().split("\n").map((l) => l.replace(/ +/g, " ")), [
      `nox-mesh-host ${VERSION}-1`,
      `nox-mesh-host ${VERSION}`,
      "Depends On : None",
      `Architecture : ${Deno.build.arch}`,
      `"deno":"${deno}"`,
      `deno ${deno} (stable, release, ${Deno.build.arch}-unknown-linux-gnu)`,
      `nox-mesh-host ${VERSION}-2`,
      `nox-mesh-host-${VERSION}-2-${Deno.build.arch}.pkg.tar.gz`,
      "1",
    ]);
    assert.equal(
      second.split("/").pop(),
      `nox-mesh-host-${VERSION}-2-${Deno.build.arch}.pkg.tar.gz`,
    );
  } finally {
    await removeSandbox(s);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("alpine (lint only: no apk or abuild on this machine): APKBUILD is shellcheck clean, complete, and its staging checksums match", async () => {
  const apkbuild = await Deno.readTextFile(repo("packaging/alpine/APKBUILD"));
  await run("shellcheck", [repo("packaging/alpine/APKBUILD")]);
  for (const v of ["pkgname", "pkgver", "pkgrel", "pkgdesc", "url", "arch", "license", "source"]) {
    assert.match(apkbuild, new RegExp(`^${v}=.+`, "m"), `${v} is set`);
  }
  assert.match(apkbuild, /^pkgname=nox-mesh-host$/m);
  assert.match(apkbuild, new RegExp(`^pkgver=${VERSION.replaceAll(".", "\\.")}$`, "m"));
  assert.doesNotMatch(apkbuild, /^depends=/m, "the runtime is carried: no deno, nothing else");
  assert.match(apkbuild, /^package\(\) \{$/m);
  assert.match(apkbuild, /"\$pkgdir"\/etc\/init\.d\/nox-mesh-host$/m);
  assert.match(apkbuild, /"\$pkgdir"\/etc\/conf\.d\/nox-mesh-host$/m);
  const dir = await tempDir();
  try {
    const builds = [];
    for (const arch of ["x86_64", "aarch64"] as const) {
      const b = await build({ os: "alpine", arch, out: join(dir, `alpine-${arch}`) });
      assert.equal(b.form, "bundled");
      assert.equal(
        b.glibc?.loader,
        arch === "x86_64" ? "ld-linux-x86-64.so.2" : "ld-linux-aarch64.so.1",
      );
      builds.push(b);
    }
    await assert.rejects(stageAlpine(builds.slice(0, 1)), /no build for aarch64/);
    const staged = await stageAlpine(builds);
    const text = await Deno.readTextFile(join(staged, "APKBUILD"));
    const sources = text.match(/^source="([^"]*)"/m)![1].trim().split(/\s+/);
    const sums = text.match(/^sha512sums="([^"]*)"/m)![1].trim().split("\n");
    assert.deepEqual(
      sums.map((l) => l.split("  ")[1]),
      sources,
      "one checksum per source, in order",
    );
    const check = await new Deno.Command("sha512sum", {
      args: ["-c", "-"],
      cwd: staged,
      stdin: "piped",
      stdout: "piped",
    }).spawn();
    const w = check.stdin.getWriter();
    await w.write(new TextEncoder().encode(sums.join("\n") + "\n"));
    await w.close();
    assert.ok((await check.output()).success, "staged checksums match the staged files");
    await run("shellcheck", [join(staged, "APKBUILD"), join(staged, "nox-mesh-host.initd")]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("build --version: the stamped host says that version, the tarball is named for it, src/version.ts is untouched; a malformed version is refused", async () => {
  const dir = await tempDir();
  try {
    const stamped = `${VERSION}.7`;
    const b = await build({
      os: "tarball",
      form: "bundled",
      out: join(dir, "tarball"),
      version: stamped,
    });
    assert.equal(b.version, stamped);
    const said = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-config", join(b.dir, "nox-mesh-host.js"), "version"],
      stdout: "piped",
    }).output();
    assert.equal(new TextDecoder().decode(said.stdout), `nox-mesh-host ${stamped}\n`);
    assert.match(await Deno.readTextFile(join(b.dir, "nox-mesh-host")), new RegExp(stamped));
    assert.equal(
      (await packageTarball(b, "x86_64")).split("/").pop(),
      `nox-mesh-host-${stamped}-x86_64.tar.gz`,
    );
    assert.match(
      await Deno.readTextFile(repo("src/version.ts")),
      new RegExp(`VERSION = "${VERSION.replaceAll(".", "\\.")}"`),
    );
    assert.deepEqual(
      [...Deno.readDirSync(dir)].map((e) => e.name),
      ["tarball"],
      "no stamp left behind",
    );
    await assert.rejects(
      build({ os: "tarball", form: "bundled", out: join(dir, "bad"), version: "1.0-1" }),
      /not a version this build can stamp/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
