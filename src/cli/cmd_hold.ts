/**
 * `hold REASON` and `unhold`: a person stops the host applying anything while they
 * work on the machine (Puppet's `agent --disable "reason"` / `--enable`). The hold
 * lives in the store (src/engine/hold.ts): the running service reads it there.
 */
import { clearHold, HeldError, readHold, setHold, whoRuns } from "../engine/hold.ts";
import { BusyError, UsageError } from "../errors.ts";
import { acquireApplyLock } from "../lock.ts";
import type { Command } from "./command.ts";
import { EXIT } from "./io.ts";

/** Read an environment variable the permission set may not grant. */
export function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

/** --wait SECS (default 30), as apply takes it. */
export function waitSeconds(value: string | boolean | undefined): number {
  const wait = value === undefined ? 30 : Number(value);
  if (!Number.isFinite(wait) || wait < 0) {
    throw new UsageError(`--wait takes a number of seconds, not "${value}"`);
  }
  return wait;
}

/** `hold REASON`. */
export const holdCommand: Command = {
  name: "hold",
  summary: "stop applying while a person works on this machine (unhold lifts it)",
  usage: "hold REASON [--wait SECS]",
  help: `Hold the host: from now on nothing is applied, by the service or by apply, until
unhold. The reason, who held it (the user sudo ran this for, else the login name)
and since when are kept in the store; status shows them, and the service's
heartbeats carry them. While held the service still takes what the link pushes
(it stores the latest declaration) and checks the machine against it on every
trigger: what differs is logged and reported, never changed. unhold lifts the
hold and the running service applies the latest declaration.

An apply already running when the hold is put finishes; hold waits for it (up to
--wait seconds), so that when it returns nothing is changing the machine.

Options:
  --wait SECS   how long to wait for an apply that is running (default 30)
Exit codes: 0 held, 64 usage (no reason), 70 the store cannot be opened, 75 already
  held (by someone; unhold first), or an apply still running after --wait (the hold
  is set: nothing starts after it), 78 configuration.
`,
  options: { wait: { type: "string" } },
  positionals: [1, 1],
  positionalKind: "text",
  async run(ctx) {
    const reason = ctx.positionals[0].trim();
    if (reason === "") throw new UsageError('say why the host is held: hold "REASON"');
    if (reason.length > 500) throw new UsageError("keep the reason under 500 characters");
    const wait = waitSeconds(ctx.values.wait);
    const { openEngine } = await import("./_engine.ts");
    using host = await openEngine({ ...ctx.flags, providers: ctx.io.providers });
    const already = readHold(host.store);
    if (already) throw new HeldError(already);
    const hold = { reason, by: whoRuns(readEnv), since: new Date().toISOString() };
    setHold(host.store, hold);
    // An apply that began before the hold finishes: wait for it, so that nothing is
    // changing the machine once this returns.
    try {
      using _lock = await acquireApplyLock(host.config.stateDir, { waitMs: wait * 1000 });
    } catch (error) {
      if (!(error instanceof BusyError)) throw error;
      throw new BusyError(
        "held-busy",
        `held by ${hold.by}, but an apply that started before the hold is still running`,
        { hint: "it finishes, and nothing starts after it; status shows when it has ended" },
      );
    }
    if (ctx.json) ctx.io.stdout(JSON.stringify({ hold }) + "\n");
    else {
      ctx.io.stdout(
        `held by ${hold.by} since ${hold.since}: ${hold.reason}\n` +
          "nothing is applied until `nox-mesh-host unhold`\n",
      );
    }
    return EXIT.ok;
  },
};

/** `unhold`. */
export const unholdCommand: Command = {
  name: "unhold",
  summary: "lift a hold: the service applies the latest declaration",
  usage: "unhold",
  help: `Lift the hold put by hold, whoever put it. The running service notices within a
few seconds and applies the latest declaration it holds (the last one pushed while
held, or the one it held before), reported with the trigger "unhold". Lifting a
hold that is not there changes nothing. (Not "release": a resource that is no
longer declared is released; this lifts a hold.)
Exit codes: 0 lifted (or not held), 70 the store cannot be opened, 78 configuration.
`,
  options: {},
  positionals: [0, 0],
  async run(ctx) {
    const { openEngine } = await import("./_engine.ts");
    using host = await openEngine({ ...ctx.flags, providers: ctx.io.providers });
    const lifted = clearHold(host.store);
    if (ctx.json) ctx.io.stdout(JSON.stringify({ lifted }) + "\n");
    else if (!lifted) ctx.io.stdout("not held: nothing to lift\n");
    else {
      ctx.io.stdout(
        `lifted the hold of ${lifted.by} (since ${lifted.since}: ${lifted.reason})\n` +
          "the service applies the latest declaration now; status shows the outcome\n",
      );
    }
    return EXIT.ok;
  },
};
