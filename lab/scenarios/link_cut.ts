import { assertBroker, cutLink, restoreLink, type Scenario, waitFor } from "../lib/scenario.ts";

/** Two machines on the lab switch; one loses its link, the other keeps the broker. */
export const scenario: Scenario = {
  name: "link-cut",
  summary: "two machines reach the broker (TLS); cut one's link, the other still reaches it",
  broker: true,
  machines: {
    a: { flavour: "systemd" },
    b: { flavour: "systemd" },
  },
  steps: [
    assertBroker("a", true),
    assertBroker("b", true),
    cutLink("a"),
    assertBroker("a", false),
    assertBroker("b", true),
    restoreLink("a"),
    waitFor(assertBroker("a", true), 20),
  ],
};
