import { run, type Scenario, waitFor } from "../lib/scenario.ts";
import { assertLastApply, declare, enrol, meshUp, startHost } from "../mesh_steps/link_steps.ts";
import { assertConnect, assertOutput, driftUnitFiles, listen } from "./_netkinds.ts";

const RULES = `chain input {
  type filter hook input priority 0; policy accept;
  tcp dport 8081 counter drop
}`;
const BROKEN = `chain input {
  type filter hook input priority 0; policy accept;
  tcp dport 8082 drop drop
}`;
const table = (rules: string) => ({
  version: 1,
  resources: [{ type: "firewall", id: "edge", family: "inet", table: "edge", rules }],
});
const listTable = ["nft", "list", "table", "inet", "edge"];

/** "The firewall is asked whether the rule loaded." */
export const scenario: Scenario = {
  name: "firewall",
  summary: "a pushed firewall table drops TCP to one port (refused from another machine while " +
    "another port answers); a person flushes it and the next reconcile restores it; a pushed " +
    "syntax error is refused at plan, naming the line, and the loaded rules stay",
  broker: true,
  machines: {
    fw: { flavour: "systemd", host: true, files: driftUnitFiles(10) },
    client: { flavour: "systemd" },
  },
  steps: [
    meshUp(),
    enrol("fw", "fw"),
    startHost("fw"),
    listen("fw", 8081),
    listen("fw", 8082),
    waitFor(assertConnect("client", "fw", 8081, true), 20),
    declare("fw", table(RULES)),
    waitFor(assertOutput("fw", listTable, /tcp dport 8081 counter packets \d+ bytes \d+ drop/), 60),
    assertConnect("client", "fw", 8081, false),
    assertConnect("client", "fw", 8082, true),
    run("fw", ["nft", "flush", "table", "inet", "edge"]),
    assertConnect("client", "fw", 8081, true),
    waitFor(
      assertOutput(
        "fw",
        listTable,
        /tcp dport 8081 counter/,
        "the next reconcile reloads the table",
      ),
      60,
    ),
    assertConnect("client", "fw", 8081, false),
    declare("fw", table(BROKEN)),
    waitFor(assertLastApply("fw", 2, "failed", "line 3 of the rules"), 60),
    assertOutput("fw", listTable, /tcp dport 8081 counter/, "the loaded rules stay as they were"),
    assertConnect("client", "fw", 8081, false),
  ],
};
