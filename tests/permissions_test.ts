// The per-OS permission files and the flags both build forms get from them.
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import {
  actionPrograms,
  loadPermissionSet,
  parsePermissionFile,
  PermissionFileError,
  permissionFlags,
  TARGET_OSES,
} from "../packaging/permissions.ts";
import { build, compileArgs, RUNTIME_FLAGS, runtimeArgs } from "../packaging/build.ts";
import { DEFAULTS } from "../src/config.ts";
import { NEEDS } from "../os/needs.ts";
import { OWN_PATHS_BY_OS } from "../packaging/own_paths_by_os.ts";
import { TEXTFILE_DIRS } from "../packaging/own_paths.ts";
import { LAUNCHER_METRICS_FILE } from "../src/launcher_files.ts";
import { ownPathInstance } from "./_own_paths.ts";

/** Exactly the programs each set may run: the adapters' tools and the profile's queries. */
const PROGRAMS = {
  arch: [
    "/usr/bin/pacman",
    "/usr/bin/systemctl",
    "/usr/bin/podman",
    "/usr/bin/docker",
    "/usr/bin/ip",
    "/usr/bin/wg",
    "/usr/bin/wireguard-go",
    "/usr/bin/nft",
    "/usr/bin/sysctl",
    // the owners of the directories above the managed roots (os/posix-fs)
    "/usr/bin/stat",
    "/usr/bin/sync",
    // users and groups (shadow's tools; busybox's on Alpine)
    "/usr/bin/useradd",
    "/usr/bin/usermod",
    "/usr/bin/userdel",
    "/usr/bin/groupadd",
    "/usr/bin/groupdel",
    "/usr/bin/mount",
    "/usr/bin/umount",
    "/usr/bin/findfs",
    "/usr/bin/cat",
  ],
  alpine: [
    "/sbin/apk",
    "/usr/sbin/apk",
    "/sbin/rc-service",
    "/usr/sbin/rc-service",
    "/sbin/rc-update",
    "/usr/sbin/rc-update",
    "/bin/rc-status",
    "/usr/bin/rc-status",
    "/sbin/ip",
    "/usr/sbin/ip",
    "/usr/bin/podman",
    "/usr/bin/docker",
    "/usr/bin/wg",
    "/usr/bin/wireguard-go",
    "/usr/sbin/nft",
    "/sbin/sysctl",
    "/usr/sbin/sysctl",
    "/bin/stat",
    "/bin/sync",
    "/usr/bin/stat",
    "/usr/bin/sync",
    // users and groups (shadow's tools; busybox's on Alpine)
    "/usr/sbin/useradd",
    "/usr/sbin/usermod",
    "/usr/sbin/userdel",
    "/usr/sbin/groupadd",
    "/usr/sbin/groupdel",
    "/usr/sbin/adduser",
    "/sbin/adduser",
    "/usr/sbin/addgroup",
    "/sbin/addgroup",
    "/usr/sbin/deluser",
    "/sbin/deluser",
    "/usr/sbin/delgroup",
    "/sbin/delgroup",
    "/usr/bin/passwd",
    "/bin/passwd",
    "/bin/mount",
    "/usr/bin/mount",
    "/bin/umount",
    "/usr/bin/umount",
    "/sbin/findfs",
    "/usr/sbin/findfs",
    "/bin/cat",
    "/usr/bin/cat",
  ],
  debian: [
    "/usr/bin/apt-get",
    "/usr/bin/dpkg-query",
    "/usr/bin/systemctl",
    "/usr/bin/podman",
    "/usr/bin/docker",
    "/usr/bin/ip",
    "/usr/bin/wg",
    "/usr/bin/wireguard-go",
    "/usr/sbin/nft",
    "/usr/sbin/sysctl",
    // the owners of the directories above the managed roots (os/posix-fs)
    "/usr/bin/stat",
    "/usr/bin/sync",
    // users and groups (shadow's tools)
    "/usr/sbin/useradd",
    "/usr/sbin/usermod",
    "/usr/sbin/userdel",
    "/usr/sbin/groupadd",
    "/usr/sbin/groupdel",
    "/usr/bin/mount",
    "/usr/bin/umount",
    "/usr/sbin/findfs",
    "/usr/bin/cat",
  ],
  tarball: [
    "/usr/bin/pacman",
    "/sbin/apk",
    "/usr/sbin/apk",
    "/usr/bin/systemctl",
    "/sbin/rc-service",
    "/usr/sbin/rc-service",
    "/sbin/rc-update",
    "/usr/sbin/rc-update",
    "/usr/bin/podman",
    "/usr/bin/docker",
    "/bin/rc-status",
    "/usr/bin/rc-status",
    "/usr/bin/ip",
    "/sbin/ip",
    "/usr/sbin/ip",
    "/usr/bin/wg",
    "/usr/bin/wireguard-go",
    "/usr/bin/nft",
    "/usr/sbin/nft",
    "/usr/bin/sysctl",
    "/sbin/sysctl",
    "/usr/sbin/sysctl",
    "/usr/bin/stat",
    "/usr/bin/sync",
    "/bin/stat",
    "/bin/sync",
    // users and groups (shadow's tools; busybox's on Alpine)
    "/usr/bin/useradd",
    "/usr/sbin/useradd",
    "/usr/bin/usermod",
    "/usr/sbin/usermod",
    "/usr/bin/userdel",
    "/usr/sbin/userdel",
    "/usr/bin/groupadd",
    "/usr/sbin/groupadd",
    "/usr/bin/groupdel",
    "/usr/sbin/groupdel",
    "/usr/sbin/adduser",
    "/sbin/adduser",
    "/usr/sbin/addgroup",
    "/sbin/addgroup",
    "/usr/sbin/deluser",
    "/sbin/deluser",
    "/usr/sbin/delgroup",
    "/sbin/delgroup",
    "/usr/bin/passwd",
    "/bin/passwd",
    "/usr/bin/mount",
    "/bin/mount",
    "/usr/bin/umount",
    "/bin/umount",
    "/usr/bin/findfs",
    "/sbin/findfs",
    "/usr/sbin/findfs",
    "/usr/bin/cat",
    "/bin/cat",
  ],
};

const OWN_INIT_FILES = {
  arch: [
    "/usr/lib/systemd/system/nox-mesh-host.service",
    "/etc/systemd/system/nox-mesh-host.service",
  ],
  debian: [
    "/usr/lib/systemd/system/nox-mesh-host.service",
    "/etc/systemd/system/nox-mesh-host.service",
  ],
  alpine: ["/etc/init.d/nox-mesh-host", "/etc/conf.d/nox-mesh-host"],
  tarball: [
    "/etc/systemd/system/nox-mesh-host.service",
    "/etc/init.d/nox-mesh-host",
    "/etc/conf.d/nox-mesh-host",
  ],
};

for (const os of TARGET_OSES) {
  Deno.test(`permissions ${os}: minimal and protecting the host's own installation`, async () => {
    const set = await loadPermissionSet(os);
    const flags = permissionFlags(set);
    assert.ok(!flags.some((f) => f === "-A" || f.startsWith("--allow-all")), "never -A");
    // The host's own program joins allow-run (it runs itself as a directory's owner).
    const run = flags.find((f) => f.startsWith("--allow-run="))!.slice("--allow-run=".length);
    assert.deepEqual(run.split(","), [...set.allowRun, set.binary]);
    // In the order of the providers' descriptors (packaging/derive_providers.ts writes them).
    assert.deepEqual(
      [...set.allowRun].sort(),
      [...PROGRAMS[os]].sort(),
      "exactly the adapter tools and profile queries",
    );
    assert.deepEqual(set.allowWrite, [...DEFAULTS.managedRoots], "writes only the managed roots");
    const launcher = set.binary + "-launch";
    const ownFiles = [set.binary, set.bundle, set.substrate, launcher];
    const covered = (own: string) =>
      set.denyWrite.some((d) => own === d || own.startsWith(d + "/"));
    // Also on the tarball, where the host stages its upgrade and the launcher unpacks it.
    const tarballFiles = os === "tarball" ? [set.deno, set.binary + "-install-init"] : [];
    for (const own of [...ownFiles, ...tarballFiles, ...OWN_INIT_FILES[os], "/etc/mesh-host"]) {
      assert.ok(covered(own), `deny-write covers ${own}`);
    }
    if (os === "tarball") {
      assert.ok(set.denyWrite.includes("/var/lib/mesh-host/upgrade-refused"), "launcher-only");
      assert.ok(
        !set.denyWrite.some((d) => "/var/lib/mesh-host/upgrade/staged".startsWith(d)),
        "the host must be able to stage an upgrade in its state directory",
      );
    }
    for (const f of ["halted", "rolled-back", "rolled-back-from", "restart-streak", "rollback"]) {
      assert.ok(set.denyWrite.includes(`/var/lib/mesh-host/${f}`), `launcher-only ${f} denied`);
    }
    for (const dir of TEXTFILE_DIRS) {
      const file = `${dir}/${LAUNCHER_METRICS_FILE}`;
      assert.ok(set.denyWrite.includes(file), `the launcher's state for node_exporter: ${file}`);
      assert.ok(!set.denyWrite.some((d) => `${dir}/nox_mesh_host.prom`.startsWith(d)));
    }
    for (const f of ["known-good", "failures"]) {
      assert.ok(
        !set.denyWrite.some((d) => `/var/lib/mesh-host/${f}`.startsWith(d)),
        `the host must be able to write ${f} (it records known-good and clears failures)`,
      );
    }
    assert.deepEqual(set.denyNet, ["0.0.0.0", "[::]"], "no listening on wildcard addresses");
    assert.deepEqual(set.allowEnv, [
      "NOX_MESH_HOST_STATE_DIR",
      "NOX_MESH_HOST_CONFIG",
      "JOURNAL_STREAM",
      "SUDO_USER",
      "LOGNAME",
      "USER",
    ]);
  });
}

for (const os of TARGET_OSES) {
  Deno.test(`permissions ${os}: every grant beyond the managed roots is the host's own or in os/needs.ts`, async () => {
    const set = await loadPermissionSet(os);
    const needs = NEEDS[os];
    const name = (p: string) => p.slice(p.lastIndexOf("/") + 1);
    for (const program of set.allowRun) {
      assert.ok(name(program) in needs.run, `${program}: os/needs.ts does not say what runs it`);
    }
    const own = ["/usr/share/nox-mesh-host", set.binary, dirname(set.bundle)];
    for (const path of set.allowRead) {
      assert.ok(
        DEFAULTS.managedRoots.includes(path as typeof DEFAULTS.managedRoots[number]) ||
          own.includes(path) || path in needs.read,
        `allow-read ${path}: neither a managed root, the host's own files, nor in os/needs.ts`,
      );
    }
    assert.deepEqual([...set.allowSys].sort(), Object.keys(needs.sys).sort(), "allow-sys");
  });
}

for (const os of TARGET_OSES) {
  Deno.test(`permissions ${os}: every own path of ${os} (packaging/own_paths_by_os.ts) in a writable root is denied`, async () => {
    const set = await loadPermissionSet(os);
    const within = (p: string, root: string) => p === root || p.startsWith(root + "/");
    const checked: string[] = [];
    for (const own of OWN_PATHS_BY_OS[os]) {
      // Deno denies paths, not patterns: a pattern is denied in the instance an installation makes.
      const path = ownPathInstance(own);
      if (!set.allowWrite.some((root) => within(path, root))) continue;
      // The state directory is the host's to write (store, known-good); its launcher-only files
      // are denied one by one (checked above).
      if (path === DEFAULTS.stateDir) continue;
      checked.push(path);
      assert.ok(
        set.denyWrite.some((d) => within(path, d)),
        `${set.source}: no deny-write covers the own path ${own} (${path})`,
      );
    }
    assert.ok(checked.length >= 5, `only ${checked.length} own paths lie in a writable root?`);
  });
}

Deno.test("permissions: a malformed permission file is refused with file and line", () => {
  const ok = "binary /b\nbundle /b.js\ndeno /d\n";
  const bad = [
    ["allow-run pacman", /not a normalised absolute path/],
    ["allow-read /etc/../root", /not a normalised absolute path/],
    ["allow-write /etc,/root", /holds a comma/],
    ["allow-everything /", /unknown kind/],
    ["allow-run /usr/bin/x extra", /expected KIND VALUE/],
  ] as const;
  for (const [line, message] of bad) {
    assert.throws(
      () => parsePermissionFile(ok + line + "\n", "arch", "t/permissions"),
      (e: unknown) =>
        e instanceof PermissionFileError && message.test(e.message) &&
        e.message.includes("t/permissions:4"),
      line,
    );
  }
  assert.throws(() => parsePermissionFile("binary /b\n", "arch", "t"), /no "bundle" line/);
});

Deno.test("permissions: the bundle's action programs join allow-run; a relative one fails the build", async () => {
  const lock = (run: string) =>
    JSON.stringify({
      version: 1,
      resources: [{
        type: "action",
        id: "a",
        run: [run],
        verify: ["/usr/bin/test", "-f", "/etc/x"],
      }],
    });
  assert.deepEqual(await actionPrograms(lock("/usr/bin/initdb"), "lock"), [
    "/usr/bin/initdb",
    "/usr/bin/test",
  ]);
  await assert.rejects(() => actionPrograms(lock("initdb"), "lock"), /absolute/);
});

Deno.test("permissions: both build forms get identical permission flags", async () => {
  const out = await Deno.makeTempDir({ prefix: "noxpk-build-" });
  try {
    const lock = join(out, "substrate.lock");
    await Deno.writeTextFile(
      lock,
      JSON.stringify({
        version: 1,
        resources: [{
          type: "action",
          id: "db",
          run: ["/usr/bin/initdb"],
          verify: ["/usr/bin/test", "-f", "/srv/db/ok"],
        }],
      }),
    );
    for (const os of ["arch", "alpine", "tarball"] as const) {
      const set = await loadPermissionSet(os);
      const r = await build({ os, form: "bundled", out: join(out, os), bundleFile: lock });
      assert.equal(r.form, "bundled");
      // The shim's argv, as sh itself splits it (the tarball's finds its runtime beside it,
      // tests/tarball_test.ts; here it is told that lies where the set says).
      const shim = await Deno.readTextFile(join(out, os, "nox-mesh-host"));
      const words = new Deno.Command("sh", {
        args: [
          "-c",
          shim.replace(/^exec /m, "printf '%s\\n' ").replace('"$@"', "")
            .replace(/^lib=.*\n(.*\n)*?fi\n/m, `lib='${dirname(set.deno)}'\n`),
          "shim",
        ],
      }).outputSync();
      const argv = new TextDecoder().decode(words.stdout).trim().split("\n");
      // The runtime (through the glibc loader it carries: Alpine, the tarball), then `run`.
      const runtime = runtimeArgs(set);
      assert.deepEqual(runtime.length, os === "arch" ? 1 : 4);
      assert.deepEqual(argv.slice(0, runtime.length + 2), [...runtime, "run", "--no-config"]);
      assert.equal(argv.at(-1), set.bundle);
      const shimFlags = argv.slice(runtime.length + 2, -1);
      // The compile command the builder runs where a denort exists.
      const compile = compileArgs(r.flags, {
        output: "/o",
        entry: "mod.ts",
        target: "x86_64-unknown-linux-gnu",
      });
      const compileFlags = compile.slice(compile.indexOf("/o") + 1, -1);
      assert.deepEqual(shimFlags, compileFlags, `${os}: shim and compile flags differ`);
      assert.deepEqual(shimFlags, [
        ...RUNTIME_FLAGS,
        ...permissionFlags(set, ["/usr/bin/initdb", "/usr/bin/test"]),
      ]);
      assert.ok(
        shimFlags.some((f) =>
          f.startsWith("--allow-run=") && f.endsWith(",/usr/bin/initdb,/usr/bin/test")
        ),
      );
    }
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("permissions: without a denort, build auto falls back to the bundled form (this machine is offline)", async () => {
  const out = await Deno.makeTempDir({ prefix: "noxpk-build-" });
  try {
    if (Deno.env.get("DENORT_BIN")) {
      const r = await build({ os: "arch", out: join(out, "arch") });
      assert.equal(r.form, "compiled", "DENORT_BIN is set, so the compiled form is built");
      return;
    }
    const r = await build({ os: "arch", out: join(out, "arch") });
    assert.equal(r.form, "bundled");
    assert.match(r.note, /no denort/);
    const alpine = await build({ os: "alpine", out: join(out, "alpine") });
    assert.equal(alpine.note, "bundled (Alpine: always)");
    await assert.rejects(
      build({ os: "alpine", form: "compiled", out: join(out, "x") }),
      /no compiled form/,
    );
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("build: the program carries its OS's own paths (packaging/<os>/own_paths.ts) and no other OS's", async () => {
  const out = await Deno.makeTempDir({ prefix: "noxpk-own-" });
  try {
    for (const os of ["alpine", "arch"] as const) {
      const built = await build({ os, form: "bundled", out: join(out, os) });
      const program = (await Promise.all(
        built.bundle!.map((name) => Deno.readTextFile(join(out, os, name))),
      )).join("\n");
      // Strings that only the own-path lists hold: OpenRC's rc.conf.d, systemd's system.control.
      const openrc = program.includes('"/etc/rc.conf.d"');
      const systemd = program.includes('"/etc/systemd/system.control/nox-mesh-host.service.d"');
      assert.deepEqual(
        { openrc, systemd },
        { openrc: os === "alpine", systemd: os === "arch" },
        os,
      );
      for (const own of OWN_PATHS_BY_OS[os]) {
        assert.ok(program.includes(JSON.stringify(own)), `${os}: the program lacks ${own}`);
      }
    }
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});
