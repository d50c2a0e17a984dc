/**
 * A declaration at the size limit, of every shape a hostile sender could pick to make a
 * check slow (tests/_declaration_shapes.ts), is parsed well inside a generous bound, and
 * answered as expected, never with a crash (issue 22: the allowed-ips overlap check and
 * the restartOn check took time that grew with the square of the input, hours at 8 MiB).
 * Each parse runs in a worker that is stopped at the bound, so a slow parse fails the test
 * in seconds, not hours. The figures are `deno task bench:parse`'s; this asserts only the
 * bound, which holds on a loaded 2-core machine.
 */
import assert from "node:assert/strict";
import { DEFAULT_LIMITS } from "../src/declaration/limits.ts";
import { SHAPES } from "./_declaration_shapes.ts";

/**
 * A hang guard, not a timing figure (each parse takes under a second here; how long is
 * `deno task bench:parse`'s to say): a parse that never ends fails instead of stalling the suite,
 * and a machine loaded many times over still passes.
 */
const BOUND_MS = 120_000;

interface Answer {
  wallMs: number;
  outcome: string;
  bytes: number;
}

/** Parse shape `index` in a worker; `undefined` when it did not answer within the bound. */
async function parseInWorker(index: number): Promise<Answer | undefined> {
  const worker = new Worker(new URL("./_parse_worker.ts", import.meta.url), { type: "module" });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await new Promise<Answer | undefined>((resolve, reject) => {
      timer = setTimeout(() => resolve(undefined), BOUND_MS);
      worker.onmessage = (e: MessageEvent<Answer>) => resolve(e.data);
      worker.onerror = (e) => {
        e.preventDefault();
        reject(new Error(e.message));
      };
      worker.postMessage({ shape: index });
    });
  } finally {
    clearTimeout(timer);
    worker.terminate();
  }
}

for (const [index, shape] of SHAPES.entries()) {
  Deno.test(`at the size limit, parsed (a hang guard at ${BOUND_MS / 1000} s): ${shape.name}`, async () => {
    const answer = await parseInWorker(index);
    assert.ok(
      answer,
      `${shape.name}: no answer within ${BOUND_MS} ms: the parse hangs or is far slower than bench:parse says`,
    );
    assert.ok(answer.bytes <= DEFAULT_LIMITS.maxBytes, `${answer.bytes} bytes`);
    assert.match(answer.outcome, shape.expect === "accepted" ? /^accepted/ : /^refused$/);
  });
}

Deno.test("the shapes are at the limit: 8 MiB of text or 10,000 resources", () => {
  for (const shape of SHAPES) {
    const text = shape.text();
    const bytes = new TextEncoder().encode(text).length;
    const resources = text.match(/"type":/g)?.length ?? 0;
    assert.ok(
      bytes > 0.85 * DEFAULT_LIMITS.maxBytes || resources >= DEFAULT_LIMITS.maxResources ||
        shape.name.includes("10,000"),
      `${shape.name}: ${bytes} bytes, ${resources} resources`,
    );
  }
});
