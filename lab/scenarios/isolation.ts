import { type Scenario } from "../lib/scenario.ts";
import {
  assertConfined,
  assertNoReports,
  declare,
  enrol,
  HOST_UNIT_FILES,
  meshUp,
} from "../mesh_steps/link_steps.ts";
import { files, srvFile } from "./_link.ts";

/** The broker, not the host's code, confines each node to its own subjects. */
export const scenario: Scenario = {
  name: "isolation",
  summary: "with its own key, node A cannot read node B's declarations (direct get in either " +
    "form, or where B's consumer delivers) nor publish B's reports or heartbeats, nor use the " +
    "consumer API (make, read, pull from or delete a consumer, acknowledge for B's), nor make " +
    "a reply land in B's subject or purge the declaration stream: the broker refuses each",
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
    assertConfined("alpha", "alpha", "beta"),
    // Before beta's own probe reports as beta (its own subject, allowed).
    assertNoReports("beta"),
    assertConfined("beta", "beta", "alpha"),
  ],
};
