import { assertFile, assertUnit, run, type Scenario, waitFor } from "../lib/scenario.ts";
import { CHECKOUT } from "../lib/bundle.ts";
import { assertLaunched, assertNoHostProcess, assertServiceSaid, CURRENT, STATE } from "./_ship.ts";

/** The init script as shipped (packaging/alpine/), and the tarball's conf.d (packaging/tarball/). */
const INIT_SCRIPT = Deno.readTextFileSync(`${CHECKOUT}/packaging/alpine/nox-mesh-host.initd`);
const CONF_D = Deno.readTextFileSync(`${CHECKOUT}/packaging/tarball/nox-mesh-host.confd`);

/** The tarball and the OpenRC script on an OpenRC machine: start, run, stop cleanly. */
export const scenario: Scenario = {
  name: "openrc-install",
  summary: "the tarball (checked against SHA256SUMS) unpacked into /usr/local/bin with the " +
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
    run("rc", ["sh", "-c", "cd /lab/tarball && sha256sum -c SHA256SUMS"]),
    run("rc", [
      "sh",
      "-c",
      'tar -xz -C /usr/local/bin < "$1"',
      "sh",
      `/lab/tarball/nox-mesh-host-${CURRENT}-${Deno.build.arch}.tar.gz`,
    ]),
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
