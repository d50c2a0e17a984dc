/**
 * The one way adapters run a program: an argv (never a shell), its output
 * captured, and every way it can go wrong (missing, refused by the permission
 * set, timed out, non-zero exit) turned into the same kind of error, naming
 * what ran, how it ended and the last lines it printed on stderr.
 */
import { shownArgv } from "../src/argv.ts";
import { HostError } from "../src/errors.ts";

export { shownArgv };

/** How to run a program. */
export interface RunOptions {
  /** Text given on stdin (none by default). */
  input?: string;
  /** Extra environment (merged over the host's own). */
  env?: Record<string, string>;
  /** Kill the program after this many milliseconds (default 10 minutes). */
  timeoutMs?: number;
  /** Run in the C locale so its messages can be parsed (default true). */
  cLocale?: boolean;
  /**
   * An argv prefix that runs the program somewhere else, e.g.
   * `["nsenter", "-t", PID, "-a", "--"]` to reach a lab machine from outside.
   */
  via?: readonly string[];
}

/** What an adapter passes on to every program it runs. */
export type RunVia = Pick<RunOptions, "env" | "via">;

/** What a program did. */
export interface RunResult {
  argv: readonly string[];
  code: number;
  stdout: string;
  stderr: string;
}

/** A program could not be run, or it failed. `code` says which. */
export class ProgramError extends HostError {
  /** The program's exit code, when it ran and exited. */
  readonly exitCode?: number;
  readonly stderr: string;

  constructor(
    code: string,
    what: string,
    options: { hint?: string; cause?: unknown; exitCode?: number; stderr?: string } = {},
  ) {
    super(code, what, options);
    this.exitCode = options.exitCode;
    this.stderr = options.stderr ?? "";
  }
}

/** Error codes of {@link ProgramError}. */
export const PROGRAM_ERRORS = {
  missing: "os.program-missing",
  notPermitted: "os.program-not-permitted",
  timeout: "os.program-timeout",
  failed: "os.program-failed",
} as const;

const DEFAULT_TIMEOUT_MS = 10 * 60 * 1000;

/** Refuse a name that a program would read as an option (it starts with "-"). */
export function refuseOption(what: string, name: string): void {
  if (name.startsWith("-")) throw new TypeError(`${what} "${name}" looks like an option`);
}

/** The last `count` non-empty lines of some output, joined with " | ". */
export function lastLines(text: string, count = 5): string {
  return text.split("\n").map((l) => l.trim()).filter(Boolean).slice(-count).join(" | ");
}

/**
 * Run `argv` and return how it ended, whatever its exit code. Throws a
 * {@link ProgramError} only when it could not run at all or timed out.
 *
 * @example
 * ```ts
 * const r = await runProgram(["pacman", "-Q", "bash"]);
 * if (r.code === 0) console.log(r.stdout);
 * ```
 */
export async function runProgram(
  command: readonly string[],
  options: RunOptions = {},
): Promise<RunResult> {
  const { input, env, timeoutMs = DEFAULT_TIMEOUT_MS, cLocale = true } = options;
  const argv = [...(options.via ?? []), ...command];
  const [program, ...args] = argv;
  const timer = new AbortController();
  const timeout = setTimeout(() => timer.abort(), timeoutMs);
  let child: Deno.ChildProcess;
  try {
    // Ask first: the host never makes Deno prompt a person for a permission.
    if (Deno.permissions.querySync({ name: "run", command: program }).state !== "granted") {
      throw new Deno.errors.NotCapable(`Requires run access to "${program}"`);
    }
    child = new Deno.Command(program, {
      args,
      env: cLocale ? { LC_ALL: "C", ...env } : env,
      stdin: input === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
      signal: timer.signal,
    }).spawn();
  } catch (error) {
    clearTimeout(timeout);
    throw cannotRun(argv, error);
  }
  try {
    // Both pipes are read while the input is written (a program that writes before it
    // has read all of its input never blocks on a full pipe), and read here, not by
    // ChildProcess.output(): in Deno 2.9.6 that grows the resident set by 110-150 KiB
    // per program run, outside the JavaScript heap and without bound (issue 28: `run`
    // grew by 0.5 MiB per push from the inventory's detection; tests/os/run_program_test.ts).
    const [status, stdout, stderr] = await Promise.all([
      child.status,
      readText(child.stdout),
      readText(child.stderr),
      input === undefined ? undefined : writeInput(child.stdin, input),
    ]);
    if (timer.signal.aborted) {
      throw new ProgramError(
        PROGRAM_ERRORS.timeout,
        `\`${shownArgv(argv)}\` did not finish within ${shownMs(timeoutMs)} and was killed`,
        { stderr },
      );
    }
    return { argv, code: status.code, stdout, stderr };
  } finally {
    clearTimeout(timeout);
  }
}

/** All of a program's output on one pipe, as text (read into one reused buffer). */
async function readText(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader({ mode: "byob" });
  const text = new TextDecoder();
  let buffer = new ArrayBuffer(16 * 1024);
  let out = "";
  for (;;) {
    const { done, value } = await reader.read(new Uint8Array(buffer));
    if (done || value === undefined) return out + text.decode();
    out += text.decode(value, { stream: true });
    buffer = value.buffer as ArrayBuffer;
  }
}

/** Give the program its input, then close its stdin (a program that stops reading early is fine). */
async function writeInput(stdin: WritableStream<Uint8Array>, input: string): Promise<void> {
  const writer = stdin.getWriter();
  await writer.write(new TextEncoder().encode(input)).catch(() => {});
  await writer.close().catch(() => {});
}

/**
 * Run `argv` and return its output; a non-zero exit (other than those in `okCodes`)
 * throws a {@link ProgramError} naming what ran, its exit code and its last stderr lines.
 */
export async function mustRun(
  argv: readonly string[],
  options: RunOptions & { okCodes?: readonly number[]; hint?: string } = {},
): Promise<RunResult> {
  const result = await runProgram(argv, options);
  if (result.code !== 0 && !(options.okCodes ?? []).includes(result.code)) {
    throw programFailed(result, options.hint);
  }
  return result;
}

/** The error for a program that ran and failed. */
export function programFailed(result: RunResult, hint?: string): ProgramError {
  const said = lastLines(result.stderr) || lastLines(result.stdout) || "(no output)";
  return new ProgramError(
    PROGRAM_ERRORS.failed,
    `\`${shownArgv(result.argv)}\` exited ${result.code}: ${said}`,
    { hint, exitCode: result.code, stderr: result.stderr },
  );
}

function cannotRun(argv: readonly string[], error: unknown): ProgramError {
  if (error instanceof Deno.errors.NotCapable) {
    return new ProgramError(
      PROGRAM_ERRORS.notPermitted,
      `the host's permission set does not allow running ${argv[0]} (\`${shownArgv(argv)}\`)`,
      {
        hint: `this build's --allow-run list does not name ${argv[0]}; ` +
          `use a build for this OS, or add it to the permission set`,
        cause: error,
      },
    );
  }
  if (error instanceof Deno.errors.NotFound) {
    return new ProgramError(
      PROGRAM_ERRORS.missing,
      `${argv[0]} is not installed or not on PATH (needed to run \`${shownArgv(argv)}\`)`,
      { hint: `install ${argv[0]}, or check the host's PATH`, cause: error },
    );
  }
  return new ProgramError(
    PROGRAM_ERRORS.failed,
    `cannot run \`${shownArgv(argv)}\`: ${error instanceof Error ? error.message : error}`,
    { cause: error },
  );
}

function shownMs(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`;
}
