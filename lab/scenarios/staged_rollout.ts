import { type Scenario, type ScenarioMachine, waitFor } from "../lib/scenario.ts";
import { HOST_VERSIONS } from "../lib/host_builds.ts";
import { assertRunningVersion, meshUp } from "../mesh_steps/link_steps.ts";
import {
  assertFleetFiles,
  enrolFleet,
  fleetNames,
  rolloutFleet,
  startFleet,
} from "../mesh_steps/fleet_steps.ts";
import {
  assertBatches,
  assertHostLogSays,
  assertStoppedBy,
  putHostTarball,
  rolloutHostBuild,
} from "../mesh_steps/rollout_steps.ts";

const nodes = fleetNames("sr", 4);
const NEXT = HOST_VERSIONS.next;
const BROKEN = HOST_VERSIONS.broken;

/**
 * A staged host rollout (issue 24; the seeds: "a few nodes, wait for heartbeats,
 * continue or stop on silence"), on light nodes running the tarball under its launcher.
 */
export const scenario: Scenario = {
  name: "staged-rollout",
  summary: `${nodes.length} light nodes (the tarball under its launcher); the control plane ` +
    `rolls the host's next version out by its tarball's digest: a canary, then batches of ` +
    "two, each declared once the one before heartbeats the new version; a broken build rolled " +
    "out the same way stops after the canary (its launcher rolls it back and it heartbeats the " +
    "old version again), naming it, and the rest of the fleet is never declared it",
  broker: true,
  machines: Object.fromEntries(
    nodes.map((n): [string, ScenarioMachine] => [n, { flavour: "plain", host: true }]),
  ),
  steps: [
    meshUp(),
    enrolFleet(nodes),
    // A short heartbeat: a batch is done as soon as its nodes say they run the version.
    startFleet(nodes, 2),
    rolloutFleet(nodes, 1),
    putHostTarball("next"),
    putHostTarball("broken"),
    rolloutHostBuild(nodes, "next", { canary: 1, batch: 2, expect: "completed" }),
    assertBatches([[nodes[0]], [nodes[1], nodes[2]], [nodes[3]]], [
      "upgraded",
      "upgraded",
      "upgraded",
    ]),
    ...nodes.map((n) => assertRunningVersion(n, NEXT)),
    // What each node held before is kept beside the host's package.
    assertFleetFiles(nodes, 1),
    rolloutHostBuild(nodes, "broken", { canary: 1, batch: 2, expect: "stopped" }),
    assertBatches([[nodes[0]]], ["stopped"]),
    assertStoppedBy([nodes[0]], "rolled-back", nodes.slice(1)),
    assertHostLogSays(nodes[0], `rolling back to known-good ${NEXT}`, 1),
    waitFor(assertRunningVersion(nodes[0], NEXT), 60),
    // The rest never got the broken version: still the next one, never upgraded again.
    ...nodes.slice(1).map((n) => assertRunningVersion(n, NEXT)),
    ...nodes.slice(1).map((n) => assertHostLogSays(n, "run: self-upgrade:", 1)),
    ...nodes.map((n) => assertHostLogSays(n, `${BROKEN}`, n === nodes[0] ? { min: 1 } : 0)),
  ],
};
