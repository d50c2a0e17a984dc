/**
 * `rescue`: the store forgets what it holds, the machine keeps everything, and the mesh
 * declares this node again (src/engine/hold.ts). A running service notices the rescue in
 * the store and starts again (exit 10, not counted), so its new link asks the mesh for
 * the node's declaration.
 */
import { rescue, whoRuns } from "../engine/hold.ts";
import { acquireApplyLock } from "../lock.ts";
import { isCurrent, readRunStatus } from "../run/run_status.ts";
import type { Command } from "./command.ts";
import { readEnv, waitSeconds } from "./cmd_hold.ts";
import { EXIT } from "./io.ts";

/** `rescue`. */
export const rescueCommand: Command = {
  name: "rescue",
  summary: "forget what the store holds (removing nothing) and take this node's state afresh",
  usage: "rescue [--wait SECS]",
  help: `For a node whose store no longer says what the machine is (restored from an old
copy, edited, or holding things a person has since changed by hand). The store
forgets every resource it holds, every create cut short and the declaration it
holds the machine to; nothing is removed from the machine. The identity stays, and
so does the last serial accepted from the link: an older declaration is still
refused as a replay.

An enrolled node then takes its declaration from the mesh again: the running
service starts again (exit 10, not counted by the launcher) and its link asks for
the node's declaration; until one arrives it holds nothing (the bundle is not
applied). A node that is not enrolled takes the bundle again. The next apply is
reported as a rescue: what its declaration names is adopted as found (resources
already as declared are unchanged), what it does not name stays on the machine,
unmanaged. What the host made before the rescue and is adopted again counts as
found, not made by it: a later declaration that drops such a file or directory
forgets it rather than removing it (containers, overlay interfaces and firewall
tables carry the host's mark and are still removed).

Waits (up to --wait seconds) for an apply that is running, and never cuts one.

Options:
  --wait SECS   how long to wait for an apply that is running (default 30)
Exit codes: 0 rescued, 70 the store cannot be opened, 75 busy (an apply still
  running), 78 configuration.
`,
  options: { wait: { type: "string" } },
  positionals: [0, 0],
  async run(ctx) {
    const wait = waitSeconds(ctx.values.wait);
    // The engine, and the link's identity, load only when the command runs (main.ts).
    const [{ openEngine }, { readIdentity }] = await Promise.all([
      import("./_engine.ts"),
      import("./_link.ts"),
    ]);
    using host = await openEngine({ ...ctx.flags, providers: ctx.io.providers });
    const { store } = host;
    let done;
    {
      using _lock = await acquireApplyLock(host.config.stateDir, { waitMs: wait * 1000 });
      done = rescue(store, whoRuns(readEnv));
    }
    const enrolled = readIdentity(store) !== undefined;
    const run = readRunStatus(store);
    const running = run !== null && isCurrent(run);
    if (ctx.json) {
      ctx.io.stdout(JSON.stringify({ rescue: done, enrolled, serviceRunning: running }) + "\n");
      return EXIT.ok;
    }
    const source = enrolled ? "the mesh for this node's declaration" : "the bundle again";
    ctx.io.stdout(
      `rescued by ${done.by}: the store forgot ${done.forgot} held resource(s)` +
        `${done.serial === undefined ? "" : ` and the declaration of serial ${done.serial}`}; ` +
        "nothing was removed from the machine\n" +
        (running
          ? `the service starts again and asks ${source}\n`
          : `the service is not running: when it starts it asks ${source}\n`) +
        "what that declaration names is adopted; the rest stays on the machine, unmanaged\n",
    );
    return EXIT.ok;
  },
};
