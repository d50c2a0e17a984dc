/**
 * When `run` gives freed memory back (src/run/give_back.ts): once it has had no work for the
 * quiet time, never while work runs, never between the pieces of a stream that come closer
 * than that. Real timers (a quiet time of 100 ms); nothing is asserted about how late a trim
 * comes, only whether it came.
 */
import assert from "node:assert/strict";
import { GiveBack } from "../src/run/give_back.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("give back: after the quiet time only; a stream of work closer than that never trims; work cancels a pending trim", async () => {
  let trims = 0;
  const g = new GiveBack(() => trims++, 100);
  g.idle();
  assert.equal(trims, 0, "not at once");
  await sleep(400);
  assert.equal(trims, 1, "once the loop stayed idle");
  // A stream: the loop idle for moments shorter than the quiet time.
  for (let i = 0; i < 10; i++) {
    g.idle();
    await sleep(5);
    g.busy();
    await sleep(5);
  }
  assert.equal(trims, 1, "no trim inside the stream");
  g.idle();
  await sleep(400);
  assert.equal(trims, 2, "one trim after the stream");
  g.idle();
  g.busy();
  await sleep(400);
  assert.equal(trims, 2, "no trim once work started");
});
