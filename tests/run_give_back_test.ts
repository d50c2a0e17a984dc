/**
 * When `run` gives freed memory back (src/run/give_back.ts): when it waits for work, at once
 * the first time, then at most once per gap; never while work runs. The clock is the test's;
 * the timer is real (a gap of 50 ms), and nothing is asserted about how late it fires.
 */
import assert from "node:assert/strict";
import { GiveBack } from "../src/run/give_back.ts";

Deno.test("give back: at once when idle, then at most once per gap; a stream trims every gap, not every piece", async () => {
  let now = 0;
  let trims = 0;
  const g = new GiveBack(() => trims++, 50, () => now);
  g.idle();
  assert.equal(trims, 1, "the first wait trims at once");
  // A stream: pieces of work 10 ms apart, the loop idle between them.
  for (let i = 0; i < 4; i++) {
    g.busy();
    now += 10;
    g.idle();
  }
  assert.equal(trims, 1, "within the gap no piece trims");
  g.busy();
  now += 20; // 60 ms since the trim
  g.idle();
  assert.equal(trims, 2, "a piece after the gap trims at once");
  // Idle after a piece within the gap: the trim comes once the gap has passed.
  g.busy();
  now += 10;
  g.idle();
  assert.equal(trims, 2);
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(trims, 3, "the wait trims when the gap has passed");
  // Work that starts before the gap passes cancels the pending trim.
  now += 10;
  g.idle();
  g.busy();
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(trims, 3, "no trim while work runs");
});
