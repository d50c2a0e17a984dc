/**
 * The soak's small form (issue 37): `run`, packaged and started as the launcher starts it, takes
 * 300 pushes and 10 drift passes (`deno task bench:soak`, tests/bench/soak_bench.ts) and its
 * resident set, sampled every 10 events, must not climb over the last half by more than 128 KiB
 * an event (the bench's own bound, `--max-slope`, which fails its run). Memory, not time: a
 * loaded machine makes the run slower, not larger. What it would have caught: `run` kept about
 * 500 KiB per push before 3c32fea and 14a17ab (tests/bench/RESULTS.md, "`run` grew with every
 * push"); the small form of a run that holds flat moves by 10–40 KiB an event between samples.
 * The full soak (10,000 pushes, 1,000 drift passes, 64 KiB per 1,000 events) is a bench.
 */
import assert from "node:assert/strict";
import { join } from "node:path";

const REPO = join(import.meta.dirname!, "..");
const root = Deno.uid() === 0;

Deno.test({
  name: root
    ? "soak, small form: 300 pushes and 10 drift passes leave run's resident set flat (≤ 128 KiB an event over the last half)"
    : "soak, small form (skipped: needs root: the pushed files are owned by root, the packaged host writes under /var/lib)",
  ignore: !root,
  async fn() {
    const out = await new Deno.Command("timeout", {
      args: [
        "--kill-after=30",
        "900",
        Deno.execPath(),
        "task",
        "bench:soak",
        "--packaged",
        "--pushes",
        "300",
        "--drifts",
        "10",
        "--sample",
        "10",
        "--resources",
        "11",
        "--max-slope",
        String(128 * 1000),
      ],
      cwd: REPO,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    const stderr = new TextDecoder().decode(out.stderr);
    const said = `stdout:\n${stdout.slice(-4000)}\nstderr:\n${stderr.slice(-4000)}`;
    assert.equal(out.code, 0, `the soak's small form failed (exit ${out.code})\n${said}`);
    assert.match(stdout, /^pushes applied \/ drift passes +300 \/ 10 /m, said);
    assert.match(
      stdout,
      /^RSS slope over the last half \(\d+ samples\) +-?[\d.]+ KiB\/1000 /m,
      said,
    );
  },
});
