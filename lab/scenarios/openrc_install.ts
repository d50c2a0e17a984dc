import {
  assertFails,
  assertFile,
  assertUnit,
  run,
  type Scenario,
  waitFor,
} from "../lib/scenario.ts";
import { CHECKOUT } from "../lib/bundle.ts";
import { assertLaunched, assertNoHostProcess, assertServiceSaid, CURRENT, STATE } from "./_ship.ts";

/** The init script as shipped (packaging/alpine/), and the tarball's conf.d (packaging/tarball/). */
const INIT_SCRIPT = Deno.readTextFileSync(`${CHECKOUT}/packaging/alpine/nox-mesh-host.initd`);
const CONF_D = Deno.readTextFileSync(`${CHECKOUT}/packaging/tarball/nox-mesh-host.confd`);

const TARBALL = `nox-mesh-host-${CURRENT}-${Deno.build.arch}.tar.gz`;

/**
 * The README's install line, run in DIR: the signature of SHA256SUMS (against the release
 * key, here the lab's, from the lab share), then the archive's sum, and only then tar.
 */
function installLine(dir: string): string[] {
  return [
    "sh",
    "-c",
    'cd "$1" && minisign -Vm SHA256SUMS -p /lab/tarball/minisign.pub && ' +
    'sha256sum -c --ignore-missing SHA256SUMS && tar -xz -C /usr/local/bin < "$2"',
    "install",
    dir,
    TARBALL,
  ];
}

/** The tarball and the OpenRC script on an OpenRC machine: start, run, stop cleanly. */
export const scenario: Scenario = {
  name: "openrc-install",
  summary: "a changed tarball is refused (by its sum; with the sums rewritten too, by the " +
    "minisign signature) and nothing unpacked; the tarball (SHA256SUMS signature and " +
    "sum checked) unpacked into /usr/local/bin with the " +
    "OpenRC script and conf.d: rc-service start runs the launcher, which runs the host under " +
    "the tarball permission set; rc-service stop passes the signal down, no process remains",
  machines: {
    rc: {
      flavour: "openrc",
      files: {
        "/etc/init.d/nox-mesh-host": { content: INIT_SCRIPT, mode: "0755" },
        "/etc/conf.d/nox-mesh-host": CONF_D,
      },
    },
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
    assertFile("rc", "/usr/local/bin/nox-mesh-host.LICENSE", { type: "file" }),
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
