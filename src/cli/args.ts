/**
 * The command line's options and positionals, read the way node:util's `parseArgs` reads
 * them with `strict` and `allowPositionals` (tests/cli_args_test.ts compares the two on
 * many argument vectors). The host's own reader, because importing node:util loads Deno's
 * node layer, which costs every command 10 ms of CPU and 6 MiB before its first line.
 */
import type { ParseArgsOptionsConfig } from "node:util";

/** What was read: each option given (its last value), and the positionals in order. */
export interface ParsedArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/** An argument vector that does not fit the options (a usage error). */
export class ArgsError extends Error {}

/**
 * Read `args` against `options`: `--name`, `--name=value`, `--name value` (strings), `-x`
 * and grouped boolean short options (`-qh`), `-xVALUE` for a short string option, and `--`
 * before positionals that start with a dash. Unknown options, a boolean given a value and a
 * string option without one (or followed by something that looks like an option) throw
 * {@link ArgsError}.
 *
 * @example
 * ```ts
 * readArgs(["-q", "--wait", "5", "site.json"], { quiet: { type: "boolean", short: "q" }, wait: { type: "string" } });
 * // { values: { quiet: true, wait: "5" }, positionals: ["site.json"] }
 * ```
 *
 * Long because: one pass over argv with parseArgs' rules (short groups, --name=value, --,
 * negatives); its cases share the loop's state.
 */
export function readArgs(args: readonly string[], options: ParseArgsOptionsConfig): ParsedArgs {
  const values: ParsedArgs["values"] = Object.create(null);
  const positionals: string[] = [];
  const shorts = new Map<string, string>();
  for (const [name, spec] of Object.entries(options)) {
    if (spec.short !== undefined) shorts.set(spec.short, name);
  }
  const optionLike = (value: string | undefined) =>
    value !== undefined && value.length > 1 && value[0] === "-";
  const take = (name: string, shown: string, at: number): string => {
    const value = args[at];
    if (value === undefined) throw new ArgsError(`Option '${shown} <value>' argument missing`);
    if (optionLike(value)) {
      throw new ArgsError(
        `Option '${shown}' argument is ambiguous.\nDid you forget to specify the option ` +
          `argument for '${shown}'?\nTo specify an option argument starting with a dash use ` +
          `'--${name}=-XYZ'${shown.startsWith("--") ? "" : ` or '${shown}-XYZ'`}.`,
      );
    }
    return value;
  };
  const unknown = (shown: string) =>
    new ArgsError(
      `Unknown option '${shown}'. To specify a positional argument starting with a '-', ` +
        `place it at the end of the command after '--', as in '-- ${JSON.stringify(shown)}'`,
    );

  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
      const spec = Object.hasOwn(options, name) ? options[name] : undefined;
      if (spec === undefined) throw unknown(`--${name}`);
      if (spec.type === "boolean") {
        if (eq !== -1) throw new ArgsError(`Option '--${name}' does not take an argument`);
        values[name] = true;
      } else {
        values[name] = eq !== -1 ? arg.slice(eq + 1) : take(name, `--${name}`, ++i);
      }
      continue;
    }
    if (arg.length > 1 && arg[0] === "-") {
      // One short option, or a group of them: each a boolean, but the last may be a string
      // option taking the next argument; a string option inside takes the rest as its value.
      for (let c = 1; c < arg.length; c++) {
        const letter = arg[c];
        const name = shorts.get(letter);
        if (name === undefined) throw unknown(`-${letter}`);
        if (options[name].type === "boolean") {
          values[name] = true;
          continue;
        }
        values[name] = c < arg.length - 1 ? arg.slice(c + 1) : take(name, `-${letter}`, ++i);
        break;
      }
      continue;
    }
    positionals.push(arg);
  }
  for (const [name, spec] of Object.entries(options)) {
    if (values[name] === undefined && spec.default !== undefined) {
      values[name] = spec.default as string | boolean;
    }
  }
  return { values: { ...values }, positionals };
}
