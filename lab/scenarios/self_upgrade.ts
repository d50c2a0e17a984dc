import { assertFile, type Scenario, waitFor } from "../lib/scenario.ts";
import {
  assertApplies,
  assertHostExited,
  assertJournal,
  declare,
  enrol,
  hostUnit,
  meshUp,
  replaceHostProgram,
  startHost,
} from "../mesh_steps/link_steps.ts";
import { files, srvFile } from "./_link.ts";

/** The host's file is replaced during a run: it finishes the apply, reports it, exits 0. */
export const scenario: Scenario = {
  name: "self-upgrade",
  summary: "the host's program file is replaced while it runs; the next apply completes and is " +
    "reported, then the host exits 0 (the supervisor would start the new version)",
  broker: true,
  machines: {
    upgrader: {
      flavour: "systemd",
      host: true,
      // A long heartbeat interval: the idle tick must not notice the new file before the
      // apply does (that path is tested in tests/run_upgrade_test.ts).
      files: { "/etc/systemd/system/nox-mesh-host.service": hostUnit(600) },
    },
  },
  steps: [
    meshUp(),
    enrol("upgrader", "upgrader"),
    startHost("upgrader"),
    declare("upgrader", files(srvFile("v", "/srv/v", "1\n"))),
    waitFor(assertApplies("upgrader", [1]), 60),
    replaceHostProgram("upgrader"),
    declare("upgrader", files(srvFile("v", "/srv/v", "2\n"))),
    waitFor(assertHostExited("upgrader", 0), 60),
    assertFile("upgrader", "/srv/v", { content: "2\n" }),
    waitFor(assertApplies("upgrader", [1, 2]), 30),
    assertJournal("upgrader", "self-upgrade"),
  ],
};
