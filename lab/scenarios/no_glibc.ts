import {
  apply,
  assertFails,
  assertFile,
  fail,
  run,
  type Scenario,
  type Step,
  waitFor,
} from "../lib/scenario.ts";
import { hostInstall } from "../lib/host.ts";
import { runtimePins } from "../../packaging/tarball/runtime.ts";
import { assertApplies, declare, enrol, meshUp } from "../mesh_steps/link_steps.ts";
import { PLAIN_HOST_LOG } from "../mesh_steps/fleet_steps.ts";
import { files, srvFile } from "./_link.ts";
import { assertLaunched, CURRENT, STATE } from "./_ship.ts";
import { readmeInstallLines } from "./tarball_floor.ts";
import { CHECKOUT } from "../lib/bundle.ts";

const DENO = (await runtimePins()).version;
/** The README's tarball lines, exactly as written. */
const README_LINES = readmeInstallLines(Deno.readTextFileSync(`${CHECKOUT}/README.md`));
/** Where the machine serves /lab to itself (busybox's httpd, on its own loopback). */
const RELEASE = "http://127.0.0.1:8080/tarball";
const DECLARATION = "/root/declaration.json";
const DECLARED = {
  version: 1,
  resources: [
    { type: "directory", id: "dir", path: "/srv/musl", mode: "0750", owner: "root", group: "root" },
    srvFile("file", "/srv/musl/hello", "applied with no glibc on the machine\n"),
  ],
};

/** Where glibc lies on the machine: nowhere, or only in `only` (the runtime's own). */
function assertGlibc(machine: string, only?: string): Step {
  return {
    title: `assert ${machine} holds no glibc${only ? ` but the one carried in ${only}` : ""}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec([
        "sh",
        "-c",
        "find / -xdev \\( -name 'libc.so.6' -o -name 'ld-linux-*' \\) -print",
      ]);
      const found = r.stdout.split("\n").filter(Boolean);
      const outside = found.filter((f) => !only || !f.startsWith(`${only}/`));
      if (outside.length > 0 || (only && found.length === 0)) {
        fail(
          only ? `libc.so.6 and the loader in ${only} only` : "none",
          found.join(", ") || "none",
        );
      }
    },
  };
}

/** `version --json`: this version, the bundled form, on the Deno the package carries. */
function assertVersion(machine: string): Step {
  return {
    title:
      `assert on ${machine}: nox-mesh-host version --json says ${CURRENT}, bundled, Deno ${DENO}`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const r = await m.exec([hostInstall(m).command, "version", "--json"]);
      const v = JSON.parse(r.stdout || "{}");
      if (v.version !== CURRENT || v.form !== "bundled" || v.deno !== DENO) {
        fail(`${CURRENT}, bundled, Deno ${DENO}`, r.stdout.trim() || r.stderr.trim());
      }
    },
  };
}

/**
 * The launcher started as the package's init file would start it, with nothing but the
 * machine's PID 1 above it (no init system here), in the background in its own session.
 */
function startLauncher(machine: string, pkg: "tarball" | "apk"): Step {
  return {
    title: `start ${machine}'s launcher as its init file would (NOX_MESH_HOST_PKG=${pkg})`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const { command } = hostInstall(m);
      const r = await m.exec([
        "/bin/sh",
        "-c",
        'setsid "$1" run >>"$2" 2>&1 </dev/null &',
        "start",
        `${command}-launch`,
        PLAIN_HOST_LOG,
      ], {
        env: {
          PATH: "/usr/bin:/usr/sbin:/bin:/sbin",
          NOX_MESH_HOST_PKG: pkg,
          NOX_MESH_HOST_BIN: command,
          NOX_MESH_HOST_STATE_DIR: STATE,
        },
      });
      if (r.code !== 0) fail("the launcher started", `exit ${r.code}: ${r.stderr.trim()}`);
    },
  };
}

/** What both machines show once the host is installed: it runs, applies, is launched. */
function runs(machine: string, pkg: "tarball" | "apk", glibcDir: string): Step[] {
  return [
    assertGlibc(machine, glibcDir),
    assertFails(machine, ["sh", "-c", "command -v deno"]),
    assertVersion(machine),
    apply(machine, DECLARATION, { outcome: "converged", changed: 2, unchanged: 0 }),
    apply(machine, DECLARATION, { outcome: "converged", changed: 0, unchanged: 2 }),
    assertFile(machine, "/srv/musl/hello", {
      content: "applied with no glibc on the machine\n",
      mode: "0644",
    }),
    startLauncher(machine, pkg),
    waitFor(assertFile(machine, `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    assertLaunched(machine),
  ];
}

/**
 * A machine with no glibc (busybox-static and musl only): the tarball installed by the
 * README's lines and the Alpine package's files both run the host, which applies, is run by
 * its launcher, enrols and takes a pushed declaration.
 */
export const scenario: Scenario = {
  name: "no-glibc",
  summary: "two machines whose root has no glibc (Debian's busybox-static and musl's loader " +
    "only, as Alpine's): on one the README's two tarball lines (busybox's wget from its own " +
    "httpd, no curl; install-init finds no init and says how to start the launcher), on the " +
    "other the Alpine package's files as its APKBUILD installs them; on both the host, started " +
    "through the glibc loader it carries, says its version, applies a declaration (then " +
    "unchanged), its launcher runs it and it confirms a reconcile; both enrol and apply a " +
    "pushed declaration",
  broker: true,
  machines: {
    bb: {
      flavour: "plain",
      glibc: false,
      deno: false,
      hostFrom: "tarball",
      files: { [DECLARATION]: JSON.stringify(DECLARED) + "\n" },
    },
    ap: {
      flavour: "plain",
      glibc: false,
      deno: false,
      hostFrom: "alpine-files",
      files: { [DECLARATION]: JSON.stringify(DECLARED) + "\n" },
    },
  },
  steps: [
    assertGlibc("bb"),
    assertGlibc("ap"),
    assertFails("bb", ["sh", "-c", "command -v curl"]),
    // The release, served on the machine's own loopback by busybox's httpd.
    run("bb", ["httpd", "-p", "127.0.0.1:8080", "-h", "/lab"]),
    run("bb", ["sh", "-c", `set -eu\n${readme(0)}`]),
    // No init system here: install-init says so and how to start the launcher instead.
    assertFails("bb", ["sh", "-c", `set -eu\n${readme(1)}`], {
      code: 1,
      stderrIncludes: "found neither systemd",
    }),
    ...runs("bb", "tarball", "/usr/local/lib/nox-mesh-host/glibc"),
    waitFor(
      assertFile("bb", `${STATE}/rollback/${CURRENT}/nox-mesh-host-${CURRENT}.tar.gz`, {
        type: "file",
      }),
      60,
    ),
    // The Alpine package's files, copied into the root as apk would extract them.
    {
      title: "the Alpine package's files (every subpackage's) put into ap's root, as apk would",
      run: (ctx) => ctx.lab.installHost(ctx.machine("ap")),
    },
    run("ap", ["sh", "-c", "test -x /usr/bin/nox-mesh-host && test -f /etc/init.d/nox-mesh-host"]),
    ...runs("ap", "apk", "/usr/lib/nox-mesh-host/glibc"),
    meshUp(),
    enrol("bb", "bb"),
    enrol("ap", "ap"),
    declare("bb", files(srvFile("pushed", "/srv/pushed", "pushed over the link\n"))),
    declare("ap", files(srvFile("pushed", "/srv/pushed", "pushed over the link\n"))),
    waitFor(assertFile("bb", "/srv/pushed", { content: "pushed over the link\n" }), 90),
    waitFor(assertFile("ap", "/srv/pushed", { content: "pushed over the link\n" }), 90),
    waitFor(assertApplies("bb", [1]), 30),
    waitFor(assertApplies("ap", [1]), 30),
  ],
};

/** README line `i`, the release's address put where the machine serves it. */
function readme(i: number): string {
  return README_LINES[i].replaceAll("https://<release>", RELEASE).replaceAll("<version>", CURRENT);
}
