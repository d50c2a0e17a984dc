import { assertFile, assertUnit, run, type Scenario, waitFor } from "../lib/scenario.ts";

const TICK = `#!/bin/sh
# Writes a heartbeat every second.
while :; do date +%s > /run/noxlab-tick.out; sleep 1; done
`;

const SERVICE = `#!/sbin/openrc-run
description="nox-mesh-host lab heartbeat"
supervisor=supervise-daemon
command=/usr/local/bin/noxlab-tick
pidfile=/run/noxlab-tick.pid
`;

/** An OpenRC machine boots its default runlevel and a service comes up. */
export const scenario: Scenario = {
  name: "openrc-boot",
  summary: "an OpenRC machine boots and brings up a service enabled in its default runlevel",
  machines: {
    rc1: {
      flavour: "openrc",
      files: {
        "/usr/local/bin/noxlab-tick": { content: TICK, mode: "0755" },
        "/etc/init.d/noxlab-tick": { content: SERVICE, mode: "0755" },
        "/etc/runlevels/default/noxlab-tick": { symlink: "/etc/init.d/noxlab-tick" },
      },
    },
  },
  steps: [
    waitFor(assertUnit("rc1", "noxlab-tick", { running: true, enabled: true }), 20),
    waitFor(assertFile("rc1", "/run/noxlab-tick.out", { type: "file" }), 10),
    run("rc1", ["rc-service", "noxlab-tick", "stop"]),
    assertUnit("rc1", "noxlab-tick", { running: false }),
    run("rc1", ["rc-service", "noxlab-tick", "start"]),
    waitFor(assertUnit("rc1", "noxlab-tick", { running: true }), 20),
  ],
};
