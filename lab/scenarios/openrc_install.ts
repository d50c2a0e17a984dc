import {
  assertFails,
  assertFile,
  assertUnit,
  run,
  type Scenario,
  waitFor,
} from "../lib/scenario.ts";
import { assertLaunched, assertNoHostProcess, assertServiceSaid, CURRENT, STATE } from "./_ship.ts";

const TARBALL = `nox-mesh-host-${CURRENT}-${Deno.build.arch}.tar.gz`;

/**
 * The install check of packaging/README.md, run in DIR: the signature of SHA256SUMS (against the release
 * key, here the lab's, from the lab share), then the archive's sum, and only then tar.
 */
function installLine(dir: string): string[] {
  return [
    "sh",
    "-c",
    'cd "$1" && minisign -Vm SHA256SUMS -p /lab/tarball/minisign.pub && ' +
    'sha256sum -c --ignore-missing SHA256SUMS && tar -xz -C /usr/local < "$2"',
    "install",
    dir,
    TARBALL,
  ];
}

/**
 * The tarball and its OpenRC script on an OpenRC machine: refused when changed, then
 * checked, unpacked, installed; start, run, stop cleanly. (tarball-floor runs the README's
 * one-line install on a machine with no deno; this one the signature-checked one.)
 */
export const scenario: Scenario = {
  name: "openrc-install",
  summary: "a changed tarball is refused (by its sum; with the sums rewritten too, by the " +
    "minisign signature) and nothing unpacked; the tarball (SHA256SUMS signature and " +
    "sum checked) unpacked into /usr/local, its OpenRC script and conf.d installed by " +
    "nox-mesh-host-install-init --no-start: rc-service start runs the launcher, which runs the " +
    "host under the tarball permission set; rc-service stop passes the signal down, no " +
    "process remains",
  machines: {
    rc: { flavour: "openrc" },
  },
  steps: [
    run("rc", ["sh", "-c", "mkdir /tmp/changed && cp /lab/tarball/* /tmp/changed/"]),
    run("rc", ["sh", "-c", `printf '\\0' >> /tmp/changed/${TARBALL}`]),
    assertFails("rc", installLine("/tmp/changed"), { stderrIncludes: "FAILED" }),
    // An attacker who rewrites SHA256SUMS as well cannot sign it.
    run("rc", ["sh", "-c", `cd /tmp/changed && sha256sum ${TARBALL} > SHA256SUMS`]),
    assertFails("rc", installLine("/tmp/changed"), {
      stderrIncludes: "Signature verification failed",
    }),
    assertFile("rc", "/usr/local/bin/nox-mesh-host", { absent: true }),
    run("rc", installLine("/lab/tarball")),
    assertFile("rc", "/usr/local/share/nox-mesh-host/LICENSE", { type: "file" }),
    assertFile("rc", "/usr/local/lib/nox-mesh-host/deno.LICENSE", { type: "file" }),
    // The tarball's OpenRC script (derived from Alpine's) and conf.d, enabled, not started.
    run("rc", ["nox-mesh-host-install-init", "--no-start"]),
    run("rc", ["test", "-L", "/etc/runlevels/default/nox-mesh-host"]),
    assertUnit("rc", "nox-mesh-host", { running: false }),
    run("rc", ["/usr/local/bin/nox-mesh-host", "version"], {
      stdoutIncludes: `nox-mesh-host ${CURRENT}\n`,
    }),
    run("rc", ["rc-service", "nox-mesh-host", "start"]),
    assertUnit("rc", "nox-mesh-host", { running: true }),
    waitFor(assertFile("rc", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 60),
    assertFile("rc", `${STATE}/failures`, { absent: true }),
    assertLaunched("rc"),
    assertFile("rc", `${STATE}/rollback/${CURRENT}/nox-mesh-host-${CURRENT}.tar.gz`, {
      type: "file",
    }),
    run("rc", ["rc-service", "nox-mesh-host", "stop"]),
    assertUnit("rc", "nox-mesh-host", { running: false }),
    assertNoHostProcess("rc"),
    assertServiceSaid("rc", "run: stopped (signal", 1),
    assertServiceSaid("rc", "nox-mesh-host-launch: stopped on SIGTERM (host exited 0)", 1),
  ],
};
