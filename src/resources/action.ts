/**
 * The action resource (trusted bundle only): `verify` says whether the work is
 * done (exit 0 = satisfied, nothing runs); otherwise `run` runs, and the
 * engine's read-back runs `verify` again, which must then pass. `verify` must
 * only look, never change anything: `plan` runs it too. An action leaves
 * nothing to release.
 */
import * as v from "valibot";
import { argv, resourceId } from "../declaration/fields.ts";
import type { CommandResult, CommandRunner } from "../providers.ts";
import { shownArgv } from "../argv.ts";
import {
  type Change,
  change,
  type Diff,
  type KindContext,
  type Release,
  type ResourceKind,
} from "./kind.ts";
import { NoProviderError, ResourceError } from "./kind.ts";

/** Resource (trusted parse only): a program run when its verify program says it is needed. */
export const ActionSchema = v.strictObject({
  type: v.literal("action"),
  id: resourceId,
  run: argv("run"),
  verify: argv("verify"),
});

/** An action resource (bundle only). */
export type ActionResource = v.InferOutput<typeof ActionSchema>;

function commands(ctx: KindContext): CommandRunner {
  const runner = ctx.providers.commands;
  if (!runner) throw new NoProviderError("action", "a command runner");
  return runner;
}

function said(result: CommandResult): string {
  const lines = (result.stderr || result.stdout).split("\n").map((l) => l.trim()).filter(Boolean);
  return lines.length ? `: ${lines.slice(-5).join(" | ")}` : "";
}

/** The action kind. */
export const actionKind: ResourceKind<ActionResource, Change<"run">> = {
  type: "action",
  schema: ActionSchema,
  trustedOnly: true,
  needs: "commands",

  key: (resource) => `action:${resource.id}`,

  async check(ctx: KindContext, resource: ActionResource): Promise<Diff<Change<"run">>> {
    const result = await commands(ctx).run(resource.verify);
    if (result.code === 0) return { exists: true, changes: [] };
    return {
      exists: true,
      changes: [
        change("run", `verify \`${shownArgv(resource.verify)}\` exited ${result.code}: run`),
      ],
    };
  },

  async apply(ctx: KindContext, resource: ActionResource): Promise<void> {
    const result = await commands(ctx).run(resource.run);
    if (result.code !== 0) {
      throw new ResourceError(
        "resource.action-failed",
        `\`${shownArgv(resource.run)}\` exited ${result.code}${said(result)}`,
      );
    }
  },

  release(): Promise<Release> {
    return Promise.resolve({ outcome: "forgotten", detail: "an action leaves nothing to remove" });
  },
};
