// The mount providers' own parts, against the real programs: the kernel's mount table
// parsed as the kernel writes it (mounts made in a private mount namespace this test
// creates, with `unshare -m`: the machine's own mounts are never touched), systemd's path
// escaping against `systemd-escape`, the OpenRC names, and the boot records they write
// (the OpenRC script read by sh, the unit by `systemd-analyze verify`).
import assert from "node:assert/strict";
import { mountCommands, parseMountInfo, remountCommand, unescapeOctal } from "../../os/_mount.ts";
import { mountUnit, mountUnitName, systemdPathName } from "../../os/systemd-mount/mod.ts";
import { mountScript, openrcMountName } from "../../os/openrc-mount/mod.ts";
import { readRecord } from "../../os/_boot_record.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import type { MountRequest } from "../../src/providers.ts";
import { providersFor } from "../../os/mod.ts";
import { PROVIDERS } from "../../os/provider_list.ts";
import { selects } from "../../os/provider.ts";
import type { Capability, Profile } from "../../src/profile.ts";

const IS_ROOT = Deno.uid() === 0;

async function sh(script: string, args: string[] = []) {
  const out = await new Deno.Command("sh", { args: ["-c", script, "sh", ...args] }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

Deno.test({
  name: IS_ROOT
    ? "mountinfo: escaped paths, optional fields and super options, as the kernel writes them"
    : "mountinfo: as the kernel writes it (skipped: mounting needs root)",
  ignore: !IS_ROOT,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "noxmnt-info-" });
    try {
      // Names the kernel escapes: space, tab, backslash, # (and a newline), and UTF-8.
      const names = ["a b", "t\tab", "back\\slash", "hash#x", "new\nline", "é ü"];
      for (const name of names) await Deno.mkdir(`${dir}/${name}`);
      await Deno.mkdir(`${dir}/shared`);
      await Deno.mkdir(`${dir}/slave`);
      // In a mount namespace of its own, private: nothing reaches the machine's table.
      const r = await new Deno.Command("unshare", {
        args: [
          "-m",
          "--propagation",
          "private",
          "sh",
          "-c",
          `set -e
          for d in "a b" "$(printf 't\\tab')" 'back\\slash' 'hash#x' "$(printf 'new\\nline')" 'é ü'; do
            mount -t tmpfs -o size=1m,nosuid,noexec "src#1" "$1/$d"
          done
          mount -t tmpfs -o mode=0755 shared "$1/shared"
          mount --make-shared "$1/shared"
          mount --bind "$1/shared" "$1/slave"
          mount --make-slave "$1/slave"
          cat /proc/self/mountinfo`,
          "sh",
          dir,
        ],
      }).output();
      assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
      const text = new TextDecoder().decode(r.stdout);
      assert.match(text, /a\\040b/, "the kernel escapes a space as \\040");
      const entries = parseMountInfo(text);
      for (const name of names) {
        const e = entries.find((m) => m.target === `${dir}/${name}`);
        assert.ok(e, `${JSON.stringify(name)} read back: ${text}`);
        assert.equal(e.source, "src#1");
        assert.equal(e.fstype, "tmpfs");
        assert.equal(e.root, "/");
        assert.ok(e.options.includes("nosuid") && e.options.includes("noexec"), e.options.join());
        assert.ok(e.superOptions.includes("size=1024k"), e.superOptions.join());
      }
      const shared = entries.find((m) => m.target === `${dir}/shared`)!;
      const slave = entries.find((m) => m.target === `${dir}/slave`)!;
      assert.match(shared.optional.join(" "), /^shared:\d+$/);
      assert.match(slave.optional.join(" "), /^master:\d+$/);
      assert.equal(slave.device, shared.device, "a bind shows the same filesystem");
      assert.ok(slave.superOptions.includes("mode=755"));
      assert.ok(entries.every((e) => Number.isSafeInteger(e.id) && /^\d+:\d+$/.test(e.device)));
      // Nothing of this stayed outside the namespace.
      const own = parseMountInfo(await Deno.readTextFile("/proc/self/mountinfo"));
      assert.ok(!own.some((e) => e.target.startsWith(dir)), "the machine's own table untouched");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("mountinfo: lines of another form are refused, not guessed at", () => {
  assert.throws(() => parseMountInfo("36 35 98:0 / /srv rw - ext4\n"), /cannot read/);
  assert.throws(() => parseMountInfo("36 35 x / /srv rw - ext4 /dev/a rw\n"), /cannot read/);
  assert.throws(
    () => parseMountInfo("36 35 1:2 / /srv rw shared:1 ext4 /dev/a rw\n"),
    /cannot read/,
  );
  // Several optional fields, and an empty source (a mount given "").
  const [e] = parseMountInfo("36 35 1:2 /x /srv rw,noatime shared:1 master:2 - tmpfs  rw\n");
  assert.deepEqual(e.optional, ["shared:1", "master:2"]);
  assert.equal(e.source, "");
  assert.deepEqual(e.superOptions, ["rw"]);
  assert.equal(unescapeOctal("a\\040b\\134c\\011d\\043\\303\\251"), "a b\\c\td#é");
  assert.equal(unescapeOctal("a\\04b\\"), "a\\04b\\", "an incomplete escape is kept as it is");
});

Deno.test("systemd unit names: the same as systemd-escape --path gives", async () => {
  const paths = [
    "/srv/data",
    "/srv/my-data",
    "/srv/a b",
    "/srv/.hidden/x",
    "/srv/x.y/z_w:v",
    "/srv/é/ü",
    "/srv/back\\slash",
    "/srv//double/",
    "/srv/-lead",
    "/",
  ];
  for (const path of paths) {
    const r = await new Deno.Command("systemd-escape", {
      args: ["--path", "--suffix=mount", "--", path],
    }).output();
    const want = new TextDecoder().decode(r.stdout).trim();
    assert.equal(mountUnitName(path), want, path);
  }
  assert.equal(systemdPathName("/srv/my-data"), "srv-my\\x2ddata");
  assert.throws(() => mountUnitName(`/srv/${"é".repeat(100)}`), /more than 255/);
});

Deno.test("OpenRC script names: one per path, and nothing OpenRC reads specially", () => {
  const paths = [
    "/srv/a-b",
    "/srv/a/b",
    "/srv/a_2db",
    "/srv/a.b",
    "/srv/a_b",
    "/srv/é",
    "/srv/a:b",
  ];
  const names = paths.map(openrcMountName);
  assert.equal(new Set(names).size, paths.length, names.join(" "));
  for (const name of names) assert.match(name, /^nox-mount-[A-Za-z0-9_-]+$/);
  assert.equal(openrcMountName("/srv/my-data"), "nox-mount-srv-my_2ddata");
  // The name of no service OpenRC ships: "mount-ro" would be the path /ro without the prefix.
  assert.equal(openrcMountName("/ro"), "nox-mount-ro");
});

const TMPFS: MountRequest = {
  source: "tmpfs",
  target: "/srv/cache",
  fstype: "tmpfs",
  flags: ["rw", "nosuid", "nodev", "exec"],
  data: ["size=64m", "mode=0755"],
};
const BIND: MountRequest = {
  source: "/srv/disk/www",
  target: "/srv/www",
  fstype: "bind",
  flags: ["ro", "nosuid", "nodev", "noexec"],
  data: [],
};

Deno.test("mount commands: -i (no helper), every flag said, a bind's flags set by a remount", () => {
  assert.deepEqual(mountCommands(TMPFS), [
    [
      "mount",
      "-i",
      "-t",
      "tmpfs",
      "-o",
      "rw,nosuid,nodev,exec,size=64m,mode=0755",
      "--",
      "tmpfs",
      "/srv/cache",
    ],
  ]);
  assert.deepEqual(mountCommands(BIND), [
    ["mount", "-i", "-o", "bind", "--", "/srv/disk/www", "/srv/www"],
    ["mount", "-i", "-o", "remount,bind,ro,nosuid,nodev,noexec", "--", "/srv/disk/www", "/srv/www"],
  ]);
  assert.deepEqual(remountCommand(TMPFS).slice(3), [
    "remount,rw,nosuid,nodev,exec,size=64m,mode=0755",
    "--",
    "tmpfs",
    "/srv/cache",
  ]);
  assert.throws(() => mountCommands({ ...TMPFS, source: "-oremount" }), /looks like an option/);
  assert.throws(() => mountCommands({ ...TMPFS, data: ["a,b"] }), /cannot take/);
});

Deno.test("systemd unit: marker first, UUID= named by its udev link, a bind as type none", async () => {
  const unit = mountUnit({ ...TMPFS, source: "UUID=3b1d-77", fstype: "ext4", data: [] });
  assert.match(unit, /^# Written by nox-mesh-host for a mount resource/);
  assert.match(unit, /^What=\/dev\/disk\/by-uuid\/3b1d-77$/m);
  assert.match(unit, /^Where=\/srv\/cache$/m);
  assert.match(unit, /^WantedBy=local-fs.target$/m, "wanted, never required: boot goes on");
  const bind = mountUnit(BIND);
  assert.match(bind, /^Type=none$/m);
  assert.match(bind, /^Options=bind,ro,nosuid,nodev,noexec$/m);
  assert.match(mountUnit({ ...BIND, source: "LABEL=data" }), /^What=\/dev\/disk\/by-label\/data$/m);
  assert.throws(() => mountUnit({ ...TMPFS, target: "/srv/a b" }), /cannot carry/);
  // systemd reads it as a mount unit of that name (and says nothing about its syntax).
  const dir = await Deno.makeTempDir({ prefix: "noxmnt-unit-" });
  try {
    const file = `${dir}/${mountUnitName(TMPFS.target)}`;
    await Deno.writeTextFile(file, mountUnit(TMPFS));
    const r = await new Deno.Command("systemd-analyze", {
      args: ["verify", "--man=no", file],
    }).output();
    const said = new TextDecoder().decode(r.stderr);
    assert.doesNotMatch(said, /Unknown (key|section)|Failed to parse|Invalid|doesn't match/i, said);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("OpenRC script: sh reads it, it runs the host's own commands, after what holds it", async () => {
  const script = mountScript(BIND);
  assert.match(script, /^#!\/sbin\/openrc-run\n# Written by nox-mesh-host/);
  assert.match(
    script,
    /after localmount nox-mount-srv nox-mount-srv-disk nox-mount-srv-disk-www$/m,
  );
  assert.ok(
    script.includes(
      "'mount' '-i' '-o' 'bind' '--' '/srv/disk/www' '/srv/www' && \\\n\t\t" +
        "'mount' '-i' '-o' 'remount,bind,ro,nosuid,nodev,noexec' '--' '/srv/disk/www' '/srv/www'",
    ),
    script,
  );
  const dir = await Deno.makeTempDir({ prefix: "noxmnt-script-" });
  try {
    await Deno.writeTextFile(`${dir}/s`, mountScript(TMPFS));
    const r = await sh('sh -n "$1"', [`${dir}/s`]);
    assert.equal(r.code, 0, r.stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mount providers: the init that answered chooses them; no init that works, no mounts", () => {
  const cap = (state: Capability["state"], provider?: string): Capability => ({
    state,
    ...(provider ? { provider } : {}),
    evidence: [],
  });
  const profile = (init: Capability): Profile => ({
    detectedAt: "",
    os: { id: "alpine", like: [] },
    architecture: "x86_64",
    capabilities: {
      init,
      packages: cap("absent"),
      containers: cap("absent"),
      graphical: cap("absent"),
      network: cap("absent"),
      wireguard: cap("absent"),
      nftables: cap("absent"),
      accounts: cap("absent"),
    },
  });
  const carried = (build: "arch" | "alpine" | "tarball") =>
    PROVIDERS.filter((p) => selects(p.builds, build));
  const tarball = carried("tarball");
  assert.equal(
    providersFor(profile(cap("working", "systemd")), { from: tarball }).mounts?.name,
    "systemd",
  );
  assert.equal(
    providersFor(profile(cap("working", "openrc")), { from: tarball }).mounts?.name,
    "openrc",
  );
  assert.equal(
    providersFor(profile(cap("present", "systemd")), { from: tarball }).mounts,
    undefined,
  );
  // Each OS build carries its own init's alone.
  assert.equal(
    providersFor(profile(cap("working", "openrc")), { from: carried("arch") }).mounts,
    undefined,
  );
  assert.equal(
    providersFor(profile(cap("working", "systemd")), { from: carried("alpine") }).mounts,
    undefined,
  );
});

Deno.test("boot records: the host's, by its marker (first line, or second after #!); others' are not", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxmnt-record-" });
  try {
    const fs = posixFileSystem();
    const write = (name: string, text: string) => Deno.writeTextFile(`${dir}/${name}`, text);
    await write("unit", mountUnit(TMPFS));
    await write("script", mountScript(TMPFS));
    await write("theirs", "[Mount]\nWhat=tmpfs\n");
    await write("theirs-script", "#!/sbin/openrc-run\ndescription=x\n");
    await write("late", `#!/bin/sh\n\n${mountScript(TMPFS)}`);
    await Deno.symlink("/dev/null", `${dir}/masked`);
    assert.equal((await readRecord(fs, `${dir}/unit`)).state, "ours");
    assert.equal((await readRecord(fs, `${dir}/script`)).state, "ours");
    assert.equal((await readRecord(fs, `${dir}/none`)).state, "absent");
    for (const name of ["theirs", "theirs-script", "late", "masked"]) {
      assert.equal((await readRecord(fs, `${dir}/${name}`)).state, "foreign", name);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
