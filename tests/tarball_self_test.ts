/**
 * The tarball's own package adapter (os/tarball-self): a real archive made by GNU tar
 * installs beside the running installation and is switched to; hostile archives
 * (absolute path, `..`, links, devices, files outside the layout, setuid, another
 * version) and bytes that are not the declared ones are refused before anything is
 * unpacked; installed() reads the version back. Also the parse rule of the package
 * resource's digest and the routing of other packages.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { sha256Hex } from "../src/declaration/canonical.ts";
import { DeclarationRefused } from "../src/declaration/envelope.ts";
import { parseDeclaration } from "../src/engine/parse.ts";
import type { PackageFile } from "../src/providers.ts";
import {
  REFUSED_RECORD,
  STAGE_DIR,
  STAGE_RECORD,
  STAGE_TARBALL,
  tarballSelf,
  VERSION_FILE,
} from "../os/tarball-self/mod.ts";
import { withOwnPackage } from "../os/_own_package.ts";
import { readTarball, TarballRefused } from "../os/tarball-self/_ustar.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { ContentCache } from "../src/store/content.ts";
import { reportLine } from "../src/cli/format.ts";
import { outcomes, testEngine } from "./_engine.ts";

const NAME = "nox-mesh-host";

/** The layout a release lays down, as path → [content, mode]. */
function release(version: string): Record<string, [string, number]> {
  return {
    "bin/nox-mesh-host": [`#!/bin/sh\necho shim ${version}\n`, 0o755],
    "bin/nox-mesh-host-launch": [`#!/bin/sh\necho launcher ${version}\n`, 0o755],
    "bin/nox-mesh-host-install-init": [`#!/bin/sh\necho install-init ${version}\n`, 0o755],
    "lib/nox-mesh-host/VERSION": [`${version}\n`, 0o644],
    "lib/nox-mesh-host/deno": [`runtime ${version}\n`, 0o755],
    "lib/nox-mesh-host/nox-mesh-host.js": [`bundle ${version}\n`, 0o644],
    "lib/nox-mesh-host/init/nox-mesh-host.service": [`unit ${version}\n`, 0o644],
    "share/nox-mesh-host/substrate.lock": [`{"v":"${version}"}\n`, 0o644],
  };
}

async function sh(script: string, ...args: string[]): Promise<string> {
  const out = await new Deno.Command("sh", { args: ["-c", script, "sh", ...args] }).output();
  const d = new TextDecoder();
  if (!out.success) throw new Error(`${script}: ${d.decode(out.stderr)}`);
  return d.decode(out.stdout);
}

/** A tree of files under `dir`. */
async function lay(dir: string, files: Record<string, [string, number]>): Promise<void> {
  for (const [path, [content, mode]] of Object.entries(files)) {
    await Deno.mkdir(join(dir, path, ".."), { recursive: true });
    await Deno.writeTextFile(join(dir, path), content);
    await Deno.chmod(join(dir, path), mode);
  }
}

/** A tarball made as packaging/make_package.ts makes one: GNU tar, files only, 0:0, gzip -n. */
async function gnuTarball(dir: string, files: Record<string, [string, number]>, extra = "") {
  const tree = await Deno.makeTempDir({ dir });
  await lay(tree, files);
  const names = Object.keys(files).sort();
  const out = join(dir, `t-${crypto.randomUUID()}.tar.gz`);
  await sh(
    `cd "$1" && shift && out=$1 && shift && ${extra} tar --create --format=gnu --no-recursion ` +
      `--owner=0 --group=0 --numeric-owner -f - -- "$@" | gzip -n > "$out"`,
    tree,
    out,
    ...names,
  );
  return await Deno.readFile(out);
}

/** One raw ustar header (for what GNU tar will not write: absolute names, `..`, devices). */
function header(name: string, type: string, size: number, mode = 0o644): Uint8Array {
  const h = new Uint8Array(512);
  const put = (at: number, text: string) => h.set(new TextEncoder().encode(text), at);
  const oct = (n: number, width: number) => n.toString(8).padStart(width - 1, "0");
  put(0, name);
  put(100, oct(mode, 8));
  put(108, oct(0, 8));
  put(116, oct(0, 8));
  put(124, oct(size, 12));
  put(136, oct(0, 12));
  put(148, "        ");
  put(156, type);
  put(257, "ustar\u000000");
  let sum = 0;
  for (const b of h) sum += b;
  put(148, oct(sum, 7) + "\u0000");
  return h;
}

/** A gzip'd archive of raw entries: [name, type, content, mode]. */
async function rawTarball(entries: [string, string, string, number?][]): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for (const [name, type, content, mode] of entries) {
    const data = new TextEncoder().encode(content);
    parts.push(header(name, type, data.length, mode));
    const padded = new Uint8Array(Math.ceil(data.length / 512) * 512);
    padded.set(data);
    parts.push(padded);
  }
  parts.push(new Uint8Array(1024));
  const tar = new Blob(parts as BlobPart[]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(tar).arrayBuffer());
}

/** The good release's entries as raw ones, plus `bad` (to show the one bad entry alone is refused). */
function goodAnd(version: string, bad: [string, string, string, number?]) {
  const good = Object.entries(release(version)).map(([p, [c, m]]) =>
    [p, "0", c, m] as [string, string, string, number]
  );
  return [...good, bad];
}

async function fileOf(bytes: Uint8Array, sha256?: string): Promise<PackageFile> {
  return {
    sha256: sha256 ?? await sha256Hex(bytes),
    size: bytes.length,
    bytes: () => Promise.resolve(bytes),
  };
}

/** Every file under `dir`, relative, with its content (for "nothing changed"). */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out = await sh('cd "$1" && find . -print | LC_ALL=C sort', dir);
  const files: Record<string, string> = {};
  for (const path of out.trim().split("\n")) {
    const info = await Deno.lstat(join(dir, path));
    files[path] = info.isFile
      ? await Deno.readTextFile(join(dir, path))
      : info.isDirectory
      ? "dir"
      : "other";
  }
  return files;
}

/** A prefix holding the installation of 1.0, and the adapter for it. */
async function installed10() {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-tbself-" });
  const prefix = join(dir, "usr-local");
  const state = join(dir, "state");
  await Deno.mkdir(state);
  await lay(prefix, { ...release("1.0"), "lib/nox-mesh-host/only-in-1.0": ["old\n", 0o644] });
  await lay(prefix, { "bin/other-program": ["not ours\n", 0o755] });
  return {
    dir,
    prefix,
    state,
    stage: join(state, STAGE_DIR),
    self: tarballSelf({ prefix, runningVersion: "0.9-running", stateDir: state }),
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

/** The installation is exactly as before (and, given the state directory, nothing staged). */
async function assertUntouched(prefix: string, before: Record<string, string>, state?: string) {
  assert.deepEqual(await snapshot(prefix), before, "nothing was unpacked, staged or switched");
  if (state !== undefined) {
    assert.equal(await Deno.lstat(join(state, STAGE_DIR)).catch(() => null), null, "no stage");
  }
}

Deno.test("tarball-self: a GNU tar release is staged in the state directory and the prefix is left untouched", async () => {
  await using t = await installed10();
  const before = await snapshot(t.prefix);
  const bytes = await gnuTarball(t.dir, release("1.1"));
  const file = await fileOf(bytes);
  assert.deepEqual(await t.self.installed(NAME), { name: NAME, version: "1.0" });
  await t.self.install(NAME, "1.1", file);
  await assertUntouched(t.prefix, before);
  // The stage holds exactly the verified bytes and their record, private to root.
  assert.deepEqual(await Deno.readFile(join(t.stage, STAGE_TARBALL)), bytes);
  assert.equal(
    await Deno.readTextFile(join(t.stage, STAGE_RECORD)),
    `${file.sha256} 1.1\n`,
  );
  assert.deepEqual(
    [...Deno.readDirSync(t.stage)].map((e) => e.name).sort(),
    [STAGE_RECORD, STAGE_TARBALL].sort(),
    "no temporary file is left",
  );
  for (const name of [STAGE_TARBALL, STAGE_RECORD]) {
    const info = await Deno.lstat(join(t.stage, name));
    assert.equal(info.mode! & 0o7777, 0o600, name);
    assert.equal(info.uid, 0);
  }
  assert.equal((await Deno.lstat(t.stage)).mode! & 0o7777, 0o700);
  // Read back as installed, pending the launcher (the package resource's read-back).
  const pending = await t.self.installed(NAME);
  assert.equal(pending?.version, "1.1");
  assert.match(pending?.pending ?? "", /staged in .*upgrade and takes effect when the launcher/);
  // A newer declared version replaces the stage; the installed one declared again drops it.
  const next = await gnuTarball(t.dir, release("1.2"));
  await t.self.install(NAME, "1.2", await fileOf(next));
  assert.deepEqual(await Deno.readFile(join(t.stage, STAGE_TARBALL)), next);
  assert.equal((await t.self.installed(NAME))?.version, "1.2");
  await t.self.install(NAME, "1.0", await fileOf(await gnuTarball(t.dir, release("1.0"))));
  assert.equal(await Deno.lstat(t.stage).catch(() => null), null, "a stale stage is dropped");
  assert.deepEqual(await t.self.installed(NAME), { name: NAME, version: "1.0" });
  await assertUntouched(t.prefix, before, t.state);
});

Deno.test("tarball-self: once the launcher refused a stage, the installed version is read again and that digest is never staged again", async () => {
  await using t = await installed10();
  const bytes = await gnuTarball(t.dir, release("1.1"));
  const file = await fileOf(bytes);
  await t.self.install(NAME, "1.1", file);
  // The launcher refused it: stage removed, reason recorded (launcher/nox-mesh-host-launch).
  await Deno.remove(t.stage, { recursive: true });
  await Deno.writeTextFile(
    join(t.state, REFUSED_RECORD),
    `${file.sha256} 1.1: its sha256 is ${"0".repeat(64)}, not the recorded ${file.sha256}\n`,
  );
  assert.deepEqual(await t.self.installed(NAME), { name: NAME, version: "1.0" });
  let fetched = false;
  await assert.rejects(
    t.self.install(NAME, "1.1", { ...file, bytes: () => (fetched = true, file.bytes()) }),
    (e) =>
      e instanceof Error && /launcher refused the staged tarball of nox-mesh-host 1\.1/.test(
        e.message,
      ) && /its sha256 is 0+, not the recorded/.test(e.message),
  );
  assert.equal(fetched, false, "the refused tarball is not even fetched again");
  assert.equal(await Deno.lstat(t.stage).catch(() => null), null, "nothing staged");
  // Another tarball of that version is staged.
  const fixed = await gnuTarball(t.dir, {
    ...release("1.1"),
    "lib/nox-mesh-host/fix": ["1\n", 0o644],
  });
  await t.self.install(NAME, "1.1", await fileOf(fixed));
  assert.deepEqual(await Deno.readFile(join(t.stage, STAGE_TARBALL)), fixed);
});

Deno.test("tarball-self: a version the launcher rolled back from is never staged again, not even fetched", async () => {
  await using t = await installed10();
  const file = await fileOf(await gnuTarball(t.dir, release("1.1")));
  await Deno.writeTextFile(join(t.state, "rolled-back-from"), "0.9\n1.1\n");
  let fetched = false;
  await assert.rejects(
    t.self.install(NAME, "1.1", { ...file, bytes: () => (fetched = true, file.bytes()) }),
    (e) =>
      e instanceof Error && "code" in e && e.code === "package.rolled-back" &&
      /nox-mesh-host 1\.1 failed to start on this machine and the launcher rolled it back/.test(
        e.message,
      ),
  );
  assert.equal(fetched, false);
  assert.equal(await Deno.lstat(t.stage).catch(() => null), null, "nothing staged");
  // A person removed its line: it is staged.
  await Deno.writeTextFile(join(t.state, "rolled-back-from"), "0.9\n");
  await t.self.install(NAME, "1.1", file);
  assert.equal((await t.self.installed(NAME))?.version, "1.1");
});

Deno.test("tarball-self: a symlink planted at the stage is refused or replaced, never followed", async () => {
  await using t = await installed10();
  const bytes = await gnuTarball(t.dir, release("1.1"));
  // The stage directory itself a link to a directory elsewhere: refused, nothing written there.
  const elsewhere = join(t.dir, "elsewhere");
  await Deno.mkdir(elsewhere);
  await Deno.symlink(elsewhere, t.stage);
  await assert.rejects(
    t.self.install(NAME, "1.1", await fileOf(bytes)),
    /upgrade stage .* is a symbolic link/,
  );
  assert.deepEqual([...Deno.readDirSync(elsewhere)], [], "nothing written through the link");
  assert.equal((await t.self.installed(NAME))?.version, "1.0", "a link is not a stage");
  await Deno.remove(t.stage);
  // Links planted at the tarball's, the record's and the temporaries' names: the target
  // files are left as they were; the stage holds regular files.
  const victim = join(t.dir, "victim");
  await Deno.writeTextFile(victim, "precious\n");
  await Deno.mkdir(t.stage, { mode: 0o700 });
  for (
    const name of [STAGE_TARBALL, STAGE_RECORD, `.${STAGE_TARBALL}.tmp`, `.${STAGE_RECORD}.tmp`]
  ) {
    await Deno.symlink(victim, join(t.stage, name));
  }
  await t.self.install(NAME, "1.1", await fileOf(bytes));
  assert.equal(await Deno.readTextFile(victim), "precious\n");
  assert.ok((await Deno.lstat(join(t.stage, STAGE_TARBALL))).isFile);
  assert.ok((await Deno.lstat(join(t.stage, STAGE_RECORD))).isFile);
  assert.deepEqual(await Deno.readFile(join(t.stage, STAGE_TARBALL)), bytes);
});

Deno.test("tarball-self: installed() reads the VERSION file back, falls back to the running version, else null", async () => {
  await using t = await installed10();
  assert.deepEqual(await t.self.installed(NAME), { name: NAME, version: "1.0" });
  await Deno.writeTextFile(join(t.prefix, VERSION_FILE), "2.0.1-rc1\n");
  assert.deepEqual(await t.self.installed(NAME), { name: NAME, version: "2.0.1-rc1" });
  await Deno.writeTextFile(join(t.prefix, VERSION_FILE), "../../etc\n");
  await assert.rejects(t.self.installed(NAME), /holds "\.\.\/\.\.\/etc", not a version/);
  // A tarball older than the VERSION file: the program there is the one running.
  await Deno.remove(join(t.prefix, VERSION_FILE));
  assert.deepEqual(await t.self.installed(NAME), { name: NAME, version: "0.9-running" });
  await Deno.remove(join(t.prefix, "bin", NAME));
  assert.equal(await t.self.installed(NAME), null);
  await assert.rejects(t.self.installed("vim"), /tarball installs only nox-mesh-host/);
});

Deno.test("tarball-self: bytes that are not the declared digest are refused before anything is unpacked", async () => {
  await using t = await installed10();
  const before = await snapshot(t.prefix);
  const bytes = await gnuTarball(t.dir, release("1.1"));
  const other = await sha256Hex(new TextEncoder().encode("another tarball"));
  await assert.rejects(
    t.self.install(NAME, "1.1", await fileOf(bytes, other)),
    (e) =>
      e instanceof TarballRefused && /not the declared ones .*sha256 [0-9a-f]{64}/.test(e.message),
  );
  // The right digest but another size (a source that handed over more bytes).
  const longer = { ...await fileOf(bytes), size: bytes.length - 1 };
  await assert.rejects(t.self.install(NAME, "1.1", longer), /bytes, not /);
  await assertUntouched(t.prefix, before, t.state);
});

Deno.test("tarball-self: without a file (no digest declared) it says to declare one", async () => {
  await using t = await installed10();
  await assert.rejects(t.self.install(NAME, "1.1"), /no repository .*contentSha256 and size/);
});

const HOSTILE: [string, [string, string, string, number?], RegExp][] = [
  ["an absolute path", ["/usr/local/lib/nox-mesh-host/x", "0", "x"], /is an absolute path/],
  ["a .. component", ["lib/nox-mesh-host/../../../etc/passwd", "0", "x"], /"\.\." component/],
  ["a symbolic link", ["lib/nox-mesh-host/link", "2", ""], /is a symbolic link/],
  ["a hard link", ["lib/nox-mesh-host/hard", "1", ""], /is a hard link/],
  ["a character device", ["lib/nox-mesh-host/null", "3", ""], /is a character device/],
  ["a block device", ["lib/nox-mesh-host/sda", "4", ""], /is a block device/],
  ["a FIFO", ["lib/nox-mesh-host/fifo", "6", ""], /is a FIFO/],
  [
    "a file outside the layout",
    ["etc/cron.d/evil", "0", "* * * * * root sh\n"],
    /outside the tarball's layout/,
  ],
  [
    "another program in bin/",
    ["bin/sh", "0", "#!/bin/sh\n", 0o755],
    /outside the tarball's layout/,
  ],
  ["a directory outside the layout", ["etc/", "5", ""], /outside the tarball's layout/],
  ["a setuid file", ["lib/nox-mesh-host/su", "0", "x", 0o4755], /mode 4755/],
  ["a group-writable file", ["lib/nox-mesh-host/w", "0", "x", 0o664], /mode 664/],
  ["a GNU long name", ["././@LongLink", "L", "lib/nox-mesh-host/long\u0000"], /GNU long-name/],
  ["a duplicate entry", ["lib/nox-mesh-host/deno", "0", "second runtime\n", 0o755], /twice/],
];

for (const [what, bad, message] of HOSTILE) {
  Deno.test(`tarball-self: an archive with ${what} is refused and nothing is unpacked`, async () => {
    await using t = await installed10();
    const before = await snapshot(t.prefix);
    const bytes = await rawTarball(goodAnd("1.1", bad));
    await assert.rejects(
      t.self.install(NAME, "1.1", await fileOf(bytes)),
      (e) => e instanceof TarballRefused && message.test(e.message),
    );
    await assertUntouched(t.prefix, before, t.state);
  });
}

Deno.test("tarball-self: a symlink made by GNU tar itself is refused (the real tool's encoding)", async () => {
  await using t = await installed10();
  const before = await snapshot(t.prefix);
  const tree = await Deno.makeTempDir({ dir: t.dir });
  await lay(tree, release("1.1"));
  await Deno.symlink("/etc/shadow", join(tree, "lib/nox-mesh-host/shadow"));
  const out = join(t.dir, "sym.tar.gz");
  const names = [...Object.keys(release("1.1")), "lib/nox-mesh-host/shadow"];
  await sh(
    'cd "$1" && out=$2 && shift 2 && tar --format=gnu --no-recursion -czf "$out" -- "$@"',
    tree,
    out,
    ...names,
  );
  const bytes = await Deno.readFile(out);
  await assert.rejects(
    t.self.install(NAME, "1.1", await fileOf(bytes)),
    /shadow" is a symbolic link/,
  );
  await assertUntouched(t.prefix, before, t.state);
});

Deno.test("tarball-self: a tarball whose VERSION is not the declared version is refused", async () => {
  await using t = await installed10();
  const before = await snapshot(t.prefix);
  const bytes = await gnuTarball(t.dir, release("0.5"));
  await assert.rejects(
    t.self.install(NAME, "1.1", await fileOf(bytes)),
    /declared as nox-mesh-host 1\.1 and its lib\/nox-mesh-host\/VERSION says "0\.5"/,
  );
  await assertUntouched(t.prefix, before, t.state);
});

Deno.test("tarball-self: not gzip, cut short, or bigger than the cap once unpacked: refused", async () => {
  await assert.rejects(readTarball(new TextEncoder().encode("plain text")), /not gzip data/);
  const whole = await rawTarball(goodAnd("1.1", ["lib/nox-mesh-host/x", "0", "x"]));
  const tar = await new Response(
    new Blob([whole as BlobPart]).stream().pipeThrough(new DecompressionStream("gzip")),
  ).arrayBuffer();
  const cut = new Blob([tar.slice(0, 1100)]).stream().pipeThrough(new CompressionStream("gzip"));
  await assert.rejects(
    readTarball(new Uint8Array(await new Response(cut).arrayBuffer())),
    /cut short|without its end/,
  );
  await assert.rejects(readTarball(whole, { maxBytes: 2048 }), /more than 2048 bytes/);
});

Deno.test("tarball-self: other packages go to the machine's manager, and without one are refused", async () => {
  await using t = await installed10();
  const routed = withOwnPackage(t.self);
  assert.deepEqual(await routed.installed(NAME), { name: NAME, version: "1.0" });
  await assert.rejects(routed.installed("vim"), /package "vim": .*not one this build carries/);
  await assert.rejects(routed.install("vim", "9.1"), /package "vim"/);
});

const PARSE = { managedRoots: ["/srv"], own: { paths: [], services: [] }, origin: "test.json" };
const SHA = "a".repeat(64);

Deno.test("package: a digest is only for the host's own package at an exact version, and goes with its size", async () => {
  const doc = (r: Record<string, unknown>) =>
    JSON.stringify({ version: 1, resources: [{ type: "package", id: "p", ...r }] });
  await parseDeclaration(
    doc({ name: NAME, version: "1.1", contentSha256: SHA, size: 10 }),
    PARSE,
  );
  const refusals: [Record<string, unknown>, RegExp][] = [
    [{ name: "vim", version: "9.1", contentSha256: SHA, size: 10 }, /only the host's own/],
    [{ name: NAME, contentSha256: SHA, size: 10 }, /at an exact version/],
    [{ name: NAME, version: "1.1", contentSha256: SHA }, /go together/],
    [{ name: NAME, version: "1.1", size: 10 }, /go together/],
    [{ name: NAME, version: "1.1", contentSha256: "ABC", size: 10 }, /not a SHA-256/],
  ];
  for (const [r, message] of refusals) {
    await assert.rejects(
      parseDeclaration(doc(r), PARSE),
      (e) => e instanceof DeclarationRefused && message.test(e.message),
      JSON.stringify(r),
    );
  }
});

Deno.test("package resource on a tarball installation: the apply stages, reads back as pending, says the upgrade takes effect at the next start; a refused digest fails the resource", async () => {
  await using t = await installed10();
  const before = await snapshot(t.prefix);
  const bytes = await gnuTarball(t.dir, release("1.1"));
  const file = await fileOf(bytes);
  await using engine = await testEngine({
    fs: posixFileSystem(),
    packages: withOwnPackage(tarballSelf({ prefix: t.prefix, stateDir: t.state })),
  });
  // The bytes come from the content cache, as after a fetch from the object store.
  await new ContentCache(engine.stateDir).put(file.sha256, bytes);
  const host = [{
    type: "package",
    id: "host",
    name: NAME,
    version: "1.1",
    contentSha256: file.sha256,
    size: bytes.length,
  }];
  const report = await engine.apply(host);
  assert.equal(report.outcome, "converged", report.error);
  assert.deepEqual(outcomes(report), ["host:changed"]);
  assert.match(report.results[0].detail ?? "", /staged in .* takes effect when the launcher next/);
  assert.match(report.restart ?? "", /^"host": nox-mesh-host 1\.1 is staged/);
  assert.match(reportLine(report), /takes effect when the host is next started: "host"/);
  await assertUntouched(t.prefix, before);
  assert.deepEqual(await Deno.readFile(join(t.stage, STAGE_TARBALL)), bytes);
  // Pending, it reads back in sync: no restage, no restart asked again.
  const again = await engine.apply(host);
  assert.deepEqual(outcomes(again), ["host:unchanged"]);
  assert.equal(again.restart, undefined);
  // The launcher refused it: the installed version is seen again, and the digest is not restaged.
  await Deno.remove(t.stage, { recursive: true });
  await Deno.writeTextFile(join(t.state, REFUSED_RECORD), `${file.sha256} 1.1: not a layout\n`);
  const refused = await engine.apply(host);
  assert.equal(refused.outcome, "failed");
  assert.match(refused.error ?? "", /launcher refused the staged tarball .*: not a layout/);
  assert.equal(await Deno.lstat(t.stage).catch(() => null), null);
});
