/** The shape of a subcommand, and the options every command takes. */
import type { ParseArgsOptionsConfig } from "node:util";
import type { ConfigFlags } from "../config.ts";
import type { CliIo } from "./io.ts";

/** What a command's run gets. */
export interface CommandContext {
  io: CliIo;
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  json: boolean;
  /** --state-dir / --config, for loadConfig. */
  flags: ConfigFlags;
}

/** One subcommand. */
export interface Command {
  name: string;
  /** One line for the command list. */
  summary: string;
  /** The synopsis, e.g. "apply FILE|-". */
  usage: string;
  /** What it does, its options and its exit codes, for `--help`. */
  help: string;
  options: ParseArgsOptionsConfig;
  /** Positional arguments: [min, max]. */
  positionals: [number, number];
  /** What a positional argument is (default: a file): completions offer files only for files. */
  positionalKind?: "file" | "text";
  run(ctx: CommandContext): Promise<number>;
}

/** Options every command takes. */
export const GLOBAL_OPTIONS: ParseArgsOptionsConfig = {
  "state-dir": { type: "string" },
  config: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
};

/** Help text for the global options. */
export const GLOBAL_HELP = `Options for every command:
  --state-dir DIR   the state directory (env NOX_MESH_HOST_STATE_DIR; default /var/lib/mesh-host)
  --config FILE     the configuration file (env NOX_MESH_HOST_CONFIG; default /etc/mesh-host/host.json)
  --json            print one JSON document on stdout instead of lines for people
  -h, --help        show help
`;
