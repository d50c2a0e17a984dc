/**
 * The command line (R11): parse, dispatch, and turn errors into exit codes and sentences.
 * Only the commands' descriptions and the error classes are loaded here: each command
 * loads what it runs on when it runs, so `version` loads nothing else (see main.ts).
 */
import { readArgs } from "./args.ts";
import { DeclarationRefused } from "../declaration/refused.ts";
import { BusyError, ConfigError, HostError, UsageError } from "../errors.ts";
import { COMMIT, FORM, PROGRAM, runtimeProblem, runtimeVersion, VERSION } from "../version.ts";
import { applyCommand, InputError, planCommand } from "./cmd_apply.ts";
import { type Command, GLOBAL_HELP, GLOBAL_OPTIONS } from "./command.ts";
import { type CliIo, EXIT } from "./io.ts";
import { inventoryCommand, profileCommand } from "./cmd_profile.ts";
import { statusCommand } from "./cmd_status.ts";
import { runCommand } from "./cmd_run.ts";
import { enrolCommand } from "./cmd_enrol.ts";
import { holdCommand, unholdCommand } from "./cmd_hold.ts";
import { rescueCommand } from "./cmd_rescue.ts";
import { LinkError, TokenError } from "../link/errors.ts";

const versionCommand: Command = {
  name: "version",
  summary: "print the version of this host",
  usage: "version",
  help: `Print the version of the running host. With --json: the version, the form it was
built in (compiled, bundled, or source when run from a checkout), the Deno version it runs
on and its architecture, and the commit it was built from.
`,
  options: {},
  positionals: [0, 0],
  run(ctx) {
    ctx.io.stdout(
      ctx.json
        ? JSON.stringify({
          program: PROGRAM,
          version: VERSION,
          form: FORM,
          deno: runtimeVersion(),
          arch: Deno.build.arch,
          commit: COMMIT,
        }) + "\n"
        : `${PROGRAM} ${VERSION}\n`,
    );
    return Promise.resolve(EXIT.ok);
  },
};

/** Every command, in the order help lists them. Later commands register here. */
export const COMMANDS: Command[] = [
  applyCommand,
  planCommand,
  statusCommand,
  runCommand,
  enrolCommand,
  holdCommand,
  unholdCommand,
  rescueCommand,
  profileCommand,
  inventoryCommand,
  versionCommand,
];

/** The top-level help text. */
export function overview(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return `${PROGRAM} ${VERSION}: makes this machine match its declared state.

Usage: ${PROGRAM} <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`).join("\n")}
  ${"help".padEnd(width)}show help for a command

${GLOBAL_HELP}
Run "${PROGRAM} <command> --help" for a command's options and exit codes.
`;
}

/**
 * Run the command line; returns the exit code.
 *
 * @example
 * ```ts
 * const code = await main(["status", "--json"], io);
 * ```
 *
 * Long because: the command table's dispatch: help, version, an unknown command, the options, the
 * exit codes of each way it ends, in the order they are tried.
 */
export async function main(args: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    // `help --help` and `help -h` ask for help about help: the overview says it.
    const about = rest[0] === "--help" || rest[0] === "-h" ? undefined : rest[0];
    const topic = name === "help" ? COMMANDS.find((c) => c.name === about) : undefined;
    if (name === "help" && about !== undefined && topic === undefined) {
      return usage(io, `unknown command "${rest[0]}"`);
    }
    io.stdout(topic ? commandHelp(topic) : overview());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  if (name === "--version") {
    return versionCommand.run({ io, values: {}, positionals: [], json: false, flags: {} });
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) return usage(io, `unknown command "${name}"`);
  // A built host runs only on the Deno it was tested on (Alpine's package runs on the
  // distribution's deno, which an upgrade can replace): one line, and a failure the
  // launcher counts. `version` still answers, to say what runs here.
  const untested = command === versionCommand ? undefined : runtimeProblem();
  if (untested) {
    io.stderr(`${PROGRAM}: ${untested}\n`);
    return EXIT.software;
  }

  let parsed;
  try {
    parsed = readArgs(rest, { ...GLOBAL_OPTIONS, ...command.options });
  } catch (error) {
    return usage(io, (error as Error).message, command);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.stdout(commandHelp(command));
    return EXIT.ok;
  }
  const [min, max] = command.positionals;
  if (positionals.length < min || positionals.length > max) {
    const extra = positionals.length > max
      ? `unexpected argument "${positionals[max]}"`
      : "missing argument";
    return usage(io, extra, command);
  }
  const json = values.json === true;
  try {
    return await command.run({
      io,
      values: values as Record<string, string | boolean | undefined>,
      positionals,
      json,
      flags: {
        stateDir: values["state-dir"] as string | undefined,
        configPath: values.config as string | undefined,
        ownPaths: io.ownPaths,
        bundlePath: io.bundlePath,
      },
    });
  } catch (error) {
    return failure(io, error, json, command);
  }
}

function commandHelp(command: Command): string {
  return `Usage: ${PROGRAM} ${command.usage}\n\n${command.help}\n${GLOBAL_HELP}`;
}

function usage(io: CliIo, message: string, command?: Command): number {
  const synopsis = command
    ? `usage: ${PROGRAM} ${command.usage}`
    : `run "${PROGRAM} help" for the commands`;
  io.stderr(`${PROGRAM}: ${message}\n${synopsis}\n`);
  return EXIT.usage;
}

/** Map an error to its exit code, and say it in one place: stderr for people, stdout JSON for machines. */
function failure(io: CliIo, error: unknown, json: boolean, command: Command): number {
  const code = error instanceof DeclarationRefused
    ? EXIT.refused
    : error instanceof InputError
    ? EXIT.noInput
    : error instanceof UsageError || error instanceof TokenError
    ? EXIT.usage
    : error instanceof LinkError
    ? EXIT.unavailable
    : error instanceof BusyError
    ? EXIT.busy
    : error instanceof ConfigError
    ? EXIT.config
    : EXIT.software; // the store, a permission the runtime refused, or a bug
  const message = error instanceof Deno.errors.NotCapable
    ? `the host's permission set refused an operation: ${error.message}`
    : error instanceof Error
    ? error.message
    : String(error);
  if (json) {
    const body = {
      outcome: code === EXIT.refused ? "refused" : "error",
      error: {
        code: error instanceof HostError ? error.code : "internal",
        message,
        ...(error instanceof DeclarationRefused ? { problems: error.problems } : {}),
      },
    };
    io.stdout(JSON.stringify(body) + "\n");
  }
  io.stderr(`${PROGRAM} ${command.name}: ${message}\n`);
  if (code === EXIT.usage) io.stderr(`usage: ${PROGRAM} ${command.usage}\n`);
  const unexpected = !(error instanceof HostError) && !(error instanceof Deno.errors.NotCapable);
  if (code === EXIT.software && unexpected && error instanceof Error && error.stack) {
    io.stderr(`(this is a bug or an unexpected condition; details follow)\n${error.stack}\n`);
  }
  return code;
}
