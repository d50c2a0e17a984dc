/** `run`: the service (src/run/loop.ts) with its log on stderr. */
import { BusyError, UsageError } from "../errors.ts";
import type { Command } from "./command.ts";
import { EXIT } from "./io.ts";

/** `run [--drift-interval S] [--heartbeat-interval S]`. */
export const runCommand: Command = {
  name: "run",
  summary: "the service: hold the link, apply what arrives, reconcile on a timer, report",
  usage: "run [--drift-interval SECS] [--heartbeat-interval SECS]",
  help: `Run as the node's service (the launcher starts this). Reconciles on start, on
every declaration pushed over the link, on reconnect, and every drift interval;
sends a heartbeat on link, after every apply and every heartbeat interval. With
no identity or no reachable broker it holds the machine to its store, or applies
the bundle when the store is empty. Logs one line per event on stderr.

Stops with exit 0 on SIGTERM/SIGINT (the current apply stops before its next
step), and with exit 0 after an apply when its own program file was replaced
(the supervisor then starts the new version). Above the memory ceiling
(host.json memoryCeilingMiB, default 256) it finishes its apply, reports why
and exits 10, which the launcher restarts without counting a failure. It
exits 10 the same way when the node is enrolled again while it runs (enrol
--replace), so that its link logs in with the new key.

Log lines carry their syslog level (<3> error, <4> warning, <6> info, <7> debug)
when the journal is the output (JOURNAL_STREAM set by systemd), plain otherwise.

Options:
  --drift-interval SECS      override driftIntervalSeconds (default 600)
  --heartbeat-interval SECS  override heartbeatIntervalSeconds (default 30)
Exit codes: 0 stopped by a signal or for a self-upgrade, 10 restart wanted (memory
  ceiling, enrolled again), 70 the host cannot work
  (store), 78 configuration.
`,
  options: {
    "drift-interval": { type: "string" },
    "heartbeat-interval": { type: "string" },
  },
  positionals: [0, 0],
  async run(ctx) {
    const seconds = (name: string): number | undefined => {
      const text = ctx.values[name];
      if (text === undefined) return undefined;
      const n = Number(text);
      if (!Number.isFinite(n) || n < 1) {
        throw new UsageError(`--${name} takes a number of seconds (at least 1), not "${text}"`);
      }
      return n;
    };
    const driftIntervalSeconds = seconds("drift-interval");
    const heartbeatIntervalSeconds = seconds("heartbeat-interval");
    // Everything the service runs on is loaded here, at its start: Deno reads every part
    // of the bundled program when the process starts, so a package upgrade that replaces
    // those files while it runs never mixes versions (packaging/README.md).
    const [{ openEngine }, link] = await Promise.all([
      import("./_engine.ts"),
      import("./_link.ts"),
    ]);
    const { acquireRunLock, journalIsOutput, logLine, openUplink, runService, wantsRestart } = link;
    using host = await openEngine({ ...ctx.flags, providers: ctx.io.providers });
    // One service per state directory. A second one (e.g. a respawned launcher
    // while an orphaned host still runs) waits for the first to end rather than
    // failing, so the launcher does not count it as a crash.
    let runLock: Disposable;
    try {
      runLock = await acquireRunLock(host.config.stateDir, {
        waitMs: Infinity,
        signal: ctx.io.signal,
        onWait: () =>
          ctx.io.stderr(
            `run: another run of this host holds ${host.config.stateDir}/run.lock; waiting for it to end\n`,
          ),
      });
    } catch (error) {
      if (error instanceof BusyError && ctx.io.signal?.aborted) return EXIT.ok;
      throw error;
    }
    using _runLock = runLock;
    // Under systemd the journal takes a line's priority from its <N> prefix.
    const journal = journalIsOutput(readEnv);
    const result = await runService(host, {
      signal: ctx.io.signal,
      log: (line, level) => ctx.io.stderr(logLine(line, level, journal)),
      // The transport to the control plane (_link.ts: the NATS link).
      uplink: openUplink(),
      profile: ctx.io.profile,
      giveBackMemory: ctx.io.memoryTrim?.(),
      driftIntervalSeconds,
      heartbeatIntervalSeconds,
    });
    // Not a failure, not an upgrade: the launcher starts it again without counting.
    return wantsRestart(result.reason) ? EXIT.restart : EXIT.ok;
  },
};

function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // not in the permission set: no journal prefix
  }
}
