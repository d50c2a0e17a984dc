import type { Scenario, ScenarioMachine } from "../lib/scenario.ts";
import { meshUpCluster } from "../mesh_steps/link_steps.ts";
import {
  assertFleetFiles,
  assertReportsOnce,
  enrolFleet,
  fleetMemory,
  fleetNames,
  killHostOnce,
  rolloutFleet,
  startFleet,
} from "../mesh_steps/fleet_steps.ts";

/**
 * Light nodes of the fleet scenario: 6 in the default lab run, so that `deno task lab`
 * stays a few minutes; `deno task bench:fleet` runs it with 50 (NOXLAB_FLEET_NODES).
 */
export const FLEET_NODES = Number(Deno.env.get("NOXLAB_FLEET_NODES") ?? 6);

const nodes = fleetNames("fl", FLEET_NODES);

/** N nodes on the three-server cluster; one declaration each; publish-to-applied and memory. */
export const scenario: Scenario = {
  name: "fleet",
  summary: `${FLEET_NODES} light nodes enrol on a three-server cluster; one declaration per node ` +
    "is published: publish-to-applied p50/p99/max, broker memory (/varz) and each host's RSS; " +
    "every node's report is kept once; a host killed with SIGKILL is started again by its " +
    "launcher and applies the next serial",
  machines: Object.fromEntries(
    nodes.map((n): [string, ScenarioMachine] => [n, { flavour: "plain", host: true }]),
  ),
  steps: [
    meshUpCluster(),
    enrolFleet(nodes),
    startFleet(nodes, 30),
    rolloutFleet(nodes, 1),
    assertFleetFiles(nodes, 1),
    assertReportsOnce(nodes, [1]),
    fleetMemory(nodes),
    // Supervision: the launcher brings a killed host back, and it applies what follows.
    killHostOnce(nodes[0]),
    rolloutFleet(nodes, 2),
    assertFleetFiles(nodes, 2),
    assertReportsOnce(nodes, [1, 2]),
  ],
};
