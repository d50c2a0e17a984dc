/**
 * The seeded fuzzing test of the declaration parse (tests/declaration_fuzz.ts):
 * a few thousand mutated declarations, each refused with the parse's own error or
 * accepted only when every invariant holds. FUZZ_SEED / FUZZ_CASES override the
 * defaults; a finding prints its seed and case so it can be replayed.
 */
import assert from "node:assert/strict";
import { describe, fuzz, fuzzCase } from "./declaration_fuzz.ts";

const seed = Number(Deno.env.get("FUZZ_SEED") ?? 20240610);
const cases = Number(Deno.env.get("FUZZ_CASES") ?? 4000);

Deno.test(`declaration fuzz: ${cases} cases from seed ${seed}, every one refused or sound`, async () => {
  const { findings, accepted, refused } = await fuzz(cases, seed);
  assert.deepEqual(findings.map(describe), [], `seed ${seed}: ${findings.length} findings`);
  assert.equal(accepted + refused, cases);
  // The mutations must reach both sides, or the oracle proves nothing.
  assert.ok(accepted > cases / 50, `only ${accepted} of ${cases} cases were accepted`);
  assert.ok(refused > cases / 2, `only ${refused} of ${cases} cases were refused`);
});

Deno.test("declaration fuzz: a case is the same for the same seed and index", () => {
  assert.deepEqual(fuzzCase(7, 3), fuzzCase(7, 3));
  assert.notDeepEqual(fuzzCase(7, 3), fuzzCase(8, 3));
});
