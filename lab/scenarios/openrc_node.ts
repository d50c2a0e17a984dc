import { apply, assertFile, assertUnit, json, run, type Scenario } from "../lib/scenario.ts";

const PROGRAM = `#!/bin/sh
# nox-mesh-host lab: a heartbeat every second.
while :; do date +%s > /run/noxlab-beat.out; sleep 1; done
`;

const SCRIPT = `#!/sbin/openrc-run
description="nox-mesh-host lab heartbeat"
supervisor=supervise-daemon
command=/usr/local/bin/noxlab-beat
pidfile=/run/noxlab-beat.pid
`;

const file = (id: string, path: string, content: string, mode: string) => ({
  type: "file",
  id,
  path,
  content,
  mode,
  owner: "root",
  group: "root",
});

const resources = [
  file("beat-bin", "/usr/local/bin/noxlab-beat", PROGRAM, "0755"),
  file("beat-init", "/etc/init.d/noxlab-beat", SCRIPT, "0755"),
  { type: "service", id: "beat", name: "noxlab-beat", enabled: true, running: true },
];

/** An OpenRC machine gets a program, its init script and the service from one declaration. */
export const scenario: Scenario = {
  name: "openrc-node",
  summary: "an OpenRC machine gets an init script (file) and its service, enabled and " +
    "running; re-apply is a no-op; a stopped service is restarted; the host's own service is refused",
  machines: {
    rc: {
      flavour: "openrc",
      host: true,
      files: {
        "/root/decl.json": json({ version: 1, resources }),
        "/root/decl-files-only.json": json({ version: 1, resources: resources.slice(0, 2) }),
        "/root/decl-own.json": json({
          version: 1,
          resources: [{
            type: "service",
            id: "me",
            name: "nox-mesh-host",
            enabled: false,
            running: false,
          }],
        }),
      },
    },
  },
  steps: [
    run("rc", ["nox-mesh-host", "profile", "--json"], {
      stdoutIncludes: '"init":{"state":"working","provider":"openrc"',
    }),
    apply("rc", "/root/decl.json", { outcome: "converged", changed: 3, failed: 0 }),
    assertUnit("rc", "noxlab-beat", { enabled: true, running: true }),
    assertFile("rc", "/etc/init.d/noxlab-beat", { content: SCRIPT, mode: "0755" }),
    apply("rc", "/root/decl.json", { outcome: "converged", changed: 0, unchanged: 3 }),
    run("rc", ["rc-service", "noxlab-beat", "stop"]),
    assertUnit("rc", "noxlab-beat", { running: false }),
    apply("rc", "/root/decl.json", { outcome: "converged", changed: 1, unchanged: 2 }),
    assertUnit("rc", "noxlab-beat", { running: true }),
    apply("rc", "/root/decl-own.json", { outcome: "refused", errorIncludes: "host's own service" }),
    apply("rc", "/root/decl-files-only.json", { outcome: "converged", removed: 0, forgotten: 1 }),
    assertUnit("rc", "noxlab-beat", { enabled: true, running: true }),
  ],
};
