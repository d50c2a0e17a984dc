import { assertFile, json, run, type Scenario, waitFor, writeFile } from "../lib/scenario.ts";
import {
  assertApplies,
  assertHeartbeat,
  declare,
  enrol,
  HOST_UNIT_FILES,
  meshUp,
  startHost,
} from "../mesh/steps.ts";
import { files, srvFile } from "./_link.ts";

const BUNDLE = json(files(srvFile("substrate", "/srv/substrate/marker", "raised by the bundle\n")));

/** The first node: no mesh, so it applies the bundle; then the mesh comes up and it joins. */
export const scenario: Scenario = {
  name: "first-node",
  summary: "a machine with no mesh applies the bundle it carries; the control plane comes up on " +
    "the broker, the same node enrols and then takes pushed declarations through the same path",
  broker: true,
  machines: {
    first: {
      flavour: "systemd",
      host: true,
      files: {
        ...HOST_UNIT_FILES,
        "/srv/substrate/.keep": "",
      },
    },
  },
  steps: [
    // The package ships an empty bundle; this machine's bundle says what the first node runs.
    writeFile("first", "/usr/share/nox-mesh-host/substrate.lock", BUNDLE),
    startHost("first"),
    waitFor(
      assertFile("first", "/srv/substrate/marker", { content: "raised by the bundle\n" }),
      60,
    ),
    run("first", ["nox-mesh-host", "status"], { stdoutIncludes: "not enrolled" }),
    meshUp(),
    enrol("first", "first"),
    declare("first", files(srvFile("hello", "/srv/substrate/hello", "from the mesh\n"))),
    waitFor(assertFile("first", "/srv/substrate/hello", { content: "from the mesh\n" }), 60),
    waitFor(assertApplies("first", [1]), 30),
    assertFile("first", "/srv/substrate/marker", { absent: true }),
    waitFor(assertHeartbeat("first", 1), 30),
    run("first", ["nox-mesh-host", "status"], { stdoutIncludes: "link         up since" }),
  ],
};
