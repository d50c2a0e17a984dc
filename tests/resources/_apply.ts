/** What the tests of files and directories share (tests/apply_test.ts, tests/resources/). */
import { applyText } from "../../src/engine/mod.ts";
import type { hostOn } from "../_helpers.ts";

/** Apply `resources` (a declaration read from a file) with the engine `host`. */
export const apply = (
  host: Awaited<ReturnType<typeof hostOn>>,
  resources: unknown[],
  onResult?: () => void,
) =>
  applyText(host, JSON.stringify({ version: 1, resources }), {
    source: "file",
    origin: "test",
    onResult,
  });
