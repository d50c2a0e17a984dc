import { assertFails, assertFile, type Scenario, waitFor } from "../lib/scenario.ts";
import {
  assertApplies,
  declare,
  enrol,
  HOST_UNIT_FILES,
  meshUp,
  mintToken,
  startHost,
} from "../mesh_steps/link_steps.ts";
import { files, srvFile } from "./_link.ts";

let token = "";

/** A second machine joins with a token; the token cannot be used again. */
export const scenario: Scenario = {
  name: "join",
  summary: "a machine enrols with a one-time token, applies a pushed declaration and its report " +
    "arrives; a second use of the token (from another machine) is refused, and a token on the " +
    "command line is refused before it is used",
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
      title: "a token on the command line is refused before anything is sent",
      run: (ctx) =>
        assertFails("thief", ["nox-mesh-host", "enrol", "--token", token], {
          code: 64,
          stderrIncludes: "a token on the command line can be read by any local user",
        }).run(ctx),
    },
    {
      title: "the same token on another machine (on stdin) is refused",
      async run(ctx) {
        const r = await ctx.machine("thief").exec(["nox-mesh-host", "enrol", "--token", "-"], {
          input: token,
        });
        if (r.code !== 69 || !r.stderr.includes("the token was already used")) {
          throw new Error(
            `expected exit 69 saying "the token was already used"; got exit ${r.code}: ${
              r.stderr.slice(0, 500)
            }`,
          );
        }
      },
    },
  ],
};
