import { type Scenario, type ScenarioMachine, waitFor } from "../lib/scenario.ts";
import { meshUpCluster } from "../mesh_steps/link_steps.ts";
import {
  assertFleetFiles,
  assertReplicasCurrent,
  assertReportsOnce,
  enrolFleet,
  fleetNames,
  killReportLeader,
  reconnectHistogram,
  restartVictim,
  rolloutFleet,
  startFleet,
} from "../mesh_steps/fleet_steps.ts";

/** Light nodes in the default lab run (`deno task bench:fleet` runs the fleet with 50). */
export const FAILOVER_NODES = Number(Deno.env.get("NOXLAB_FAILOVER_NODES") ?? 6);

const nodes = fleetNames("fo", FAILOVER_NODES);

/** A rollout while the server leading the report stream is killed (DESIGN.md §20). */
export const scenario: Scenario = {
  name: "broker-failover",
  summary: `a three-server cluster; ${FAILOVER_NODES} light nodes roll out serial 1, then ` +
    "serial 2 while the server leading MESH_REPORT is killed: every node applies serial 2, " +
    "every report is kept once, the server comes back with its replicas current; histogram " +
    "of the nodes' reconnect times",
  machines: Object.fromEntries(
    nodes.map((n): [string, ScenarioMachine] => [n, { flavour: "plain", host: true }]),
  ),
  steps: [
    meshUpCluster(),
    enrolFleet(nodes),
    startFleet(nodes),
    rolloutFleet(nodes, 1),
    rolloutFleet(nodes, 2, {
      title: "the leader of MESH_REPORT killed",
      run: killReportLeader(nodes),
    }),
    assertFleetFiles(nodes, 2),
    assertReportsOnce(nodes, [1, 2]),
    reconnectHistogram(nodes),
    restartVictim(),
    // JetStream catches the restarted server's replicas up within seconds.
    waitFor(assertReplicasCurrent(), 90, 1000),
  ],
};
