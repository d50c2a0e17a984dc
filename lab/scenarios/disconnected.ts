import {
  assertFile,
  cutLink,
  restoreLink,
  type Scenario,
  waitFor,
  writeFile,
} from "../lib/scenario.ts";
import {
  assertApplies,
  assertHeartbeat,
  assertJournal,
  declare,
  enrol,
  HOST_UNIT_FILES,
  mark,
  meshUp,
  startHost,
} from "../mesh_steps/link_steps.ts";
import { files, srvFile } from "./_link.ts";

const stable = srvFile("stable", "/srv/stable.conf", "kept as declared\n");
const version = (n: number) => srvFile("version", "/srv/version", `${n}\n`);
let restoredAt = 0;

/** A node cut off keeps its state; on return it takes the latest declaration only. */
export const scenario: Scenario = {
  name: "disconnected",
  summary: "a node's link is cut (it notices within ~30 s); two declarations are published and a " +
    "person edits a managed file; on restore the node applies the latest declaration, not the " +
    "older one, the drift is repaired and heartbeats resume",
  broker: true,
  machines: { roamer: { flavour: "systemd", host: true, files: HOST_UNIT_FILES } },
  steps: [
    meshUp(),
    enrol("roamer", "roamer"),
    startHost("roamer"),
    declare("roamer", files(version(1), stable)),
    waitFor(assertFile("roamer", "/srv/version", { content: "1\n" }), 60),
    cutLink("roamer"),
    waitFor(assertJournal("roamer", "the broker stopped answering pings"), 90),
    declare("roamer", files(version(2), stable)),
    declare("roamer", files(version(3), stable)),
    writeFile("roamer", "/srv/stable.conf", "edited by a person\n"),
    mark((ms) => restoredAt = ms, "note when the link comes back"),
    restoreLink("roamer"),
    waitFor(assertFile("roamer", "/srv/version", { content: "3\n" }), 90),
    assertFile("roamer", "/srv/stable.conf", { content: "kept as declared\n" }),
    waitFor(assertApplies("roamer", [1, 3]), 30),
    waitFor(assertHeartbeat("roamer", 3, () => restoredAt), 30),
  ],
};
