import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { LabError } from "./errors.ts";
import { run, tail } from "./_process.ts";

/** The checkout this lab library belongs to. */
export const CHECKOUT: string = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Bundles `entry` (relative to the checkout) into one JS file at `output` with `deno bundle`. */
export async function bundle(entry: string, output: string): Promise<void> {
  const r = await run(["deno", "bundle", "--quiet", "--output", output, entry], {
    check: false,
    cwd: CHECKOUT,
    what: `deno bundle ${entry}`,
  });
  if (r.code !== 0) {
    throw new LabError(
      "command-failed",
      `deno bundle ${entry} failed (exit ${r.code}) in ${CHECKOUT}:\n${tail(r.stderr + r.stdout)}`,
    );
  }
}

/** Deno flags the NATS probe runs with inside a machine. */
export const PROBE_FLAGS: readonly string[] = ["--allow-net", "--allow-read", "--allow-env"];
