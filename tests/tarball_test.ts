// The tarball as a release: what it holds and how (owners, modes, files only), unpacked with
// the README's `tar -xz -C /usr/local` on a machine with no deno at all (its own runtime
// runs it), reproducible byte for byte, and its install-init script run as a program
// against scratch roots.
import assert from "node:assert/strict";
import { join } from "node:path";
import { build, type BuildResult, RUNTIME_FLAGS } from "../packaging/build.ts";
import { packageTarball, tarballEntries } from "../packaging/make_package.ts";
import { loadPermissionSet } from "../packaging/permissions.ts";
import { runtimePins } from "../packaging/tarball/runtime.ts";
import { VERSION } from "../src/version.ts";
import { readTarball } from "../os/tarball-self/_ustar.ts";
import { hideDeno, makeSandbox, removeSandbox, runInSandbox } from "./_sandbox.ts";

const INIT_FILES = [
  "lib/nox-mesh-host/init/nox-mesh-host.confd",
  "lib/nox-mesh-host/init/nox-mesh-host.initd",
  "lib/nox-mesh-host/init/nox-mesh-host.service",
];

/** Every entry of the bundled-form tarball, with its mode, relative to /usr/local. */
const ENTRIES: Record<string, string> = {
  "bin/nox-mesh-host": "-rwxr-xr-x",
  "bin/nox-mesh-host-install-init": "-rwxr-xr-x",
  "bin/nox-mesh-host-launch": "-rwxr-xr-x",
  "lib/nox-mesh-host/VERSION": "-rw-r--r--",
  "lib/nox-mesh-host/deno": "-rwxr-xr-x",
  "lib/nox-mesh-host/deno.LICENSE": "-rw-r--r--",
  // The glibc loader and libraries that start the runtime (on musl too), from Debian's
  // libc6 and libgcc-s1, their licences and SOURCES beside them.
  "lib/nox-mesh-host/glibc/LICENSE.glibc": "-rw-r--r--",
  "lib/nox-mesh-host/glibc/LICENSE.libgcc": "-rw-r--r--",
  "lib/nox-mesh-host/glibc/SOURCES": "-rw-r--r--",
  "lib/nox-mesh-host/glibc/ld-linux-x86-64.so.2": "-rwxr-xr-x",
  "lib/nox-mesh-host/glibc/libc.so.6": "-rw-r--r--",
  "lib/nox-mesh-host/glibc/libdl.so.2": "-rw-r--r--",
  "lib/nox-mesh-host/glibc/libgcc_s.so.1": "-rw-r--r--",
  "lib/nox-mesh-host/glibc/libm.so.6": "-rw-r--r--",
  "lib/nox-mesh-host/glibc/libpthread.so.0": "-rw-r--r--",
  "lib/nox-mesh-host/glibc/librt.so.1": "-rw-r--r--",
  "lib/nox-mesh-host/init/nox-mesh-host.confd": "-rw-r--r--",
  "lib/nox-mesh-host/init/nox-mesh-host.initd": "-rwxr-xr-x",
  "lib/nox-mesh-host/init/nox-mesh-host.service": "-rw-r--r--",
  // The launcher's tarball path, which it sources.
  "lib/nox-mesh-host/launch/tarball.sh": "-rw-r--r--",
  "lib/nox-mesh-host/nox-mesh-host.js": "-rw-r--r--",
  "share/nox-mesh-host/LICENSE": "-rw-r--r--",
  "share/nox-mesh-host/substrate.lock": "-rw-r--r--",
};

/**
 * ENTRIES and the bundle's other parts (the code its commands load when they run them,
 * named by digests: build.json's `bundle`), all 0644 beside nox-mesh-host.js.
 */
function entriesOf(b: BuildResult): Record<string, string> {
  const parts = (b.bundle ?? []).filter((name) => name !== "nox-mesh-host.js");
  assert.ok(parts.length > 0, "the bundled form has parts beside its entry");
  const entries = { ...ENTRIES };
  for (const name of parts) entries[`lib/nox-mesh-host/${name}`] = "-rw-r--r--";
  return Object.fromEntries(Object.entries(entries).sort(([a], [b]) => a < b ? -1 : 1));
}

async function sh(script: string, env?: Record<string, string>) {
  const out = await new Deno.Command("sh", { args: ["-c", script], env, stdin: "null" }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

async function sha256(path: string): Promise<string> {
  const hash = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** One build + tarball per test file (the runtime is fetched once into dist/runtime). */
let made: Promise<{ dir: string; b: BuildResult; tarball: string }> | undefined;
function tarball() {
  made ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "noxpk-tarball-" });
    const b = await build({ os: "tarball", form: "bundled", out: join(dir, "tarball") });
    return { dir, b, tarball: await packageTarball(b, "x86_64") };
  })();
  return made;
}

Deno.test("tarball: files only (no directory entries), owned 0:0, the modes a release has, the runtime and both licences inside", async () => {
  const { tarball: file, b } = await tarball();
  assert.equal(file.split("/").pop(), `nox-mesh-host-${VERSION}-x86_64.tar.gz`);
  assert.equal(b.runtime, (await runtimePins()).version);
  const r = await sh(`tar -tvzf '${file}'`);
  assert.equal(r.code, 0, r.stderr);
  const seen: Record<string, string> = {};
  for (const line of r.stdout.trim().split("\n")) {
    const [mode, owner, , , , name] = line.split(/\s+/);
    assert.equal(owner, "0/0", line);
    seen[name] = mode;
  }
  assert.deepEqual(seen, entriesOf(b));
  // gzip -n: no file name and no time in the gzip header (bytes 4-7 are the mtime).
  const head = (await Deno.readFile(file)).subarray(0, 10);
  assert.equal(head[3] & 0x08, 0, "no original file name stored");
  assert.deepEqual([...head.subarray(4, 8)], [0, 0, 0, 0], "no gzip timestamp");
  const licence = await sh(`tar -xzOf '${file}' lib/nox-mesh-host/deno.LICENSE`);
  assert.match(licence.stdout, /MIT License/);
  assert.match(licence.stdout, /the Deno authors/);
  // The installed version, as os/tarball-self reads it back.
  const glibc = await sh(`tar -xzOf '${file}' lib/nox-mesh-host/glibc/LICENSE.glibc`);
  assert.match(glibc.stdout, /GNU Lesser General Public\s+License/);
  const sources = await sh(`tar -xzOf '${file}' lib/nox-mesh-host/glibc/SOURCES`);
  assert.match(sources.stdout, /^ {2}libc6 \S+: ld-linux-x86-64\.so\.2 libc\.so\.6 /m);
  assert.match(sources.stdout, /apt-get source glibc=/);
  const stamp = await sh(`tar -xzOf '${file}' lib/nox-mesh-host/VERSION`);
  assert.equal(stamp.stdout, `${VERSION}\n`);
  // The adapter's own strict reader accepts the real release whole.
  const entries = await readTarball(await Deno.readFile(file));
  assert.deepEqual(entries.map((e) => e.path).sort(), Object.keys(entriesOf(b)));
});

Deno.test("tarball: unpacked with `tar -xz -C /usr/local` where no deno exists, it runs on the runtime it carries and applies the bundle it carries", async () => {
  const { tarball: file } = await tarball();
  const s = await makeSandbox();
  try {
    // No deno on this "machine": whiteouts hide the system's (wherever npm put it, and the
    // npm package it points into) in the sandbox's overlays.
    await hideDeno(s);
    const script = `set -eu
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
      if command -v deno; then echo "a deno is on PATH" >&2; exit 1; fi
      before=$(stat -c %a:%U /usr/local/bin)
      tar -xz -C /usr/local < '${file}'
      test "$(stat -c %a:%U /usr/local/bin)" = "$before"
      if command -v deno; then echo "the tarball put a deno on PATH" >&2; exit 1; fi
      nox-mesh-host version --json
      nox-mesh-host apply --bundle --json >/dev/null
      nox-mesh-host status --json`;
    const r = await runInSandbox(s, ["sh", "-c", script]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const [version, status] = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(version.version, VERSION);
    assert.equal(version.form, "bundled");
    assert.equal(version.deno, (await runtimePins()).version);
    // Its default bundle is the one it carries (the build embeds the path).
    assert.equal(status.declaration?.source, "bundle", JSON.stringify(status));
    assert.equal(status.declaration?.origin, "/usr/local/share/nox-mesh-host/substrate.lock");
  } finally {
    await removeSandbox(s);
  }
});

Deno.test("tarball: the shim finds the runtime beside it, not on PATH, and stops with one sentence without it", async () => {
  const { b } = await tarball();
  const set = await loadPermissionSet("tarball");
  const shim = await Deno.readTextFile(join(b.dir, "nox-mesh-host"));
  assert.ok(!/^[^#]*\bdeno run\b/m.test(shim), "no bare `deno` (PATH) in the shim");
  assert.ok(!shim.includes("/usr/bin/deno"));
  const dir = await Deno.makeTempDir({ prefix: "noxpk-shim-" });
  try {
    await Deno.mkdir(join(dir, "bin"));
    await Deno.writeTextFile(join(dir, "bin", "nox-mesh-host"), shim, { mode: 0o755 });
    await Deno.chmod(join(dir, "bin", "nox-mesh-host"), 0o755);
    // With a deno on PATH but none beside the shim: refused, not run on PATH's.
    const r = await sh(`'${dir}/bin/nox-mesh-host' version`, { PATH: Deno.env.get("PATH")! });
    assert.equal(r.code, 127, r.stdout);
    const missing =
      /no Deno runtime \(or its loader\) at .*\/bin\/\.\.\/lib\/nox-mesh-host\/: unpack/;
    assert.match(r.stderr, missing);
    // Beside it, a runtime and a loader that show their argv: the loader is run with its
    // libraries' directory, then the runtime with the set's flags and bundle.
    const loader = b.glibc!.loader;
    await Deno.mkdir(join(dir, "lib", "nox-mesh-host", "glibc"), { recursive: true });
    for (const fake of ["deno", `glibc/${loader}`]) {
      await Deno.writeTextFile(
        join(dir, "lib", "nox-mesh-host", fake),
        '#!/bin/sh\nprintf \'%s\\n\' "$0" "$@"\n',
        { mode: 0o755 },
      );
      await Deno.chmod(join(dir, "lib", "nox-mesh-host", fake), 0o755);
      // Either one alone is not enough.
      const alone = await sh(`'${dir}/bin/nox-mesh-host' version`, {});
      assert.equal(alone.code, fake === "deno" ? 127 : 0, alone.stderr);
    }
    const ran = await sh(`cd '${dir}' && bin/nox-mesh-host version`, { CDPATH: "/" });
    assert.equal(ran.code, 0, ran.stderr);
    const argv = ran.stdout.trim().split("\n");
    const lib = join(await Deno.realPath(dir), "lib", "nox-mesh-host");
    const start = b.command.indexOf("run");
    assert.deepEqual(argv, [
      join(lib, "glibc", loader),
      "--library-path",
      join(lib, "glibc"),
      join(lib, "deno"),
      ...b.command.slice(start, -1),
      join(lib, "nox-mesh-host.js"),
      "version",
    ]);
    assert.deepEqual(b.command, [
      `${set.glibc}/${loader}`,
      "--library-path",
      set.glibc,
      set.deno,
      "run",
      "--no-config",
      ...RUNTIME_FLAGS,
      ...b.flags,
      set.bundle,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tarball: a compiled build's tarball carries the program alone: no runtime, no bundle", async () => {
  // No denort can be had here, so the compiled program itself cannot be built: this checks
  // what the packaging takes from a build of that form (its program file is the shim here).
  const { b } = await tarball();
  const entries = Object.keys(await tarballEntries({ ...b, form: "compiled", runtime: undefined }));
  assert.deepEqual(
    entries.sort(),
    Object.keys(ENTRIES).filter((e) =>
      !/\/(deno|deno\.LICENSE|nox-mesh-host\.js)$/.test(e) && !e.includes("/glibc/")
    ),
  );
  await assert.rejects(
    tarballEntries({ ...b, runtime: undefined }),
    /carries no Deno runtime/,
    "a bundled build without its runtime is never packed",
  );
  await assert.rejects(
    tarballEntries({ ...b, glibc: undefined }),
    /carries no glibc loader for its runtime/,
    "nor one without the loader that starts it",
  );
});

Deno.test("tarball: reproducible: two builds of the same checkout give the same bytes", async () => {
  const { dir, tarball: first } = await tarball();
  const b = await build({ os: "tarball", form: "bundled", out: join(dir, "again") });
  const second = await packageTarball(b, "x86_64");
  assert.notEqual(first, second);
  assert.equal(await sha256(second), await sha256(first));
  assert.equal(
    await Deno.readTextFile(join(dir, "again", "SHA256SUMS")),
    await Deno.readTextFile(join(dir, "tarball", "SHA256SUMS")),
  );
});

/** Unpacks the tarball into a scratch prefix; returns the install-init script in it. */
async function unpackedInstallInit(dir: string): Promise<string> {
  const { tarball: file } = await tarball();
  const prefix = join(dir, "prefix");
  await Deno.mkdir(prefix, { recursive: true });
  const r = await sh(
    `tar -xz -C '${prefix}' -f '${file}' bin/nox-mesh-host-install-init ${INIT_FILES.join(" ")}`,
  );
  assert.equal(r.code, 0, r.stderr);
  return join(prefix, "bin", "nox-mesh-host-install-init");
}

Deno.test("install-init: under systemd it installs the tarball's unit and enables it (systemctl --root), started never in a root", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-init-" });
  try {
    const script = await unpackedInstallInit(dir);
    const root = join(dir, "root");
    await Deno.mkdir(join(root, "run", "systemd", "system"), { recursive: true });
    const r = await sh(`'${script}' --root '${root}'`);
    assert.equal(r.code, 0, r.stderr);
    const unit = await Deno.readTextFile(join(root, "etc/systemd/system/nox-mesh-host.service"));
    assert.match(unit, /^ExecStart=\/usr\/local\/bin\/nox-mesh-host-launch run$/m);
    assert.match(unit, /^Environment=NOX_MESH_HOST_PKG=tarball$/m);
    assert.match(unit, /^Environment=NOX_MESH_HOST_BIN=\/usr\/local\/bin\/nox-mesh-host$/m);
    assert.equal(
      await Deno.readLink(
        join(root, "etc/systemd/system/multi-user.target.wants/nox-mesh-host.service"),
      ),
      "/etc/systemd/system/nox-mesh-host.service",
    );
    assert.match(r.stderr, /enabled nox-mesh-host under systemd; not started/);
    // A link planted where the unit goes is replaced, never written through.
    await Deno.remove(join(root, "etc/systemd/system/nox-mesh-host.service"));
    await Deno.writeTextFile(join(dir, "victim"), "untouched\n");
    await Deno.symlink(join(dir, "victim"), join(root, "etc/systemd/system/nox-mesh-host.service"));
    const again = await sh(`'${script}' --root '${root}'`);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(await Deno.readTextFile(join(dir, "victim")), "untouched\n");
    assert.ok((await Deno.lstat(join(root, "etc/systemd/system/nox-mesh-host.service"))).isFile);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("install-init: under OpenRC it installs the script, keeps an existing conf.d, and adds it to the default runlevel", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-init-" });
  try {
    const script = await unpackedInstallInit(dir);
    const root = join(dir, "root");
    await Deno.mkdir(join(root, "run", "openrc"), { recursive: true });
    await Deno.writeTextFile(join(root, "run", "openrc", "softlevel"), "default\n");
    const r = await sh(`'${script}' --root '${root}'`);
    assert.equal(r.code, 0, r.stderr);
    const initd = join(root, "etc/init.d/nox-mesh-host");
    assert.equal((await Deno.stat(initd)).mode! & 0o777, 0o755);
    assert.match(await Deno.readTextFile(initd), /^: "\$\{package_kind:=tarball\}"$/m);
    assert.match(
      await Deno.readTextFile(initd),
      /launcher:=\/usr\/local\/bin\/nox-mesh-host-launch/,
    );
    assert.match(
      await Deno.readTextFile(join(root, "etc/conf.d/nox-mesh-host")),
      /^#package_kind=tarball$/m,
    );
    assert.equal(
      await Deno.readLink(join(root, "etc/runlevels/default/nox-mesh-host")),
      "/etc/init.d/nox-mesh-host",
    );
    // The administrator's conf.d is kept on a second run.
    await Deno.writeTextFile(join(root, "etc/conf.d/nox-mesh-host"), "max_failures=5\n");
    const again = await sh(`'${script}' --root '${root}'`);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /kept .*\/etc\/conf\.d\/nox-mesh-host \(yours/);
    assert.equal(
      await Deno.readTextFile(join(root, "etc/conf.d/nox-mesh-host")),
      "max_failures=5\n",
    );
    // --init wins over what is found.
    const root2 = join(dir, "root2");
    await Deno.mkdir(join(root2, "run", "openrc"), { recursive: true });
    await Deno.writeTextFile(join(root2, "run", "openrc", "softlevel"), "default\n");
    const forced = await sh(`'${script}' --init systemd --root '${root2}'`);
    assert.equal(forced.code, 0, forced.stderr);
    await Deno.stat(join(root2, "etc/systemd/system/nox-mesh-host.service"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("install-init: stops with one sentence when it finds no init, no init files, or a bad argument", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-init-" });
  try {
    const script = await unpackedInstallInit(dir);
    const root = join(dir, "root");
    await Deno.mkdir(root);
    const none = await sh(`'${script}' --root '${root}'`);
    assert.equal(none.code, 1);
    assert.match(
      none.stderr,
      /found neither systemd .* nor OpenRC .* running; name it with --init/,
    );
    assert.deepEqual([...Deno.readDirSync(root)], [], "nothing written");
    for (
      const [args, code, said] of [
        ["--init upstart", 64, /--init is 'upstart'/],
        ["--root relative", 64, /--root must be an absolute path/],
        ["--bogus", 64, /unknown argument '--bogus'/],
        [`--root '${root}/absent'`, 66, /is not a directory/],
      ] as const
    ) {
      const r = await sh(`'${script}' ${args}`);
      assert.equal(r.code, code, `${args}: ${r.stderr}`);
      assert.match(r.stderr, said);
      assert.equal(r.stderr.trim().split("\n").length, 1, `one sentence: ${r.stderr}`);
    }
    // Alone, away from the tarball's lib/: it says what is missing.
    await Deno.copyFile(script, join(dir, "alone"));
    await Deno.chmod(join(dir, "alone"), 0o755);
    const alone = await sh(`'${join(dir, "alone")}' --root '${root}' --init openrc`);
    assert.equal(alone.code, 66);
    assert.match(alone.stderr, /no init files beside this script .*: unpack the whole tarball/);
    const check = await sh(`shellcheck --shell=sh '${script}'`);
    assert.equal(check.code, 0, check.stdout);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tarball: (the shared build's directory is removed)", async () => {
  if (!made) return;
  const { dir } = await made;
  await Deno.remove(dir, { recursive: true });
});

Deno.test("config: the installation's bundle (the build embeds it) is the default; host.json's bundle still wins", async () => {
  const { loadConfig, DEFAULTS } = await import("../src/config.ts");
  const dir = await Deno.makeTempDir({ prefix: "noxpk-config-" });
  try {
    const empty = join(dir, "empty.json");
    await Deno.writeTextFile(empty, "{}\n");
    const tarballBundle = "/usr/local/share/nox-mesh-host/substrate.lock";
    const env = () => undefined;
    assert.equal((await loadConfig({ env, configPath: empty })).bundlePath, DEFAULTS.bundlePath);
    const installed = await loadConfig({ bundlePath: tarballBundle, env, configPath: empty });
    assert.equal(installed.bundlePath, tarballBundle);
    assert.ok(installed.own.paths.includes("/usr/local/share/nox-mesh-host"), "its dir is own");
    const file = join(dir, "host.json");
    await Deno.writeTextFile(file, JSON.stringify({ bundle: "/srv/b/substrate.lock" }));
    assert.equal(
      (await loadConfig({ bundlePath: tarballBundle, env, configPath: file })).bundlePath,
      "/srv/b/substrate.lock",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
