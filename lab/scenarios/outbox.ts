import { assertFile, cutLink, restoreLink, run, type Scenario, waitFor } from "../lib/scenario.ts";
import {
  assertJournal,
  assertJournalPriority,
  assertReportsMatchJournal,
  declare,
  driftRepairs,
  enrol,
  hostUnit,
  meshUp,
  startHost,
} from "../mesh_steps/link_steps.ts";
import { files, srvFile } from "./_link.ts";

const DECLARED = "as declared\n";

/** Reports kept while away (DESIGN.md §19): the outbox delivers them in order, once each. */
export const scenario: Scenario = {
  name: "outbox",
  summary: "a node's link is cut; 20 drift repairs and a failing apply happen while away; on " +
    "restore the control plane receives every report, once each, in order (the journal's " +
    "applies, one for one); journalctl -p warning shows the failed apply",
  broker: true,
  machines: {
    roamer: {
      flavour: "systemd",
      host: true,
      files: { "/etc/systemd/system/nox-mesh-host.service": hostUnit(2, 1) },
    },
  },
  steps: [
    meshUp(),
    enrol("roamer", "roamer"),
    startHost("roamer"),
    declare("roamer", files(srvFile("drift", "/srv/drift", DECLARED))),
    waitFor(assertFile("roamer", "/srv/drift", { content: DECLARED }), 60),
    cutLink("roamer"),
    waitFor(assertJournal("roamer", "the broker stopped answering pings"), 90),
    driftRepairs("roamer", "/srv/drift", DECLARED, 20),
    // A directory where the file belongs: the drift apply fails until it is gone.
    run("roamer", ["sh", "-c", "rm -f /srv/drift && mkdir /srv/drift"]),
    waitFor(assertJournal("roamer", "apply (drift, link serial 1): failed"), 30),
    run("roamer", ["rmdir", "/srv/drift"]),
    waitFor(assertFile("roamer", "/srv/drift", { content: DECLARED }), 30),
    restoreLink("roamer"),
    // Delivered after the reconnect (the start and first declaration's reports may
    // already have been delivered together before the cut).
    waitFor(assertJournal("roamer", "outbox: delivered", "(reconnected)"), 120),
    run("roamer", ["systemctl", "stop", "nox-mesh-host"]),
    assertReportsMatchJournal("roamer", "roamer", { repairs: 20, failed: 1 }),
    assertJournalPriority("roamer", "warning", "apply (drift, link serial 1): failed"),
  ],
};
