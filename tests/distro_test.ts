// What a distribution checks before it accepts a package, checked here without namcap or
// apkbuild-lint: the licence, signatures (gpg on the Arch package and database, minisign
// on the tarball's SHA256SUMS), man pages, completions equal to `help`, the conventions
// of PKGBUILD and APKBUILD, the changelog, and `version --json`.
import assert from "node:assert/strict";
import { join } from "node:path";
import { build, type BuildResult } from "../packaging/build.ts";
import { MAN_PAGES, packageArch, packageTarball, stageAlpine } from "../packaging/make_package.ts";
import { pauseImage } from "../packaging/image.ts";
import { completion, completionTable, OPTION_VALUES, SHELLS } from "../src/cli/completions.ts";
import { COMMANDS, main } from "../src/cli/main.ts";
import type { CliIo } from "../src/cli/io.ts";
import { GLOBAL_OPTIONS } from "../src/cli/command.ts";
import { VERSION } from "../src/version.ts";
import { run } from "./_pacman.ts";
import { APK_VERSIONS, apkSnapshot, originPackages } from "./_apk_world.ts";

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;
const text = (p: string) => Deno.readTextFileSync(repo(p));

async function tempDir(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-distro-" });
  await Deno.chmod(dir, 0o755); // makepkg runs as nobody
  return dir;
}

/** The CLI's own output for `args`, in-process. */
async function cli(args: string[]): Promise<string> {
  let out = "";
  const io: CliIo = {
    stdout: (t) => out += t,
    stderr: (t) => out += t,
    stdin: () => Promise.resolve(new Uint8Array()),
    providers: () => Promise.reject(new Error("help needs no providers")),
  };
  await main(args, io);
  return out;
}

/** Runs a command, returns exit code and output. */
async function sh(
  cmd: string,
  args: string[],
  options: { env?: Record<string, string>; cwd?: string; input?: string } = {},
): Promise<{ code: number; out: string }> {
  const child = new Deno.Command(cmd, {
    args,
    env: options.env,
    cwd: options.cwd,
    stdin: options.input === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.input !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.input));
    await w.close();
  }
  const r = await child.output();
  const d = new TextDecoder();
  return { code: r.code, out: d.decode(r.stdout) + d.decode(r.stderr) };
}

// ---------------------------------------------------------------- completions

/** What bash's completion offers for the words typed so far (the last one is completed). */
async function bashCompletes(file: string, words: string[]): Promise<string[]> {
  const script = `. '${file}'
COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")})
COMP_CWORD=${words.length - 1}
_nox_mesh_host
printf '%s\\n' "\${COMPREPLY[@]}"`;
  const r = await sh("bash", ["--noprofile", "--norc", "-c", script]);
  assert.equal(r.code, 0, r.out);
  return r.out.split("\n").filter(Boolean).sort();
}

Deno.test("completions: generated from the command table, they offer exactly what help lists", async () => {
  const overview = await cli(["help"]);
  const listed = [...overview.matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1]);
  const table = completionTable();
  assert.deepEqual(table.map((c) => c.name), listed, "completion commands = help's list");
  const dir = await tempDir();
  try {
    const bash = join(dir, "nox-mesh-host.bash");
    await Deno.writeTextFile(bash, completion("bash"));
    await run("shellcheck", [bash]);
    assert.deepEqual(
      await bashCompletes(bash, ["nox-mesh-host", ""]),
      [...listed, "--help", "--version"].sort(),
    );
    assert.deepEqual(await bashCompletes(bash, ["nox-mesh-host", "ap"]), ["apply"]);
    assert.deepEqual(await bashCompletes(bash, ["nox-mesh-host", "help", "in"]), ["inventory"]);
    for (const command of COMMANDS) {
      const help = await cli([command.name, "--help"]);
      const inHelp = new Set([...help.matchAll(/(?<![\w-])(--?[a-z][a-z-]*)/g)].map((m) => m[1]));
      // Help text also names options of other tools in prose; compare against its option lines.
      const documented = help.split("\n")
        .map((l) => /^ {2}((?:-[a-z], )?--?[a-z][a-z-]*)/.exec(l)?.[1])
        .filter((o): o is string => o !== undefined)
        .flatMap((o) => o.split(", "));
      const offered = await bashCompletes(bash, ["nox-mesh-host", command.name, "-"]);
      assert.deepEqual(offered, [...new Set(documented)].sort(), `${command.name}: options`);
      for (const o of offered) assert.ok(inHelp.has(o), `${command.name} --help names ${o}`);
    }
    // An option's value completes to what it is: a directory, a file, or nothing.
    await Deno.mkdir(join(dir, "sub"));
    const inDir = (w: string[]) => bashCompletes(bash, w.map((x) => x.replace("@", dir + "/")));
    assert.deepEqual(await inDir(["nox-mesh-host", "status", "--state-dir", "@s"]), [
      `${dir}/sub`,
    ]);
    assert.deepEqual(await inDir(["nox-mesh-host", "apply", "--wait", "@"]), []);
    // The token is read from stdin or a file, never given itself: `--token` offers `-` only.
    assert.deepEqual(await inDir(["nox-mesh-host", "enrol", "--token", ""]), ["-"]);
    assert.deepEqual(await inDir(["nox-mesh-host", "enrol", "--token-file", "@nox"]), [bash]);
    assert.deepEqual(await inDir(["nox-mesh-host", "apply", "@nox"]), [bash]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  // Each shell's script names every command and every option of the table.
  for (const shell of SHELLS) {
    const script = completion(shell);
    for (const c of table) {
      assert.ok(script.includes(c.name), `${shell}: ${c.name}`);
      for (const o of c.options) {
        assert.ok(script.includes(o.long), `${shell}: ${c.name} ${o.long}`);
      }
    }
  }
});

Deno.test("completions: every option that takes a value says what the value completes to", () => {
  const strings = [GLOBAL_OPTIONS, ...COMMANDS.map((c) => c.options)]
    .flatMap((options) => Object.entries(options))
    .filter(([, o]) => o.type === "string").map(([name]) => name);
  for (const name of strings) {
    assert.ok(name in OPTION_VALUES, `OPTION_VALUES names --${name}`);
  }
});

Deno.test("completions: bash completes `nox-mesh-host ap<TAB>` to apply, interactively in a pty", async () => {
  const dir = await tempDir();
  try {
    await Deno.writeTextFile(join(dir, "completion"), completion("bash"));
    await Deno.writeTextFile(
      join(dir, "rc"),
      `PS1='$ '\nbind 'set enable-bracketed-paste off'\n. '${dir}/completion'\n`,
    );
    // TAB completes; ^A goes to the start of the line, "echo COMPLETED:" is typed, ^E, Enter.
    const r = await sh("script", [
      "-qec",
      `bash --noprofile --rcfile '${dir}/rc' -i`,
      "/dev/null",
    ], { input: "nox-mesh-host ap\t\x01echo COMPLETED:\x05\nexit\n", env: { TERM: "dumb" } });
    const lines = r.out.split(/\r?\n/).map((l) => l.replaceAll("\r", ""));
    assert.ok(lines.includes("COMPLETED:nox-mesh-host apply"), r.out);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ------------------------------------------------------------- the Arch package

let archBuild: Promise<{ dir: string; b: BuildResult; pkg: string; fpr: string }> | undefined;

/** One signed Arch package for the tests below (a throwaway gpg key). */
function signedArch() {
  archBuild ??= (async () => {
    const dir = await tempDir();
    const home = join(dir, "gnupg");
    await Deno.mkdir(home, { mode: 0o700 });
    await Deno.writeTextFile(
      join(dir, "batch"),
      "%no-protection\nKey-Type: eddsa\nKey-Curve: ed25519\nKey-Usage: sign\n" +
        "Name-Real: distro test\nName-Email: test@nox-mesh-host.invalid\nExpire-Date: 0\n%commit\n",
    );
    await run("gpg", ["--batch", "--homedir", home, "--generate-key", join(dir, "batch")]);
    const list = await run("gpg", ["--homedir", home, "--with-colons", "--list-secret-keys"]);
    const fpr = list.split("\n").find((l) => l.startsWith("fpr:"))!.split(":")[9];
    const b = await build({ os: "arch", form: "bundled", out: join(dir, "arch") });
    try {
      const pkg = await packageArch(b, 1, { sign: { gnupgHome: home, key: fpr } });
      return { dir, b, pkg, fpr };
    } finally {
      await sh("gpgconf", ["--homedir", home, "--kill", "all"]);
    }
  })();
  return archBuild;
}

interface Entry {
  mode: string;
  owner: string;
  group: string;
  path: string;
}

/** The package's members as bsdtar lists them. */
async function members(pkg: string): Promise<Entry[]> {
  const listing = await run("bsdtar", ["-tvf", pkg]);
  return listing.trim().split("\n").map((line) => {
    const f = line.split(/\s+/);
    return { mode: f[0], owner: f[2], group: f[3], path: f.slice(8).join(" ").replace(/\/$/, "") };
  });
}

Deno.test("arch package: licence, man pages, completions where Arch puts them; nothing namcap would flag in its files", async () => {
  const { pkg, dir } = await signedArch();
  const all = await members(pkg);
  const paths = all.map((e) => e.path);
  const files = paths.filter((p) => !p.startsWith("."));
  for (
    const want of [
      "usr/share/licenses/nox-mesh-host/LICENSE",
      ...MAN_PAGES.map((p) => `usr/share/man/man${p.split(".").pop()}/${p}.gz`),
      "usr/share/bash-completion/completions/nox-mesh-host",
      "usr/share/zsh/site-functions/_nox-mesh-host",
      "usr/share/fish/vendor_completions.d/nox-mesh-host.fish",
      // The Arch bundle and the image its action loads (packaging/image.ts).
      "usr/share/nox-mesh-host/substrate.lock",
      "usr/share/nox-mesh-host/images/pause.oci.tar",
      // The runtime it carries (bundled form), its licence beside it and where Arch looks.
      "usr/lib/nox-mesh-host/deno",
      "usr/lib/nox-mesh-host/deno.LICENSE",
      "usr/share/licenses/nox-mesh-host/deno.LICENSE",
    ]
  ) assert.ok(files.includes(want), `${want} in the package`);
  const work = join(dir, "x");
  await Deno.mkdir(work);
  await run("bsdtar", ["-xf", pkg, "-C", work]);
  assert.equal(
    await Deno.readTextFile(join(work, "usr/share/licenses/nox-mesh-host/LICENSE")),
    text("LICENSE"),
  );
  const pkginfo = await Deno.readTextFile(join(work, ".PKGINFO"));
  assert.match(pkginfo, /^license = Apache-2\.0$/m);
  assert.doesNotMatch(pkginfo, /^depend = /m, "no dependency: not even deno");
  assert.match(pkginfo, new RegExp(`^arch = ${Deno.build.arch}$`, "m"));
  assert.match(
    await Deno.readTextFile(join(work, "usr/share/licenses/nox-mesh-host/deno.LICENSE")),
    /MIT License/,
  );
  for (const dep of ["wireguard-tools", "nftables", "podman"]) {
    assert.match(pkginfo, new RegExp(`^optdepend = ${dep}: \\S.+$`, "m"), `${dep} with a reason`);
  }
  // namcap: no /usr/local, no /usr/sbin or other non-Arch top directories, all root-owned,
  // no world-writable, setuid or setgid file, every file under etc/ in backup.
  const allowed = /^(usr\/(bin|lib|share)|var\/lib|etc)(\/|$)|^(usr|var)$/;
  for (const e of all.filter((e) => !e.path.startsWith("."))) {
    assert.ok(allowed.test(e.path), `${e.path}: a place Arch packages install to`);
    assert.ok(!e.path.startsWith("usr/local"), `${e.path}: nothing in /usr/local`);
    assert.equal(`${e.owner}:${e.group}`, "root:root", `${e.path} owned by root`);
    assert.ok(!/^.{8}w/.test(e.mode), `${e.path} not world-writable (${e.mode})`);
    assert.ok(!/[sS]/.test(e.mode), `${e.path} neither setuid nor setgid (${e.mode})`);
    const want = e.mode.startsWith("d")
      ? (e.path === "var/lib/mesh-host" ? "drwx------" : "drwxr-xr-x")
      : e.path.startsWith("usr/bin/") || e.path === "usr/lib/nox-mesh-host/deno"
      ? "-rwxr-xr-x"
      : "-rw-r--r--";
    assert.equal(e.mode, want, `${e.path} mode`);
  }
  const backup = [...pkginfo.matchAll(/^backup = (.+)$/gm)].map((m) => m[1]);
  for (
    const etc of files.filter((p) =>
      p.startsWith("etc/") && !all.find((e) => e.path === p && e.mode.startsWith("d"))
    )
  ) {
    assert.ok(backup.includes(etc), `${etc} in backup=()`);
  }
  // The man pages are real roff that man renders.
  const page = await sh("man", ["-l", join(work, "usr/share/man/man8/nox-mesh-host.8.gz")], {
    env: { MANPAGER: "cat", MANWIDTH: "80" },
  });
  assert.equal(page.code, 0, page.out);
  assert.match(page.out, /EXIT STATUS/);
  for (const c of COMMANDS) assert.match(page.out, new RegExp(`^ {7}${c.name}\\b`, "m"), c.name);
});

Deno.test("arch package: the package and the repository database carry valid gpg signatures; a changed package fails them", async () => {
  const { pkg, dir, b } = await signedArch();
  const home = join(dir, "gnupg");
  const verify = (sig: string, file: string) =>
    sh("gpg", ["--homedir", home, "--batch", "--verify", sig, file]);
  assert.equal((await verify(`${pkg}.sig`, pkg)).code, 0);
  const db = join(b.dir, "repo", "nox-mesh-host.db.tar.gz");
  assert.equal((await verify(`${db}.sig`, db)).code, 0);
  // The database carries the package's signature, as pacman reads it.
  const desc = await run("bsdtar", ["-xOf", db, "--include", "*/desc"]);
  assert.match(desc, /%PGPSIG%\n\S+/);
  const changed = join(dir, "changed.pkg.tar.gz");
  await Deno.copyFile(pkg, changed);
  await Deno.writeFile(changed, new Uint8Array([0]), { append: true });
  const bad = await verify(`${pkg}.sig`, changed);
  assert.notEqual(bad.code, 0);
  assert.match(bad.out, /BAD signature/);
  await sh("gpgconf", ["--homedir", home, "--kill", "all"]);
});

Deno.test("PKGBUILD: SPDX licence, optdepends with reasons, man pages built by scdoc, backup for shipped config", () => {
  const pkgbuild = text("packaging/arch/PKGBUILD");
  assert.match(pkgbuild, /^license=\('Apache-2\.0'\)$/m);
  assert.match(pkgbuild, /^makedepends=\('scdoc'\)$/m);
  for (const dep of ["wireguard-tools", "nftables", "podman"]) {
    assert.match(pkgbuild, new RegExp(`'${dep}: [^']+'`), `optdepends ${dep} with a reason`);
  }
  assert.match(pkgbuild, /scdoc < /);
  // No configuration file is shipped (host.json is optional and the admin's); if one
  // ever is, it must be in backup=().
  const etc = [...pkgbuild.matchAll(/"\$pkgdir\/(etc\/[^"]+)"/g)].map((m) => m[1]);
  for (const file of etc) assert.match(pkgbuild, new RegExp(`backup=\\([^)]*'${file}'`));
});

// ------------------------------------------------------------------- Alpine

Deno.test("APKBUILD: what apkbuild-lint and Alpine's policy check, and ready for abuild's signing", async () => {
  const apkbuild = text("packaging/alpine/APKBUILD");
  const value = (name: string) =>
    (apkbuild.match(new RegExp(`^${name}="([^"]*)"`, "m")) ??
      apkbuild.match(new RegExp(`^${name}=(\\S*)$`, "m")))?.[1]?.trim();
  // Ours, Deno's, and those of the glibc loader and libraries carried beside the runtime.
  assert.equal(
    value("license"),
    "Apache-2.0 AND MIT AND LGPL-2.1-or-later AND GPL-3.0-or-later WITH GCC-exception-3.1",
  );
  assert.equal(value("depends"), undefined, "the runtime is carried: no deno, nothing else");
  assert.doesNotMatch(apkbuild, /deno~/);
  assert.equal(value("arch"), "x86_64 aarch64", "each package carries its architecture's runtime");
  assert.equal(value("makedepends"), "scdoc");
  const desc = value("pkgdesc")!;
  assert.ok(desc.length < 128, `pkgdesc under 128 characters (${desc.length})`);
  assert.ok(!/\.$/.test(desc) && !/^(a|an|the) /i.test(desc), "pkgdesc: no article, no full stop");
  const subpackages = value("subpackages")!.split(/\s+/);
  for (
    const sub of ["doc", "openrc", "bash-completion", "zsh-completion", "fish-completion"]
  ) assert.ok(subpackages.includes(`$pkgname-${sub}`), `subpackage -${sub}`);
  // apkbuild-lint: AL8 trailing whitespace, AL2 `|| return 1`, AL5 empty variables,
  // AL10/11 function spacing, AL13 cd "$builddir", AL29 $pkgname in source, AL1 the
  // default builddir, AL3/4 quoted pkgname/pkgver, custom variables start with "_".
  const lines = apkbuild.split("\n");
  lines.forEach((l, i) => assert.ok(!/[ \t]$/.test(l), `line ${i + 1}: trailing whitespace`));
  assert.doesNotMatch(apkbuild, /\|\| return 1/);
  assert.doesNotMatch(apkbuild, /^\w+=(""|'')?$/m, "no empty variable");
  assert.doesNotMatch(apkbuild, /^\w+ \(\)|^\w+\(\)\{/m, "functions written name() {");
  assert.doesNotMatch(apkbuild, /cd "\$builddir"/);
  assert.doesNotMatch(value("source")!, /\$pkgname/);
  assert.doesNotMatch(apkbuild, /^builddir="\$srcdir\/\$pkgname-\$pkgver"$/m);
  assert.match(apkbuild, /^pkgname=nox-mesh-host$/m);
  assert.match(apkbuild, new RegExp(`^pkgver=${VERSION.replaceAll(".", "\\.")}$`, "m"));
  const known = new Set([
    "pkgname",
    "pkgver",
    "pkgrel",
    "pkgdesc",
    "url",
    "arch",
    "license",
    "depends",
    "makedepends",
    "subpackages",
    "source",
    "builddir",
    "options",
    "sha512sums",
    "install",
    "checkdepends",
    "provides",
    "replaces",
    "triggers",
    "pkgusers",
    "pkggroups",
  ]);
  for (const [, name] of apkbuild.matchAll(/^(\w+)=/gm)) {
    assert.ok(known.has(name) || name.startsWith("_"), `${name}: custom variables start with _`);
  }
  for (const option of value("options")!.split(/\s+/)) {
    assert.ok(["!check", "!strip", "!tracedeps", "net", "!fhs"].includes(option), option);
  }
  // Signing is abuild's (the packager key); nothing we ship tells apk to skip it.
  // (launcher/nox-mesh-host-launch still uses it for its rollback: another issue.)
  for await (const file of walk(repo("packaging"))) {
    assert.doesNotMatch(await Deno.readTextFile(file), /--allow-untrusted/, file);
  }
  // The staged sources: every file the APKBUILD installs, checksummed.
  const dir = await tempDir();
  try {
    const builds = [];
    for (const arch of ["x86_64", "aarch64"] as const) {
      builds.push(await build({ os: "alpine", arch, out: join(dir, `alpine-${arch}`) }));
    }
    const staged = await stageAlpine(builds);
    const sources = (await Deno.readTextFile(join(staged, "APKBUILD")))
      .match(/^source="([^"]*)"/m)![1].trim().split(/\s+/);
    for (const s of sources) await Deno.stat(join(staged, s));
    assert.ok(sources.includes("LICENSE"));
    for (const p of MAN_PAGES) assert.ok(sources.includes(`${p}.scd`), p);
    // The Alpine bundle and the image its action loads, installed where the bundle says.
    assert.equal(
      await Deno.readTextFile(join(staged, "substrate.lock")),
      text("packaging/alpine/substrate.lock"),
    );
    assert.deepEqual(
      await Deno.readFile(join(staged, "pause-image.oci")),
      (await pauseImage()).archive,
    );
    assert.match(
      apkbuild,
      /install -Dm0644 "\$srcdir"\/pause-image\.oci "\$pkgdir"\/usr\/share\/nox-mesh-host\/images\/pause\.oci\.tar/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Alpine: the init script is in -openrc, which apk adds only where openrc is installed, and packaging/README.md says so (real apk-tools 2.14.10 and 3.0.6)", () => {
  const apkbuild = text("packaging/alpine/APKBUILD");
  // abuild's own split (no openrc() of ours): -openrc takes etc/init.d and etc/conf.d and
  // gets install_if="openrc nox-mesh-host=VERSION"; the main package does not depend on it.
  assert.match(apkbuild, /^\t\$pkgname-openrc$/m);
  assert.doesNotMatch(apkbuild, /^openrc\(\)/m);
  assert.match(apkbuild, /"\$pkgdir"\/etc\/init\.d\/nox-mesh-host$/m);
  for (const version of APK_VERSIONS) {
    const names = (state: string) =>
      originPackages(apkSnapshot(version, state, "installed")).map((l) => l.split(" ")[0]);
    // `apk add nox-mesh-host` without openrc: no -openrc, no /etc/init.d (add-without-openrc).
    assert.deepEqual(names("n1"), ["nox-mesh-host"], version);
    assert.doesNotMatch(apkSnapshot(version, "n1", "installed"), /^F:etc\/init\.d$/m, version);
    // `apk add openrc nox-mesh-host`: -openrc comes with its init script (add-with-openrc).
    assert.deepEqual(names("n2"), ["nox-mesh-host", "nox-mesh-host-openrc"], version);
    assert.match(apkSnapshot(version, "n2", "installed"), /^F:etc\/init\.d\nR:nox-mesh-host$/m);
  }
  // The install details live in packaging/README.md (the README keeps the newcomer's lines).
  const readme = text("packaging/README.md");
  const alpine = readme.slice(
    readme.indexOf("**Alpine Linux**"),
    readme.indexOf("Both packages are signed"),
  );
  assert.match(alpine, /rc-update add nox-mesh-host default/);
  assert.match(alpine, /`nox-mesh-host-openrc`, which apk\s+adds by itself wherever `openrc` is/);
  assert.match(alpine, /`apk add openrc nox-mesh-host` brings both/);
});

async function* walk(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory) yield* walk(p);
    else if (e.isFile) yield p;
  }
}

// ------------------------------------------------------------------- tarball

Deno.test("tarball: carries the licence; SHA256SUMS is signed with minisign, and a changed SHA256SUMS fails the signature", async () => {
  const dir = await tempDir();
  try {
    const key = join(dir, "release.key");
    const pub = join(dir, "release.pub");
    await run("minisign", ["-G", "-W", "-p", pub, "-s", key]);
    const b = await build({ os: "tarball", form: "bundled", out: join(dir, "tarball") });
    const tarball = await packageTarball(b, "x86_64", {
      minisign: { secretKey: key, publicKey: pub },
    });
    const listing = await run("tar", ["-tzf", tarball]);
    const entries = listing.split("\n");
    assert.ok(entries.includes("share/nox-mesh-host/LICENSE"), listing);
    assert.ok(entries.includes("lib/nox-mesh-host/deno.LICENSE"), "the runtime's licence");
    const verify = () => sh("minisign", ["-Vm", "SHA256SUMS", "-p", pub], { cwd: b.dir });
    assert.equal((await verify()).code, 0);
    assert.equal(
      await Deno.readTextFile(join(b.dir, "minisign.pub")),
      await Deno.readTextFile(pub),
    );
    await Deno.writeTextFile(join(b.dir, "SHA256SUMS"), "0".repeat(64) + "  x\n", { append: true });
    const bad = await verify();
    assert.notEqual(bad.code, 0);
    assert.match(bad.out, /Signature verification failed/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---------------------------------------------------- version, changelog

Deno.test("version --json of a build: version, form, Deno version and architecture, and the commit it was built from", async () => {
  const { b } = await signedArch();
  const r = await sh(Deno.execPath(), [
    "run",
    "--no-config",
    "--allow-read",
    join(b.dir, "nox-mesh-host.js"),
    "version",
    "--json",
  ]);
  assert.equal(r.code, 0, r.out);
  const v = JSON.parse(r.out);
  const head = (await run("git", ["-C", repo(""), "rev-parse", "HEAD"])).trim();
  assert.deepEqual(
    { ...v, commit: v.commit.replace(/-dirty$/, "") },
    {
      program: "nox-mesh-host",
      version: VERSION,
      form: "bundled",
      deno: Deno.version.deno,
      arch: Deno.build.arch,
      commit: head,
    },
  );
  // From a checkout: the form says so.
  assert.match(await cli(["version", "--json"]), /"form":"source"/);
});

Deno.test("CHANGELOG.md: every version the packages carried, newest first, the current one on top", () => {
  const changelog = text("CHANGELOG.md");
  const versions = [...changelog.matchAll(/^## \[?([0-9][0-9A-Za-z.]*)\]?/gm)].map((m) => m[1]);
  assert.equal(versions[0], VERSION, "the current version on top");
  const key = (v: string) => v.split(".").map(Number);
  const sorted = [...versions].sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
      if ((x[i] ?? 0) !== (y[i] ?? 0)) return (y[i] ?? 0) - (x[i] ?? 0);
    }
    return 0;
  });
  assert.deepEqual(versions, sorted, "newest first");
  assert.match(text("packaging/arch/PKGBUILD"), new RegExp(`^pkgver=${versions[0]}$`, "m"));
});

Deno.test("cleanup: the shared Arch build", async () => {
  if (archBuild) await Deno.remove((await archBuild).dir, { recursive: true });
});
