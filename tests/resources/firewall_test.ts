/**
 * The firewall kind for real: nftables inside a network namespace this test
 * makes. Packets are refused by the loaded table, a flush is drift that the next
 * apply repairs, a syntax error fails the plan naming the line and leaves the
 * loaded table as it was, a table the host did not create is never touched.
 */
import assert from "node:assert/strict";
import { detectNftables } from "../../os/nftables/detect.ts";
import { firstProblem, nftables, replaceText } from "../../os/nftables/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { parseDeclaration } from "../../src/engine/parse.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { type Netns, netns } from "./_netns.ts";

const PARSE = { managedRoots: ["/etc"], own: { paths: [], services: [] } };

const RULES = `chain input {
  type filter hook input priority 0; policy accept;
  tcp dport 8081 counter drop
}`;

function firewall(rules = RULES, table = "edge") {
  return { type: "firewall", id: "edge", family: "inet", table, rules };
}

async function engine(ns: Netns) {
  return await testEngine({ fs: posixFileSystem(), firewall: nftables({ via: ns.via }) });
}

/** Whether a TCP connection to 127.0.0.1:port inside `ns` is answered (a busybox nc listener). */
async function answers(ns: Netns, port: number): Promise<boolean> {
  const listener = new Deno.Command("ip", {
    args: ["netns", "exec", ns.name, "busybox", "nc", "-l", "-p", String(port)],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    for (let i = 0; i < 50; i++) {
      const ss = await ns.exec(["ss", "-ltn"]);
      if (ss.stdout.includes(`:${port} `)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = await ns.exec(["busybox", "nc", "-w", "2", "127.0.0.1", String(port)], "hello\n");
    return r.code === 0;
  } finally {
    try {
      listener.kill("SIGKILL");
    } catch { /* it ended */ }
    await listener.status;
  }
}

Deno.test({
  name: "firewall: the table drops what it says, a flush is drift repaired, release deletes it",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("fw");
    await using e = await engine(ns);
    assert.equal((await e.plan([firewall()]))[0].status, "create");
    const first = await e.apply([firewall()]);
    assert.equal(first.outcome, "converged", first.error);
    assert.ok(!await answers(ns, 8081), "8081 dropped");
    assert.ok(await answers(ns, 8082), "8082 answers");
    // Counters move with traffic: not drift.
    assert.deepEqual(outcomes(await e.apply([firewall()])), ["edge:unchanged"]);

    await ns.must(["nft", "flush", "table", "inet", "edge"]);
    const plan = (await e.plan([firewall()]))[0];
    assert.deepEqual(plan.changes, [
      "rule set changed on the machine (0 rules where 1 were loaded); reload it",
    ]);
    assert.deepEqual(outcomes(await e.apply([firewall()])), ["edge:changed"]);
    assert.match(await ns.must(["nft", "list", "table", "inet", "edge"]), /tcp dport 8081/);

    // A rule a person adds is drift too.
    await ns.must(["nft", "add", "rule", "inet", "edge", "input", "tcp", "dport", "9", "drop"]);
    assert.equal((await e.plan([firewall()]))[0].status, "change");

    // A changed declaration: said in words, loaded whole.
    const opened = firewall(RULES.replace("8081", "8083"));
    assert.deepEqual((await e.plan([opened]))[0].changes, ["rule set changed in the declaration"]);
    assert.equal((await e.apply([opened])).outcome, "converged");
    const listed = await ns.must(["nft", "list", "table", "inet", "edge"]);
    assert.match(listed, /tcp dport 8083/);
    assert.doesNotMatch(listed, /dport (8081|9) /);

    assert.deepEqual(outcomes(await e.apply([])), ["edge:removed"]);
    assert.equal((await ns.exec(["nft", "list", "table", "inet", "edge"])).code, 1);
  },
});

Deno.test({
  name: "firewall: a syntax error fails the plan naming the line; the loaded table stays as it was",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("fwsyn");
    await using e = await engine(ns);
    assert.equal((await e.apply([firewall()])).outcome, "converged");
    const before = await ns.must(["nft", "-j", "list", "table", "inet", "edge"]);
    const broken = firewall(`chain input {
  type filter hook input priority 0; policy accept;
  tcp dport 8081 drop drop
}`);
    const plan = (await e.plan([broken]))[0];
    assert.equal(plan.status, "unknown");
    assert.match(plan.detail ?? "", /do not load: line 3 of the rules: Statement after terminal/);
    const r = await e.apply([broken]);
    assert.equal(r.outcome, "failed");
    assert.match(r.error ?? "", /line 3 of the rules/);
    assert.equal(await ns.must(["nft", "-j", "list", "table", "inet", "edge"]), before);
  },
});

Deno.test({
  name: "firewall: a table the host did not create is never touched (refused, named)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("fwown");
    await using e = await engine(ns);
    await ns.must(["nft", "-f", "-"], "table inet edge {\n chain c {\n  counter\n }\n}\n");
    const before = await ns.must(["nft", "list", "table", "inet", "edge"]);
    const r = await e.apply([firewall()]);
    assert.equal(r.outcome, "failed");
    assert.match(r.error ?? "", /nftables table inet edge exists but was not created by this host/);
    assert.equal(await ns.must(["nft", "list", "table", "inet", "edge"]), before);
  },
});

Deno.test("firewall: rules that would leave their table, or read files, are refused at parse", async () => {
  const refused = async (rules: string) => {
    try {
      await parseDeclaration(
        JSON.stringify({ version: 1, resources: [firewall(rules)] }),
        PARSE,
      );
    } catch (error) {
      return (error as Error).message;
    }
    assert.fail(`accepted: ${rules}`);
  };
  assert.match(
    await refused("chain c {\n}\n}\nflush ruleset\ntable inet edge {"),
    /resources\[0\]\.rules: line 3: "}" closes the table itself/,
  );
  assert.match(await refused('include "/etc/shadow"'), /line 1: "include" is refused/);
  assert.match(await refused("chain c {"), /leave 1 "\{" unclosed/);
  assert.match(await refused('chain c { comment "a\n" }'), /string is not closed/);
  // Braces and the word inside strings and comments are only text.
  await parseDeclaration(
    JSON.stringify({
      version: 1,
      resources: [firewall('chain c { comment "} include {" # }\n}')],
    }),
    PARSE,
  );
  try {
    await parseDeclaration(
      JSON.stringify({ version: 1, resources: [{ ...firewall(), family: "bridge" }] }),
      PARSE,
    );
    assert.fail("accepted");
  } catch (error) {
    assert.match(
      (error as Error).message,
      /resources\[0\]\.family: family is one of inet, ip, ip6/,
    );
  }
});

Deno.test("firewall: one transaction replaces the table; nft's line numbers map to the rules", () => {
  assert.equal(
    replaceText("inet", "edge", "chain c {\n}", "nox-mesh-host"),
    'table inet edge\ndelete table inet edge\ntable inet edge {\n\tcomment "nox-mesh-host"\n' +
      "chain c {\n}\n}\n",
  );
  assert.deepEqual(
    firstProblem("/dev/stdin:7:3-4: Error: syntax error, unexpected junk\n"),
    { line: 3, message: "syntax error, unexpected junk" },
  );
  assert.throws(() => replaceText("inet", "x; flush ruleset", "", "m"), /not allowed/);
});

Deno.test({
  name: "firewall: profile finds nftables working (a scratch table), leaving nothing",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("fwprobe");
    const cap = await detectNftables({ via: ns.via });
    assert.equal(cap.state, "working", cap.evidence.join("; "));
    assert.equal((await ns.must(["nft", "list", "tables"])).trim(), "");
  },
});

Deno.test({
  name: "firewall: what the rules fill (a rate limit's dynamic set, a timeout's countdown) is " +
    "state, not drift: the table is not reloaded and the state is kept",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("fwd");
    await using e = await engine(ns);
    const rules = `set seen {
  type ipv4_addr; flags dynamic,timeout; timeout 1h;
}
set pinned {
  type ipv4_addr; flags timeout;
  elements = { 127.0.0.9 timeout 1h }
}
chain input {
  type filter hook input priority 0; policy accept;
  ip saddr 127.0.0.0/8 tcp dport 8083 add @seen { ip saddr limit rate 10/second } counter
}`;
    const first = await e.apply([firewall(rules)]);
    assert.equal(first.outcome, "converged", first.error);
    // Traffic makes the rule put the sender into @seen (and the countdowns move on).
    await answers(ns, 8083);
    const filled = async () => (await ns.must(["nft", "list", "set", "inet", "edge", "seen"]));
    assert.match(await filled(), /127\.0\.0\.1/, "the rule filled the set");
    await new Promise((r) => setTimeout(r, 1100));

    assert.deepEqual((await e.plan([firewall(rules)]))[0].changes, []);
    assert.deepEqual(outcomes(await e.apply([firewall(rules)])), ["edge:unchanged"]);
    assert.match(await filled(), /127\.0\.0\.1/, "the table was not reloaded: the set kept it");

    // A declared element a person deletes is still drift.
    await ns.must(["nft", "delete", "element", "inet", "edge", "pinned", "{ 127.0.0.9 }"]);
    assert.equal((await e.plan([firewall(rules)]))[0].status, "change");
    assert.deepEqual(outcomes(await e.apply([firewall(rules)])), ["edge:changed"]);
    assert.match(await ns.must(["nft", "list", "set", "inet", "edge", "pinned"]), /127\.0\.0\.9/);
  },
});
