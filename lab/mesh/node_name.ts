/**
 * A node's name as the stand-in's records (state.ts) and the broker configuration rendered
 * from them (auth.ts) accept it: a module of its own, so that auth.ts, which state.ts
 * renders with, imports nothing of state.ts.
 */
import { NODE_ID } from "../../src/declaration/fields.ts";

/**
 * Refuses a node name that is not a node id (src/declaration/fields.ts NODE_ID): the
 * name becomes an account name and subject tokens of the broker's configuration, where
 * a `.`, `*` or `>` would widen a node's permissions to other nodes' subjects and a quote
 * or newline would be configuration of its own.
 */
export function checkNodeName(node: string): void {
  if (!NODE_ID.test(node)) {
    throw new Error(
      `refusing node name ${JSON.stringify(node)}: a node id is 1–63 lowercase letters, ` +
        "digits and -, starting with a letter or digit",
    );
  }
}
