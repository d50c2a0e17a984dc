/**
 * Shell completions (bash, zsh, fish) generated from the CLI's own command table, the
 * one `help` prints: packaging/build.ts writes them at build time, a test keeps them
 * equal to `help`.
 */
import { GLOBAL_OPTIONS } from "./command.ts";
import { COMMANDS } from "./main.ts";
import { PROGRAM } from "../version.ts";

/** The shells a completion is generated for. */
export const SHELLS = ["bash", "zsh", "fish"] as const;
/** One of {@link SHELLS}. */
export type Shell = typeof SHELLS[number];

/**
 * What follows an option that takes a value: a file, a directory, nothing to offer,
 * or `-` only (standard input: `enrol --token -`, which never takes the token itself).
 */
export type ValueKind = "file" | "directory" | "none" | "stdin";

/**
 * What each option that takes a value completes to. Every string option of the table
 * must be named here (a test checks it), so a new option is a decision, not a default.
 */
export const OPTION_VALUES: Readonly<Record<string, ValueKind>> = {
  "state-dir": "directory",
  config: "file",
  token: "stdin",
  "token-file": "file",
  wait: "none",
  "drift-interval": "none",
  "heartbeat-interval": "none",
};

/** One option as completions offer it. */
export interface CompletionOption {
  long: string;
  short?: string;
  /** Undefined for a flag; what its value completes to otherwise. */
  value?: ValueKind;
}

/** One command as completions offer it. */
export interface CompletionCommand {
  name: string;
  summary: string;
  /** Its own options, then the options every command takes. */
  options: CompletionOption[];
  /** What its positional arguments complete to. */
  positional: "file" | "command" | "none";
}

function optionsOf(config: typeof GLOBAL_OPTIONS): CompletionOption[] {
  return Object.entries(config).map(([long, o]) => ({
    long,
    ...(o.short ? { short: o.short } : {}),
    ...(o.type === "string" ? { value: OPTION_VALUES[long] ?? "file" } : {}),
  }));
}

/**
 * The command table as completions see it: every command `help` lists, in its order,
 * with its options; `help` itself completes to a command name.
 */
export function completionTable(): CompletionCommand[] {
  const global = optionsOf(GLOBAL_OPTIONS);
  return [
    ...COMMANDS.map((c) => ({
      name: c.name,
      summary: c.summary,
      options: [...optionsOf(c.options), ...global],
      positional: c.positionals[1] > 0 && c.positionalKind !== "text"
        ? "file" as const
        : "none" as const,
    })),
    { name: "help", summary: "show help for a command", options: [], positional: "command" },
  ];
}

const funcName = `_${PROGRAM.replaceAll("-", "_")}`;
const header = (comment: string) =>
  `${comment} ${PROGRAM} completion, generated from the CLI's command table by\n` +
  `${comment} packaging/build.ts (src/cli/completions.ts); do not edit.\n`;
const words = (o: CompletionOption) => [`--${o.long}`, ...(o.short ? [`-${o.short}`] : [])];
const quoteSh = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

function bash(table: CompletionCommand[]): string {
  const names = table.map((c) => c.name).join(" ");
  const valued = table.flatMap((c) => c.options).filter((o) => o.value);
  const byKind = (
    kind: ValueKind,
  ) => [...new Set(valued.filter((o) => o.value === kind).flatMap(words))];
  const cases = table.map((c) =>
    `\t\t${c.name}) opts=${
      quoteSh(c.options.flatMap(words).join(" "))
    }; positional='${c.positional}' ;;`
  );
  return `${header("#")}# shellcheck shell=bash
${funcName}() {
	local cur prev opts positional
	cur=\${COMP_WORDS[COMP_CWORD]}
	prev=\${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()
	if [ "$COMP_CWORD" -eq 1 ]; then
		mapfile -t COMPREPLY < <(compgen -W '${names} --help --version' -- "$cur")
		return 0
	fi
	case $prev in
		${
    byKind("directory").join("|") || "--"
  }) mapfile -t COMPREPLY < <(compgen -d -- "$cur"); return 0 ;;
		${byKind("file").join("|") || "--"}) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return 0 ;;
		${byKind("none").join("|") || "--"}) return 0 ;;
		${
    byKind("stdin").join("|") || "--"
  }) mapfile -t COMPREPLY < <(compgen -W '-' -- "$cur"); return 0 ;;
	esac
	case \${COMP_WORDS[1]} in
${cases.join("\n")}
		*) return 0 ;;
	esac
	if [ "\${cur#-}" != "$cur" ]; then
		mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
	elif [ "$positional" = command ]; then
		mapfile -t COMPREPLY < <(compgen -W '${names}' -- "$cur")
	elif [ "$positional" = file ]; then
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
	fi
	return 0
}
complete -F ${funcName} ${PROGRAM}
`;
}

/** zsh `_arguments` spec of one option; its description is its long name. */
function zshOption(o: CompletionOption): string {
  const action = o.value === "directory"
    ? ":dir:_files -/"
    : o.value === "file"
    ? ":file:_files"
    : o.value === "none"
    ? ":value: "
    : o.value === "stdin"
    ? ":stdin:(-)"
    : "";
  const spec = (w: string) => `'${w}[${o.long}]${action}'`;
  if (!o.short) return spec(`--${o.long}`);
  return `'(-${o.short} --${o.long})'{-${o.short},--${o.long}}'[${o.long}]${action}'`;
}

function zsh(table: CompletionCommand[]): string {
  const esc = (s: string) => s.replaceAll("'", `'\\''`).replaceAll(":", "\\:");
  const list = table.map((c) => `\t\t'${esc(c.name)}:${esc(c.summary)}'`).join("\n");
  const cases = table.map((c) => {
    const positional = c.positional === "file"
      ? ` '*:file:_files'`
      : c.positional === "command"
      ? ` '1:command:(${table.map((t) => t.name).join(" ")})'`
      : "";
    return `\t\t${c.name}) _arguments ${c.options.map(zshOption).join(" ")}${positional} ;;`;
  });
  return `#compdef ${PROGRAM}
${header("#")}
${funcName}() {
	local -a commands
	commands=(
${list}
	)
	if (( CURRENT == 2 )); then
		_describe -t commands 'command' commands
		return
	fi
	words=("\${(@)words[2,-1]}")
	(( CURRENT-- ))
	case $words[1] in
${cases.join("\n")}
	esac
}

${funcName} "$@"
`;
}

function fish(table: CompletionCommand[]): string {
  const q = (s: string) => `'${s.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
  const names = table.map((c) => c.name).join(" ");
  const lines = table.map((c) =>
    `complete -c ${PROGRAM} -n "not __fish_seen_subcommand_from ${names}" -a ${c.name} -d ${
      q(c.summary)
    }`
  );
  for (const c of table) {
    const when = `-n "__fish_seen_subcommand_from ${c.name}"`;
    for (const o of c.options) {
      const value = o.value === "directory"
        ? " -r -a '(__fish_complete_directories)'"
        : o.value === "file"
        ? " -r -F"
        : o.value === "none"
        ? " -x"
        : o.value === "stdin"
        ? " -x -a '-'"
        : "";
      lines.push(
        `complete -c ${PROGRAM} ${when} -l ${o.long}${o.short ? ` -s ${o.short}` : ""}${value}`,
      );
    }
    if (c.positional === "command") lines.push(`complete -c ${PROGRAM} ${when} -x -a '${names}'`);
    if (c.positional === "file") lines.push(`complete -c ${PROGRAM} ${when} -F`);
  }
  return `${header("#")}complete -c ${PROGRAM} -f\n${lines.join("\n")}\n`;
}

/** Where each distribution puts a shell's completion file, and its name there. */
export const COMPLETION_PATHS: Readonly<Record<Shell, string>> = {
  bash: `/usr/share/bash-completion/completions/${PROGRAM}`,
  zsh: `/usr/share/zsh/site-functions/_${PROGRAM}`,
  fish: `/usr/share/fish/vendor_completions.d/${PROGRAM}.fish`,
};

/**
 * The completion script of a shell, from the command table.
 *
 * @example
 * ```ts
 * await Deno.writeTextFile("nox-mesh-host.bash", completion("bash"));
 * ```
 */
export function completion(shell: Shell, table: CompletionCommand[] = completionTable()): string {
  return shell === "bash" ? bash(table) : shell === "zsh" ? zsh(table) : fish(table);
}
