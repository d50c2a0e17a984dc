import { fail, json, run, type Scenario, type Step, waitFor, writeFile } from "../lib/scenario.ts";
import { BROKER_ADDRESS } from "../lib/net.ts";
import { VERSION } from "../../src/version.ts";
import {
  assertJournal,
  declare,
  enrol,
  mesh,
  meshUp,
  startHost,
} from "../mesh_steps/link_steps.ts";
import { assertConnect, assertOutput, driftUnitFiles, listen } from "./_netkinds.ts";

/** Short, so the scenario runs in about a minute; the default is 120 s. */
const WINDOW_S = 30;

const HARMLESS = `chain input {
  type filter hook input priority 0; policy accept;
  tcp dport 8081 counter drop
}`;
/** What the node sends to its broker is dropped: its link is cut by its own rule. */
const CUT = `chain output {
  type filter hook output priority -500; policy accept;
  ip daddr ${BROKER_ADDRESS} drop
}`;
const table = (rules: string) => ({
  version: 1,
  resources: [{ type: "firewall", id: "edge", family: "inet", table: "edge", rules }],
});
const listTable = ["nft", "list", "table", "inet", "edge"];

/** The reports `node` sent, as the broker keeps them. */
async function reports(
  ctx: Parameters<Step["run"]>[0],
  node: string,
): Promise<Record<string, unknown>[]> {
  return JSON.parse(await mesh(ctx, ["reports", node]));
}

/**
 * Asserts whether `machine`'s packets reach the broker: a TLS NATS client from it gets an
 * answer (the broker refusing its anonymous login is an answer: the path works) or not.
 */
function assertBrokerPath(machine: string, reachable: boolean): Step {
  return {
    title: `assert what ${machine} sends ${reachable ? "reaches" : "never reaches"} the broker`,
    async run(ctx) {
      const verdict = await ctx.lab.probeBroker(ctx.machine(machine));
      const answered = verdict.ok || /Authorization Violation/.test(verdict.error ?? "");
      if (answered !== reachable) {
        fail(reachable ? "an answer" : "no answer", verdict.ok ? "a login" : `${verdict.error}`);
      }
    },
  };
}

/** Asserts `node` reported `serial` refused as unconfirmed, exactly once. */
function assertRefusedUnconfirmed(node: string, serial: number): Step {
  return {
    title: `assert ${node} reported serial ${serial} refused as unconfirmed (once)`,
    async run(ctx) {
      const refused = (await reports(ctx, node)).filter((r) =>
        r.kind === "refused" && r.serial === serial
      );
      const seen = JSON.stringify(refused).slice(0, 600) || "none";
      if (refused.length !== 1 || refused[0].reason !== "unconfirmed") {
        fail(`one refusal of serial ${serial} with reason "unconfirmed"`, seen);
      }
      if (!/went back to serial \d+/.test(String(refused[0].message))) {
        fail("a message saying where the node went back to", seen);
      }
    },
  };
}

/** Asserts `node` reported going back (trigger revert) from `cut` to `serial`, converged. */
function assertWentBack(node: string, cut: number, serial: number): Step {
  return {
    title: `assert ${node} reported going back from serial ${cut} to serial ${serial}`,
    async run(ctx) {
      const applies = (await reports(ctx, node)).filter((r) => r.kind === "apply");
      const at = applies.findIndex((r) => r.trigger === "revert");
      const back = applies[at];
      const seen = applies.map((r) => `${r.serial} ${r.trigger} ${r.outcome}`).join(", ");
      if (back?.serial !== serial || back.outcome !== "converged") {
        fail(`serial ${serial} revert converged`, seen);
      }
      if (!applies.slice(0, at).some((r) => r.serial === cut)) {
        fail(`the revert after an apply of serial ${cut}`, seen);
      }
    },
  };
}

/** Asserts no apply report of `serial` came after the one that went back. */
function assertNotAppliedAgain(node: string, serial: number): Step {
  return {
    title: `assert ${node} never applied serial ${serial} again after going back`,
    async run(ctx) {
      const applies = (await reports(ctx, node)).filter((r) => r.kind === "apply");
      const back = applies.findIndex((r) => r.trigger === "revert");
      const again = applies.slice(back + 1).filter((r) => r.serial === serial);
      if (back < 0 || again.length > 0) {
        fail("none after the revert", JSON.stringify(again.map((r) => r.trigger)));
      }
    },
  };
}

/** "The way back in": a change pushed over the link that cuts the node off undoes itself. */
export const scenario: Scenario = {
  name: "confirm",
  summary: "a pushed firewall table that drops the node's traffic to its broker is undone " +
    `when no heartbeat is acknowledged within the confirm window (${WINDOW_S} s here): the ` +
    "node goes back to the table it held, reports the serial refused once its link is back, " +
    "and never applies it again (drift passes, a restart); a harmless table is confirmed and " +
    "stays; a later serial is taken normally",
  broker: true,
  machines: {
    fw: { flavour: "systemd", host: true, files: driftUnitFiles(10) },
    client: { flavour: "systemd" },
  },
  steps: [
    meshUp(),
    enrol("fw", "fw"),
    writeFile("fw", "/etc/mesh-host/host.json", json({ confirmWindowSeconds: WINDOW_S })),
    startHost("fw"),
    listen("fw", 8081),
    waitFor(assertConnect("client", "fw", 8081, true), 20),

    // Harmless: confirmed by the first heartbeat the broker answers, and it stays.
    declare("fw", table(HARMLESS)),
    waitFor(assertJournal("fw", "confirm: serial 1 confirmed"), 60),
    assertConnect("client", "fw", 8081, false),

    // The cut: the node's own rule drops what it sends to the broker.
    declare("fw", table(CUT)),
    waitFor(
      assertOutput("fw", listTable, /ip daddr [\d.]+ drop/, "the cutting rule is loaded"),
      30,
    ),
    assertBrokerPath("fw", false),
    waitFor(assertRefusedUnconfirmed("fw", 2), WINDOW_S + 90),
    waitFor(assertWentBack("fw", 2, 1), 30),
    assertOutput("fw", listTable, /tcp dport 8081 counter/, "the table it held is back"),
    assertBrokerPath("fw", true),
    assertConnect("client", "fw", 8081, false),

    // Never again: drift passes (every 10 s), and a restart whose catch-up hands serial 2 over.
    run("fw", ["systemctl", "restart", "nox-mesh-host"]),
    waitFor(assertJournal("fw", "serial 2 arrived again", `run: ${VERSION} starting`), 60),
    waitFor(
      assertJournal("fw", "apply (drift, link serial 1): converged", `run: ${VERSION} starting`),
      60,
    ),
    assertNotAppliedAgain("fw", 2),
    assertOutput("fw", listTable, /tcp dport 8081 counter/, "still the table it held"),
    waitFor(assertRefusedUnconfirmed("fw", 2), 10),

    // A later serial is taken normally.
    declare("fw", table(HARMLESS.replace("8081", "8082"))),
    waitFor(assertJournal("fw", "confirm: serial 3 confirmed"), 60),
    assertConnect("client", "fw", 8081, true),
  ],
};
