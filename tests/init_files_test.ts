// The init files: the systemd unit passes `systemd-analyze verify`, the OpenRC
// script and every shell file are shellcheck clean, and neither encodes policy.
import assert from "node:assert/strict";
import { join } from "node:path";

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;
const UNIT = repo("packaging/arch/nox-mesh-host.service");
const OPENRC = repo("packaging/alpine/nox-mesh-host.initd");
const CONFD = repo("packaging/alpine/nox-mesh-host.confd");

async function output(cmd: string, args: string[]) {
  const o = await new Deno.Command(cmd, { args, stdin: "null" }).output();
  const d = new TextDecoder();
  return { code: o.code, text: d.decode(o.stdout) + d.decode(o.stderr) };
}

Deno.test("init files: systemd-analyze verify passes on the unit, in a root holding the launcher", async () => {
  const root = await Deno.makeTempDir({ prefix: "noxpk-unit-" });
  try {
    const units = join(root, "usr/lib/systemd/system");
    await Deno.mkdir(join(root, "usr/bin"), { recursive: true });
    await Deno.mkdir(units, { recursive: true });
    // The unit's default dependencies (sysinit.target, …) come from this machine's systemd.
    const cp = await output("cp", ["-a", "/usr/lib/systemd/system/.", units + "/"]);
    assert.equal(cp.code, 0, cp.text);
    await Deno.copyFile(UNIT, join(units, "nox-mesh-host.service"));
    await Deno.copyFile(
      repo("launcher/nox-mesh-host-launch"),
      join(root, "usr/bin/nox-mesh-host-launch"),
    );
    await Deno.chmod(join(root, "usr/bin/nox-mesh-host-launch"), 0o755);
    const r = await output("systemd-analyze", [
      "verify",
      `--root=${root}`,
      "nox-mesh-host.service",
    ]);
    assert.equal(r.code, 0, r.text);
    assert.equal(r.text, "", "no warnings either (an unknown key is only a warning)");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("init files: the unit starts the launcher, restarts it as a backstop, and holds no policy", async () => {
  const unit = await Deno.readTextFile(UNIT);
  assert.match(unit, /^ExecStart=\/usr\/bin\/nox-mesh-host-launch run$/m);
  assert.match(unit, /^Restart=always$/m);
  assert.match(unit, /^StateDirectory=mesh-host$/m);
  assert.match(unit, /^RestartPreventExitStatus=78$/m, "a halted launcher stays stopped");
  assert.match(
    unit,
    /^Environment=PATH=\/usr\/bin:\/usr\/sbin:\/bin:\/sbin$/m,
    "the PATH the set is for",
  );
  for (const policy of ["StartLimitBurst", "OnFailure", "ExecStopPost", "ExecStartPre"]) {
    assert.ok(!unit.includes(policy), `${policy} would be policy in the unit`);
  }
});

Deno.test("init files: the unit waits for network-online.target (After= and Wants=, as the record's unit); the OpenRC script uses net, never needs it", async () => {
  const unit = await Deno.readTextFile(UNIT);
  assert.match(unit, /^After=network-online\.target$/m);
  assert.match(unit, /^Wants=network-online\.target$/m);
  assert.doesNotMatch(
    unit,
    /^(Requires|BindsTo)=.*network/m,
    "a machine without network still starts it",
  );
  const script = await Deno.readTextFile(OPENRC);
  assert.match(script, /^\tuse net$/m, "OpenRC's net: started first when it is in the runlevel");
  assert.match(script, /^\tafter net firewall$/m, "and after it, whatever its outcome");
  assert.doesNotMatch(script, /^\s*need\b/m, "a machine whose networking failed still starts it");
});

Deno.test("init files: shellcheck passes on the launcher and its package kinds' includes, the OpenRC script, conf.d, the stand-in and the development shim", async () => {
  const kinds = [...Deno.readDirSync(repo("launcher/pkg"))].map((e) => e.name).sort();
  assert.ok(kinds.length >= 3 && kinds.every((k) => k.endsWith(".sh")), kinds.join(" "));
  const files = [
    repo("launcher/nox-mesh-host-launch"),
    ...kinds.map((k) => repo(`launcher/pkg/${k}`)),
    OPENRC,
    CONFD,
    repo("tests/fixtures/stand-in-host"),
    repo("packaging/dev/nox-mesh-host"),
  ];
  const r = await output("shellcheck", ["--shell=sh", ...files]);
  assert.equal(r.code, 0, r.text);
});

Deno.test("init files: the OpenRC script uses net, runs the launcher, and conf.d overrides its defaults", async () => {
  const script = await Deno.readTextFile(OPENRC);
  assert.match(script, /^#!\/sbin\/openrc-run$/m);
  assert.match(script, /depend\(\) \{\n\tuse net\n/);
  const probe = (pre: string) =>
    output("sh", [
      "-c",
      `${pre} . '${OPENRC}'; printf '%s|%s|%s' "$command" "$command_args" "$supervise_daemon_args"`,
    ]);
  const defaults = await probe("");
  assert.equal(defaults.code, 0, defaults.text);
  const [command, args, env] = defaults.text.split("|");
  assert.equal(command, "/usr/bin/nox-mesh-host-launch");
  assert.equal(args, "run");
  assert.match(env, /--env NOX_MESH_HOST_PKG=apk /);
  assert.match(env, /^--env PATH=\/usr\/bin:\/usr\/sbin:\/bin:\/sbin /, "the PATH the set is for");
  assert.match(env, /--env NOX_MESH_HOST_STATE_DIR=\/var\/lib\/mesh-host /);
  const tarball = await probe(
    "package_kind=tarball host_bin=/usr/local/bin/nox-mesh-host launcher=/usr/local/bin/nox-mesh-host-launch;",
  );
  assert.match(tarball.text, /^\/usr\/local\/bin\/nox-mesh-host-launch\|run\|/);
  assert.match(
    tarball.text,
    /NOX_MESH_HOST_PKG=tarball --env NOX_MESH_HOST_BIN=\/usr\/local\/bin\/nox-mesh-host /,
  );
  // Every commented default in conf.d matches the script's default.
  for (const [, key, value] of (await Deno.readTextFile(CONFD)).matchAll(/^#(\w+)=(.*)$/gm)) {
    assert.ok(script.includes(`: "\${${key}:=${value}}"`), `conf.d documents ${key}=${value}`);
  }
});

/** The tarball's init files, derived from the packages' (packaging/tarball/init_files.ts). */
async function tarballInitFiles(dir: string) {
  const { tarballConfd, tarballInitd, tarballUnit } = await import(
    "../packaging/tarball/init_files.ts"
  );
  const files = {
    unit: join(dir, "nox-mesh-host.service"),
    initd: join(dir, "nox-mesh-host.initd"),
    confd: join(dir, "nox-mesh-host.confd"),
  };
  await Deno.writeTextFile(files.unit, tarballUnit(await Deno.readTextFile(UNIT)));
  await Deno.writeTextFile(files.initd, tarballInitd(await Deno.readTextFile(OPENRC)));
  await Deno.writeTextFile(files.confd, tarballConfd(await Deno.readTextFile(CONFD)));
  return files;
}

Deno.test("init files (tarball): derived from the packages' for /usr/local/bin and the tarball kind; the unit verifies, the script and conf.d are shellcheck clean and agree", async () => {
  const root = await Deno.makeTempDir({ prefix: "noxpk-unit-" });
  try {
    const t = await tarballInitFiles(root);
    const unit = await Deno.readTextFile(t.unit);
    assert.match(unit, /^ExecStart=\/usr\/local\/bin\/nox-mesh-host-launch run$/m);
    assert.match(unit, /^Environment=NOX_MESH_HOST_PKG=tarball$/m);
    assert.match(unit, /^Environment=NOX_MESH_HOST_BIN=\/usr\/local\/bin\/nox-mesh-host$/m);
    assert.ok(!unit.includes("/usr/bin/nox-mesh-host"), "no package path left");
    // Everything else is the Arch unit's, line for line.
    const archLines = (await Deno.readTextFile(UNIT)).split("\n").filter((l) => !l.startsWith("#"));
    const tarLines = unit.split("\n").filter((l) => !l.startsWith("#"));
    assert.deepEqual(
      tarLines.filter((l, i) => l !== archLines[i]),
      [
        "Environment=NOX_MESH_HOST_PKG=tarball",
        "Environment=NOX_MESH_HOST_BIN=/usr/local/bin/nox-mesh-host",
        "ExecStart=/usr/local/bin/nox-mesh-host-launch run",
      ],
    );
    const units = join(root, "usr/lib/systemd/system");
    await Deno.mkdir(join(root, "usr/local/bin"), { recursive: true });
    await Deno.mkdir(units, { recursive: true });
    const cp = await output("cp", ["-a", "/usr/lib/systemd/system/.", units + "/"]);
    assert.equal(cp.code, 0, cp.text);
    await Deno.mkdir(join(root, "etc/systemd/system"), { recursive: true });
    await Deno.copyFile(t.unit, join(root, "etc/systemd/system/nox-mesh-host.service"));
    const launcher = join(root, "usr/local/bin/nox-mesh-host-launch");
    await Deno.copyFile(repo("launcher/nox-mesh-host-launch"), launcher);
    await Deno.chmod(launcher, 0o755);
    const r = await output("systemd-analyze", [
      "verify",
      `--root=${root}`,
      "nox-mesh-host.service",
    ]);
    assert.equal(r.code, 0, r.text);
    assert.equal(r.text, "");
    const sc = await output("shellcheck", ["--shell=sh", t.initd, t.confd]);
    assert.equal(sc.code, 0, sc.text);
    const script = await Deno.readTextFile(t.initd);
    const probe = await output("sh", [
      "-c",
      `. '${t.initd}'; printf '%s|%s|%s' "$command" "$command_args" "$supervise_daemon_args"`,
    ]);
    assert.match(probe.text, /^\/usr\/local\/bin\/nox-mesh-host-launch\|run\|/);
    assert.match(
      probe.text,
      /NOX_MESH_HOST_PKG=tarball --env NOX_MESH_HOST_BIN=\/usr\/local\/bin\/nox-mesh-host /,
    );
    for (const [, key, value] of (await Deno.readTextFile(t.confd)).matchAll(/^#(\w+)=(.*)$/gm)) {
      assert.ok(script.includes(`: "\${${key}:=${value}}"`), `conf.d documents ${key}=${value}`);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("init files (tarball): a package init file without the text the derivation replaces fails the build", async () => {
  const { tarballUnit, InitDerivationError } = await import("../packaging/tarball/init_files.ts");
  const unit = (await Deno.readTextFile(UNIT)).replace("NOX_MESH_HOST_PKG=pacman", "X=1");
  assert.throws(() => tarballUnit(unit), InitDerivationError);
});
