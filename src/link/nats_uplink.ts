/**
 * The NATS link as the run loop's uplink (src/run/uplink.ts): what `run` hands the loop
 * (src/cli/cmd_run.ts). It reads the node's key when the loop opens it, so a key that
 * cannot be read is said as the link's problem and the loop holds the machine without it.
 */
import { readSeed } from "./identity.ts";
import { Link, type LinkOptions } from "./link.ts";
import type { OpenUplink } from "../run/uplink.ts";

/** Open the node's NATS link (`options`: tests shorten its timings). */
export function natsUplink(options: LinkOptions = {}): OpenUplink {
  return async (identity, handlers) =>
    new Link(identity, await readSeed(identity), handlers, options);
}
