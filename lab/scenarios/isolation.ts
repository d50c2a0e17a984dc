import { type Scenario, waitFor } from "../lib/scenario.ts";
import {
  assertApplies,
  assertConfined,
  declare,
  enrol,
  HOST_UNIT_FILES,
  meshUp,
  startHost,
} from "../mesh_steps/link_steps.ts";
import { files, srvFile } from "./_link.ts";

/** The broker, not the host's code, confines each node to its own subjects. */
export const scenario: Scenario = {
  name: "isolation",
  summary: "with its own key and JWT, node A cannot read node B's catch-up, declarations " +
    "(direct get in either form, where the stream republishes them, the stream's subject) " +
    "or objects, nor publish B's reports or heartbeats, nor use the JetStream API: the " +
    "broker refuses each; a reply A steers into B's push subject reaches B, which applies " +
    "and reports nothing of it, and one aimed at the stream's purge changes nothing",
  broker: true,
  machines: {
    alpha: { flavour: "systemd", host: true, files: HOST_UNIT_FILES },
    beta: { flavour: "systemd", host: true, files: HOST_UNIT_FILES },
  },
  steps: [
    meshUp(),
    enrol("alpha", "alpha"),
    enrol("beta", "beta"),
    declare("beta", files(srvFile("secret", "/srv/beta-only", "for beta\n"))),
    declare("alpha", files(srvFile("mine", "/srv/alpha-only", "for alpha\n"))),
    // beta runs: what alpha steers into its push subject reaches a live node.
    startHost("beta"),
    waitFor(assertApplies("beta", [1]), 60),
    assertConfined("alpha", "alpha", "beta", "beta"),
    assertApplies("beta", [1]),
    assertConfined("beta", "beta", "alpha"),
  ],
};
