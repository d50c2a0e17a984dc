// The BUILT host and a probe built from the SAME permission file, installed at
// their real paths inside a sandbox (private mount namespace, overlay layers):
// the Deno runtime itself refuses what the set does not allow.
import assert from "node:assert/strict";
import type { TargetOs } from "../packaging/permissions.ts";
import { installBuilt } from "./_packaged.ts";
import { makeSandbox, place, removeSandbox, runInSandbox } from "./_sandbox.ts";

const PROBE = new URL("./fixtures/permission_probe.ts", import.meta.url).pathname;
const HOST = new URL("../mod.ts", import.meta.url).pathname;

/** Builds `entry` for `os` in the bundled form and installs it in the sandbox at the set's paths. */
const install = installBuilt;

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

/** Whether the probe's text is in the file (it may exist: the sandbox placed the program). */
async function probeWrote(path: string): Promise<boolean> {
  const text = await Deno.readTextFile(path).catch(() => "");
  return text.includes("noxpk+probe+wrote");
}

const COMMON_REFUSED = [
  "write:/etc/mesh-host/host.json",
  "write:/var/lib/mesh-host/halted",
  "write:/var/lib/mesh-host/rolled-back",
  "write:/var/lib/mesh-host/rolled-back-from",
  "write:/var/lib/mesh-host/restart-streak",
  "write:/var/lib/mesh-host/rollback/nox-mesh-host-9.pkg.tar.gz",
  // The launcher's state for node_exporter, in the textfile directories the sets know.
  "write:/var/lib/prometheus/node-exporter/nox_mesh_host_launcher.prom",
  "write:/var/lib/node_exporter/textfile_collector/nox_mesh_host_launcher.prom",
  "run:/usr/bin/id",
  "run:/bin/sh",
  "listen:0.0.0.0",
  "listen:::",
];
const COMMON_ALLOWED = [
  "write:/var/lib/mesh-host/known-good",
  "write:/var/lib/mesh-host/failures",
  "write:/srv/noxpk-managed",
  // Its own metrics file beside the launcher's.
  "write:/var/lib/prometheus/node-exporter/nox_mesh_host.prom",
];

const CASES: Record<TargetOs, { refused: string[]; allowed: string[] }> = {
  arch: {
    refused: [
      "write:/etc/systemd/system/nox-mesh-host.service",
      "write:/etc/systemd/system/nox-mesh-host.service.d/override.conf",
      "write:/usr/lib/systemd/system/nox-mesh-host.service",
      "write:/usr/bin/nox-mesh-host",
      "write:/usr/lib/nox-mesh-host/nox-mesh-host.js",
      // A part of the bundle beside it (the code a command loads when it runs it).
      "write:/usr/lib/nox-mesh-host/chunk-ABCDEFGH.js",
      "write:/usr/bin/nox-mesh-host-launch",
      "run:/usr/sbin/rc-service",
    ],
    allowed: ["run:/usr/bin/pacman", "write:/etc/systemd/system/noxpk-other.service"],
  },
  debian: {
    refused: [
      "write:/etc/systemd/system/nox-mesh-host.service",
      "write:/etc/systemd/system/nox-mesh-host.service.d/override.conf",
      "write:/usr/lib/systemd/system/nox-mesh-host.service",
      "write:/usr/bin/nox-mesh-host",
      "write:/usr/lib/nox-mesh-host/nox-mesh-host.js",
      "write:/usr/lib/nox-mesh-host/chunk-ABCDEFGH.js",
      "write:/usr/lib/nox-mesh-host/launch/apt.sh",
      "write:/usr/bin/nox-mesh-host-launch",
      "run:/usr/bin/pacman",
      "run:/usr/bin/dpkg",
    ],
    allowed: ["run:/usr/bin/apt-get", "write:/etc/systemd/system/noxpk-other.service"],
  },
  alpine: {
    refused: [
      "write:/etc/init.d/nox-mesh-host",
      "write:/etc/conf.d/nox-mesh-host",
      "write:/usr/bin/nox-mesh-host",
      "write:/usr/lib/nox-mesh-host/nox-mesh-host.js",
      "write:/usr/lib/nox-mesh-host/chunk-ABCDEFGH.js",
      "run:/usr/bin/pacman",
    ],
    allowed: ["run:/usr/sbin/rc-service"],
  },
  tarball: {
    refused: [
      "write:/etc/systemd/system/nox-mesh-host.service",
      "write:/etc/init.d/nox-mesh-host",
      "write:/etc/conf.d/nox-mesh-host",
      // It never writes its own installation: it stages an upgrade, the launcher unpacks it.
      "write:/usr/local/bin/nox-mesh-host",
      "write:/usr/local/bin/nox-mesh-host-launch",
      "write:/usr/local/lib/nox-mesh-host/nox-mesh-host.js",
      "write:/usr/local/lib/nox-mesh-host/chunk-ABCDEFGH.js",
      "write:/usr/local/lib/nox-mesh-host/VERSION",
      "write:/usr/local/share/nox-mesh-host/substrate.lock",
      "write:/var/lib/mesh-host/upgrade-refused",
    ],
    allowed: [
      "run:/usr/bin/pacman",
      "run:/usr/sbin/rc-service",
      "write:/usr/local/bin/noxpk-other",
      // Where it stages an upgrade (os/tarball-self), and a sibling of its own directory.
      "write:/var/lib/mesh-host/upgrade/staged",
      "write:/usr/local/lib/nox-mesh-host.new",
    ],
  },
};

for (const os of ["arch", "debian", "alpine", "tarball"] as const) {
  Deno.test(`runtime refusals ${os}: own unit/init file, own program, unlisted program, listening`, async () => {
    const s = await makeSandbox();
    try {
      const set = await install(s, os, PROBE);
      // Parents exist, so an allowed write would succeed and a refusal is the runtime's.
      for (
        const dir of [
          "/var/lib/mesh-host/rollback",
          "/etc/mesh-host",
          "/etc/systemd/system/nox-mesh-host.service.d",
          "/etc/conf.d",
          "/etc/init.d",
          "/usr/local/lib/nox-mesh-host/init",
          "/usr/local/share/nox-mesh-host",
          "/var/lib/mesh-host/upgrade",
          "/var/lib/prometheus/node-exporter",
          "/var/lib/node_exporter/textfile_collector",
        ]
      ) {
        await place(s, `${dir}/.keep`, "");
      }
      const { refused, allowed } = CASES[os];
      const ops = [...COMMON_REFUSED, ...refused, ...COMMON_ALLOWED, ...allowed];
      const r = await runInSandbox(s, [set.binary, ...ops]);
      assert.equal(r.code, 0, r.stderr);
      const result = new Map(
        r.stdout.trim().split("\n").map((l) => {
          const i = l.lastIndexOf(" ");
          return [l.slice(0, i), l.slice(i + 1)];
        }),
      );
      for (const op of [...COMMON_REFUSED, ...refused]) {
        assert.equal(result.get(op), "refused", `${op}: ${r.stdout}`);
        if (op.startsWith("write:")) {
          assert.ok(!(await probeWrote(s.upper(op.slice(6)))), `${op} wrote`);
        }
      }
      for (const op of [...COMMON_ALLOWED, ...allowed]) {
        assert.equal(result.get(op), "allowed", `${op}: ${r.stdout}`);
      }
    } finally {
      await removeSandbox(s);
    }
  });
}

Deno.test("runtime: the built host runs under its arch set, applies in a managed root, and the set is a ceiling host.json cannot raise", async () => {
  const s = await makeSandbox();
  try {
    const set = await install(s, "arch", HOST);
    const version = await runInSandbox(s, [set.binary, "version"]);
    assert.equal(version.code, 0, version.stderr);
    assert.match(version.stdout, /^nox-mesh-host \d+\.\d+\.\d+/);

    const own = { mode: "0755", owner: "root", group: "root" };
    const decl = (dir: string, path: string) =>
      JSON.stringify({
        version: 1,
        resources: [
          { type: "directory", id: "d", path: dir, ...own },
          { type: "file", id: "f", path, content: "hello\n", ...own, mode: "0644" },
        ],
      });
    const ok = await runInSandbox(s, [set.binary, "apply", "--json", "-"], {
      stdin: decl("/srv/noxpk", "/srv/noxpk/hello"),
    });
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.equal(JSON.parse(ok.stdout).outcome, "converged");
    assert.equal(await Deno.readTextFile(s.upper("/srv/noxpk/hello")), "hello\n");
    // A root below an unreadable directory (/var/lib under /var): the file system adapter
    // looks at the directories above its reading roots with stat(1), so nothing above the
    // managed root needs to be readable.
    const deep = await runInSandbox(s, [set.binary, "apply", "--json", "-"], {
      stdin: decl("/var/lib/noxpk", "/var/lib/noxpk/hello"),
    });
    assert.equal(deep.code, 0, deep.stdout + deep.stderr);
    assert.equal(await Deno.readTextFile(s.upper("/var/lib/noxpk/hello")), "hello\n");
    assert.ok(
      await exists(s.upper("/var/lib/mesh-host/state.db")),
      "the store lives in the state dir",
    );

    // host.json widens the managed roots to /usr/lib/noxpk: the parse lets the file
    // through, and the runtime refuses the write, because the set does not allow it.
    await place(s, "/usr/lib/noxpk/.keep", "");
    await place(
      s,
      "/etc/mesh-host/host.json",
      JSON.stringify({ managedRoots: ["/srv", "/usr/lib/noxpk"] }),
    );
    const capped = await runInSandbox(s, [set.binary, "apply", "--json", "-"], {
      stdin: decl("/usr/lib/noxpk/d", "/usr/lib/noxpk/d/x"),
    });
    assert.equal(capped.code, 1, capped.stdout + capped.stderr);
    const report = JSON.parse(capped.stdout);
    assert.equal(report.outcome, "failed");
    assert.match(JSON.stringify(report), /Requires (read|write) access to \\"\/usr/);
    assert.ok(!(await exists(s.upper("/usr/lib/noxpk/d"))));
  } finally {
    await removeSandbox(s);
  }
});
