import type { Scenario, ScenarioMachine } from "../lib/scenario.ts";
import { meshUpCluster } from "../mesh_steps/link_steps.ts";
import {
  enrolFleet,
  fleetNames,
  publishFleet,
  rolloutFleet,
  startFleet,
} from "../mesh_steps/fleet_steps.ts";
import {
  assertLinked,
  assertNewCertificates,
  assertSaysWhyNot,
  assertTrust,
  noteCertificates,
  renewCertificates,
  restartServers,
  rotateCa,
  startAway,
  withdrawOldCa,
} from "../mesh_steps/certificate_steps.ts";

const nodes = fleetNames("ce", 4);
const [on1, on2, back, away] = nodes;
const linked = [on1, on2];

/**
 * Certificates that renew (issue 34, item 2): nodes trust the mesh's CA and the broker's
 * name, never a server's own certificate; the CA moves on by a signed trust update.
 */
export const scenario: Scenario = {
  name: "certificates",
  summary: "light nodes on a three-server cluster; every server's certificate renewed under " +
    "the same CA and the servers restarted: every node links again with nothing done on it; " +
    "the CA rotated with an overlap: the nodes follow the signed trust update, one away " +
    "returns within the overlap and links, all link on the new CA's certificates after the " +
    "old CA is withdrawn, and one away for the whole rotation says why it cannot link",
  machines: Object.fromEntries(
    nodes.map((n): [string, ScenarioMachine] => [n, { flavour: "plain", host: true }]),
  ),
  steps: [
    meshUpCluster(),
    enrolFleet(nodes),
    // Two nodes run; two are away, each with a declaration waiting for it.
    startFleet(linked),
    rolloutFleet(linked, 1),
    publishFleet([back, away], 1),
    noteCertificates(linked),
    // Renewed as ACME renews: the same CA, new keys; the servers restart one at a time.
    renewCertificates(),
    restartServers(linked),
    assertNewCertificates(linked),
    // The CA rotates: both CAs trusted for an hour, the servers still on the old one.
    rotateCa(3600),
    assertTrust(linked, 1, 2),
    // Away during the rotation, back within the overlap: it links and follows.
    startFleet([back]),
    assertTrust([back], 1, 2),
    noteCertificates([...linked, back]),
    // The rotation ends: the servers on the new CA, the old CA dropped.
    withdrawOldCa(),
    assertTrust([...linked, back], 2, 1),
    restartServers([...linked, back]),
    assertNewCertificates([...linked, back], "CN=nox-mesh stand-in CA 1"),
    // rotateCa and withdrawOldCa each published every node's last declaration again, as
    // serials 2 and 3: the next is 4.
    rolloutFleet([...linked, back], 4),
    // Away for the whole rotation: it never learnt of the new CA, and says so.
    startAway(away),
    assertSaysWhyNot(away),
    assertLinked([...linked, back]),
  ],
};
