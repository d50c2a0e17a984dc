import { apply, json, type Scenario } from "../lib/scenario.ts";
import { assertOutput, assertPlan } from "./_netkinds.ts";

const KEY = "net.netfilter.nf_conntrack_tcp_timeout_established";
const setting = (value: number) =>
  json({
    version: 1,
    resources: [{ type: "sysctl", id: "conntrack-established", key: KEY, value }],
  });
const read = ["sysctl", "-n", KEY];

/** "conntrack is asked what timeout it holds": a kernel setting applied, read back, restored. */
export const scenario: Scenario = {
  name: "conntrack",
  summary: "a sysctl for conntrack's TCP established timeout is planned in words, applied and " +
    "read back from the kernel; a person's change is repaired; dropped, the value seen before " +
    "the first apply is restored",
  machines: {
    node: {
      flavour: "systemd",
      host: true,
      files: {
        "/root/decl-600.json": setting(600),
        "/root/decl-none.json": json({ version: 1, resources: [] }),
      },
    },
  },
  steps: [
    assertOutput("node", read, /^432000\n$/, "the kernel's own value is 432000"),
    assertPlan("node", "/root/decl-600.json", /value 432000 -> 600/),
    apply("node", "/root/decl-600.json", { outcome: "converged", changed: 1 }),
    assertOutput("node", read, /^600\n$/, "conntrack holds 600"),
    apply("node", "/root/decl-600.json", { outcome: "converged", unchanged: 1 }),
    {
      title: "a person sets it to 1234",
      async run(ctx) {
        await ctx.machine("node").exec(["sysctl", "-w", `${KEY}=1234`]);
      },
    },
    assertPlan("node", "/root/decl-600.json", /value 1234 -> 600/),
    apply("node", "/root/decl-600.json", { outcome: "converged", changed: 1 }),
    assertOutput("node", read, /^600\n$/, "conntrack holds 600 again"),
    apply("node", "/root/decl-none.json", { outcome: "converged", removed: 1 }),
    assertOutput("node", read, /^432000\n$/, "restored to 432000"),
  ],
};
