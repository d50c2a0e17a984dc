/**
 * Runs the programs of `action` resources: an argv through Deno.Command,
 * never a shell. What may run is the permission set's business (--allow-run);
 * a refusal or a missing program is an error naming the program.
 */
import type { CommandResult, CommandRunner } from "../../src/providers.ts";
import { runProgram } from "../_run.ts";

/** How actions run. */
export interface CommandRunnerOptions {
  /** Kill a program after this long (default 10 minutes). */
  timeoutMs?: number;
  env?: Record<string, string>;
}

/**
 * Create the command runner.
 *
 * @example
 * ```ts
 * const r = await commandRunner().run(["/usr/bin/test", "-f", "/etc/hostname"]);
 * r.code; // 0
 * ```
 */
export function commandRunner(options: CommandRunnerOptions = {}): CommandRunner {
  return {
    async run(argv: readonly string[]): Promise<CommandResult> {
      if (argv.length === 0) throw new TypeError("an action needs at least the program to run");
      const { code, stdout, stderr } = await runProgram(argv, { ...options, cLocale: false });
      return { code, stdout, stderr };
    },
  };
}
