import { assertFails, assertFile, type Scenario, waitFor } from "../lib/scenario.ts";
import {
  assertApplies,
  declare,
  enrol,
  HOST_UNIT_FILES,
  meshUp,
  mintToken,
  startHost,
} from "../mesh/steps.ts";
import { files, srvFile } from "./_link.ts";

let token = "";

/** A second machine joins with a token; the token cannot be used again. */
export const scenario: Scenario = {
  name: "join",
  summary: "a machine enrols with a one-time token, applies a pushed declaration and its report " +
    "arrives; a second use of the token (from another machine) is refused",
  broker: true,
  machines: {
    joiner: { flavour: "systemd", host: true, files: HOST_UNIT_FILES },
    thief: { flavour: "systemd", host: true, files: HOST_UNIT_FILES },
  },
  steps: [
    meshUp(),
    mintToken("joiner", (t) => token = t),
    enrol("joiner", "joiner", () => token),
    startHost("joiner"),
    declare("joiner", files(srvFile("motd", "/srv/motd", "joined\n"))),
    waitFor(assertFile("joiner", "/srv/motd", { content: "joined\n" }), 60),
    waitFor(assertApplies("joiner", [1]), 30),
    {
      title: "the same token on another machine is refused",
      run: (ctx) =>
        assertFails("thief", ["nox-mesh-host", "enrol", "--token", token], {
          code: 69,
          stderrIncludes: "the token was already used",
        }).run(ctx),
    },
  ],
};
