// The lab's arm64 machine (scenario arm64-tarball) is skipped, with its reason, where
// binfmt_misc cannot run aarch64 programs inside a machine; the scenario itself runs in the lab.
import assert from "node:assert/strict";
import { binfmtProblem } from "../lab/lib/base.ts";
import { runScenario } from "../lab/lib/runner.ts";
import { scenario } from "../lab/scenarios/arm64_tarball.ts";

const ENTRY = (flags: string, state = "enabled") =>
  `${state}\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: ${flags}\noffset 0\n` +
  "magic 7f454c460201010000000000000000000200b700\n";

Deno.test("lab arm64: binfmt_misc's qemu-aarch64 entry must exist, be enabled and carry F", () => {
  assert.equal(binfmtProblem(ENTRY("POF")), undefined);
  assert.match(
    binfmtProblem(undefined)!,
    /no qemu-aarch64 entry .*qemu-user-static.*lab\/setup\.sh/,
  );
  assert.match(binfmtProblem(ENTRY("POF", "disabled"))!, /is disabled/);
  // Without F the interpreter is looked up in the machine's root, where it is not.
  assert.match(binfmtProblem(ENTRY("PO"))!, /lacks the F flag/);
});

Deno.test("lab arm64: a scenario that cannot run here is skipped with its reason, nothing raised", async () => {
  const lines: string[] = [];
  const reason = "binfmt_misc has no qemu-aarch64 entry (this test's)";
  const result = await runScenario(
    { ...scenario, skip: () => Promise.resolve(reason) },
    { logsRoot: "/nonexistent", out: (l) => lines.push(l) },
  );
  assert.equal(result.ok, true);
  assert.equal(result.skipped, reason);
  assert.deepEqual(result.raises, []);
  assert.ok(lines.some((l) => l.includes(`arm64-tarball SKIPPED: ${reason}`)), lines.join("\n"));
});
