/** `apply` and `plan`: a declaration from a file, standard input, or the bundle. */
import { posix } from "../posix_path.ts";
import type { Source } from "../store/records.ts";
import { UsageError } from "../errors.ts";
import type { Command, CommandContext } from "./command.ts";
import { EXIT } from "./io.ts";
import { planLines, reportLine, resultLine } from "./format.ts";

const EXIT_HELP = `Exit codes: 0 converged, 1 apply failed, 2 declaration refused, 64 usage,
  66 input unreadable, 70 the host cannot work (store), 75 busy (another apply), 78 configuration.`;

/** `apply FILE|-` or `apply --bundle [FILE]`. */
export const applyCommand: Command = {
  name: "apply",
  summary: "make this machine match a declaration (a file, stdin, or the bundle)",
  usage: "apply FILE|-  |  apply --bundle [FILE]",
  help: `Apply a declaration: check every resource in declared order, change what differs,
read it back, record it, and remove what this host created before and is no longer
declared. Stops at the first failure. A file or stdin gets the safe parse (no
"action"); --bundle applies the bundle the package ships (default
/usr/share/nox-mesh-host/substrate.lock) with the trusted parse. The service (run)
reads only the configured bundle again; another FILE given here is held to the
body stored now, and a later edit of that file is never read.

Options:
  --bundle      apply the bundle (optionally at FILE) with the trusted parse
  -q, --quiet   print only changes, removals, failures and the summary
  --wait SECS   how long to wait while another apply runs (default 30)
${EXIT_HELP}
`,
  options: {
    bundle: { type: "boolean" },
    quiet: { type: "boolean", short: "q" },
    wait: { type: "string" },
  },
  positionals: [0, 1],
  async run(ctx) {
    const wait = ctx.values.wait === undefined ? 30 : Number(ctx.values.wait);
    if (!Number.isFinite(wait) || wait < 0) {
      throw new UsageError(`--wait takes a number of seconds, not "${ctx.values.wait}"`);
    }
    const { text, source, origin } = await readInput(ctx);
    // The engine is loaded when a command uses it (the link never is, here).
    const { applyText, openEngine } = await import("./_engine.ts");
    using host = await openEngine({ ...ctx.flags, providers: ctx.io.providers });
    const quiet = ctx.values.quiet === true;
    const report = await applyText(host, text, {
      source,
      origin,
      signal: ctx.io.signal,
      lockWaitMs: wait * 1000,
      onResult: ctx.json ? undefined : (result) => {
        if (!quiet || result.outcome !== "unchanged") ctx.io.stdout(resultLine(result));
      },
    });
    if (ctx.json) ctx.io.stdout(JSON.stringify(report) + "\n");
    else ctx.io.stdout(reportLine(report));
    return report.outcome === "converged" ? EXIT.ok : EXIT.failed;
  },
};

/** `plan FILE|-`. */
export const planCommand: Command = {
  name: "plan",
  summary: "show what apply would change, changing nothing",
  usage: "plan FILE|-  |  plan --bundle [FILE]",
  help: `Check every resource of a declaration against this machine and say, for each,
in-sync / create / change (with what differs), and which managed resources would be
removed or forgotten. Changes nothing, records nothing.

Options:
  --bundle      plan the bundle (optionally at FILE) with the trusted parse
Exit codes: 0 planned, 2 declaration refused, 64 usage, 66 input unreadable, 70 the host
  cannot work (store), 78 configuration.
`,
  options: { bundle: { type: "boolean" } },
  positionals: [0, 1],
  async run(ctx) {
    const { text, source, origin } = await readInput(ctx);
    const { openEngine, planText } = await import("./_engine.ts");
    using host = await openEngine({ ...ctx.flags, providers: ctx.io.providers });
    const entries = await planText(host, text, { source, origin });
    ctx.io.stdout(ctx.json ? JSON.stringify({ entries }) + "\n" : planLines(entries));
    return EXIT.ok;
  },
};

/** An input that could not be read (exit 66). */
export class InputError extends UsageError {}

async function readInput(
  ctx: CommandContext,
): Promise<{ text: Uint8Array; source: Source; origin: string }> {
  const bundle = ctx.values.bundle === true;
  const [file] = ctx.positionals;
  if (!bundle && file === undefined) {
    throw new UsageError(
      "name the declaration to apply: a FILE, - for standard input, or --bundle",
    );
  }
  if (file === "-") {
    return { text: await ctx.io.stdin(), source: bundle ? "bundle" : "file", origin: "stdin" };
  }
  // Absolute, as recorded and as its blobs/ are looked for: the file system adapter
  // moves the process's working directory while it works (os/posix-fs).
  const bundlePath = async () => {
    const { loadConfig } = await import("./_engine.ts");
    return (await loadConfig(ctx.flags)).bundlePath;
  };
  const path = posix.resolve(file ?? await bundlePath());
  try {
    return { text: await Deno.readFile(path), source: bundle ? "bundle" : "file", origin: path };
  } catch (error) {
    const why = error instanceof Deno.errors.NotFound
      ? "it does not exist"
      : error instanceof Deno.errors.NotCapable
      ? "the host's permission set does not let it read there"
      : (error as Error).message;
    throw new InputError(`cannot read ${path}: ${why}`, {
      hint: "check the path, or pipe it in: nox-mesh-host apply - < FILE",
    });
  }
}
