/** What detection may do: read a file, look for a program on disk, run a harmless query. */
import { type ProgramError, runProgram, type RunResult } from "../_run.ts";

/** Where programs are looked for (the host does not read PATH). */
export const PROGRAM_DIRS: readonly string[] = [
  "/usr/local/sbin",
  "/usr/local/bin",
  "/usr/sbin",
  "/usr/bin",
  "/sbin",
  "/bin",
];

/** Options every detector takes. */
export interface ProbeOptions {
  /** Environment for the programs run (e.g. CONTAINERS_CONF for podman). */
  env?: Record<string, string>;
  /** How long a query may take (default 20 s). */
  timeoutMs?: number;
}

/** A file's text; `null` when it is missing or may not be read. */
export async function readText(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch {
    return null;
  }
}

/** Whether something is at `path` (a file, directory or socket); false when it may not be read. */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** The names in a directory; empty when it is missing or may not be read. */
export async function listDir(path: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(path)) names.push(entry.name);
  } catch {
    return [];
  }
  return names.sort();
}

/** The path of an executable program, looked for in {@link PROGRAM_DIRS}. */
export async function findProgram(name: string): Promise<string | undefined> {
  for (const dir of PROGRAM_DIRS) {
    try {
      const info = await Deno.stat(`${dir}/${name}`);
      if (info.isFile && ((info.mode ?? 0) & 0o111) !== 0) return `${dir}/${name}`;
    } catch { /* not here */ }
  }
  return undefined;
}

/** Run a harmless query; the result, or the error that kept it from running. */
export async function query(
  argv: readonly string[],
  options: ProbeOptions = {},
): Promise<RunResult | ProgramError> {
  try {
    return await runProgram(argv, { env: options.env, timeoutMs: options.timeoutMs ?? 20_000 });
  } catch (error) {
    if (error instanceof Error) return error as ProgramError;
    throw error;
  }
}

/** Whether a query ran (whatever its exit code). */
export function ran(result: RunResult | ProgramError): result is RunResult {
  return !(result instanceof Error);
}

/** One line about why a query did not answer. */
export function whyNot(result: RunResult | ProgramError): string {
  if (!ran(result)) return result.message;
  const said = (result.stderr || result.stdout).trim().split("\n").slice(-2).join(" | ");
  return `\`${result.argv.join(" ")}\` exited ${result.code}${said ? `: ${said}` : ""}`;
}
