import { type Scenario, type ScenarioMachine, waitFor } from "../lib/scenario.ts";
import { meshUpCluster } from "../mesh_steps/link_steps.ts";
import {
  assertFleetFiles,
  assertReportsOnce,
  driftRepairsOn,
  enrolFleet,
  fleetNames,
  publishFleet,
  rolloutFleet,
  startFleet,
} from "../mesh_steps/fleet_steps.ts";
import {
  assertLeafConnected,
  assertOnlyThroughLeaf,
  cutLeafUplink,
  restoreLeafUplink,
  rolloutContent,
  siteLeafUp,
} from "../mesh_steps/site_steps.ts";

const nodes = fleetNames("site", 2);

/** A site behind a leaf server (DESIGN.md §20): it keeps applying while the uplink is cut. */
export const scenario: Scenario = {
  name: "site",
  summary: "a leaf server joins a site's network to the three-server cluster; two light nodes " +
    "there enrol and apply through it; its uplink is cut: the nodes keep applying from their " +
    "stores (drift repaired), a declaration published meanwhile reaches them when it is " +
    "restored; a file declared by digest reaches them from the object store through the leaf",
  machines: Object.fromEntries(
    nodes.map((n): [string, ScenarioMachine] => [n, { flavour: "plain", host: true, site: true }]),
  ),
  steps: [
    meshUpCluster(),
    siteLeafUp(),
    ...nodes.map((n) => assertOnlyThroughLeaf(n)),
    enrolFleet(nodes, "leaf1"),
    startFleet(nodes, 5, 3),
    rolloutFleet(nodes, 1),
    cutLeafUplink(),
    waitFor(assertLeafConnected(false), 30),
    publishFleet(nodes, 2),
    driftRepairsOn(nodes, 1),
    restoreLeafUplink(),
    waitFor(assertLeafConnected(true), 30),
    waitFor(assertFleetFiles(nodes, 2), 90, 1000),
    waitFor(assertReportsOnce(nodes, [1, 2]), 60, 2000),
    rolloutContent(nodes, 3),
  ],
};
