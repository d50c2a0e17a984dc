import { LabError } from "./errors.ts";

/** Result of a finished command. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options of {@link run}. */
export interface RunOptions {
  /** Throw a LabError when the exit code is not 0 (default true). */
  check?: boolean;
  /** Bytes or text written to the command's stdin. */
  input?: string | Uint8Array;
  /** Environment; with `clearEnv` it is the whole environment. */
  env?: Record<string, string>;
  clearEnv?: boolean;
  /** Kill the command (SIGKILL) after this many milliseconds. */
  timeoutMs?: number;
  /** Working directory. */
  cwd?: string;
  /** What the command is for, used in error messages. */
  what?: string;
}

const decoder = new TextDecoder();

/** Runs argv to completion and returns its exit code and output. */
export async function run(argv: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const { check = true, input, env, clearEnv = false, timeoutMs, what, cwd } = options;
  const [program, ...args] = argv;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(program, {
      args,
      cwd,
      env,
      clearEnv,
      stdin: input === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (error) {
    throw new LabError(
      "missing-tool",
      `cannot start ${program}${what ? ` (${what})` : ""}: ${error}; install it (sh lab/setup.sh)`,
      { cause: error },
    );
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  let timedOut = false;
  if (timeoutMs !== undefined) {
    timer = setTimeout(() => {
      timedOut = true;
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
    }, timeoutMs);
  }
  if (input !== undefined) {
    const writer = child.stdin.getWriter();
    try {
      await writer.write(typeof input === "string" ? new TextEncoder().encode(input) : input);
      await writer.close();
    } catch { /* the command closed its stdin early; its exit code tells */ }
  }
  const out = await child.output();
  if (timer !== undefined) clearTimeout(timer);
  const result = {
    code: out.code,
    stdout: decoder.decode(out.stdout),
    stderr: decoder.decode(out.stderr),
  };
  if (timedOut) {
    throw new LabError(
      "timeout",
      `${what ?? argv.join(" ")}: no exit after ${timeoutMs} ms, killed`,
    );
  }
  if (check && result.code !== 0) {
    throw new LabError(
      "command-failed",
      `${what ?? "command"} failed (exit ${result.code}): ${argv.join(" ")}\n${
        tail(result.stderr || result.stdout)
      }`,
    );
  }
  return result;
}

/** The last lines of a command's output, for error messages. */
export function tail(text: string, lines = 15): string {
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it returns a value other than undefined, or throws a timeout LabError. */
export async function until<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined> | T | undefined,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      throw new LabError("timeout", `${what}: not reached within ${timeoutMs} ms`);
    }
    await sleep(intervalMs);
  }
}

/** True when the path exists. */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}
