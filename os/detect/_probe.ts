/**
 * What detection may do: look at a path, look for a program on disk, run a
 * harmless query. Under a per-OS permission set some of these are refused;
 * a refusal is told apart from "not there", so a profile never says absent
 * when it could not look.
 */
import { PROGRAM_ERRORS, type ProgramError, runProgram, type RunResult } from "../_run.ts";

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

/** A look the permission set did not allow. */
export const REFUSED = "refused";

/** A file's text; `null` when it is missing, REFUSED when it may not be read. */
export async function readText(path: string): Promise<string | null | typeof REFUSED> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    return error instanceof Deno.errors.NotCapable ? REFUSED : null;
  }
}

/** Whether something (a file, directory or socket) is at `path`, or REFUSED. */
export async function exists(path: string): Promise<boolean | typeof REFUSED> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    return error instanceof Deno.errors.NotCapable ? REFUSED : false;
  }
}

/** The names in a directory (empty when it is missing), or REFUSED. */
export async function listDir(path: string): Promise<string[] | typeof REFUSED> {
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(path)) names.push(entry.name);
  } catch (error) {
    return error instanceof Deno.errors.NotCapable ? REFUSED : [];
  }
  return names.sort();
}

/**
 * The path of an executable program in {@link PROGRAM_DIRS}; `undefined` when
 * not found, REFUSED when no directory could be looked in.
 */
export async function findProgram(name: string): Promise<string | undefined | typeof REFUSED> {
  let looked = false;
  for (const dir of PROGRAM_DIRS) {
    try {
      const info = await Deno.stat(`${dir}/${name}`);
      looked = true;
      if (info.isFile && ((info.mode ?? 0) & 0o111) !== 0) return `${dir}/${name}`;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotCapable)) looked = true;
    }
  }
  return looked ? undefined : REFUSED;
}

/** Whether a program was found on disk (false also when the build may not look). */
export async function onDisk(name: string): Promise<boolean> {
  const found = await findProgram(name);
  return found !== undefined && found !== REFUSED;
}

/** A query's outcome: how the program ended, or why it could not run. */
export type RunOrError = RunResult | ProgramError;

/** Run a harmless query; the result, or the error that kept it from running. */
export async function query(
  argv: readonly string[],
  options: ProbeOptions = {},
): Promise<RunOrError> {
  try {
    return await runProgram(argv, { env: options.env, timeoutMs: options.timeoutMs ?? 20_000 });
  } catch (error) {
    if (error instanceof Error) return error as ProgramError;
    throw error;
  }
}

/**
 * Run a probe that may change something (a scratch interface or table), where
 * `via` (an argv prefix) can place it elsewhere, e.g. a test's network namespace.
 */
export async function attempt(
  argv: readonly string[],
  options: ProbeOptions & { via?: readonly string[] } = {},
): Promise<RunOrError> {
  try {
    return await runProgram(argv, {
      env: options.env,
      via: options.via,
      timeoutMs: options.timeoutMs ?? 20_000,
    });
  } catch (error) {
    if (error instanceof Error) return error as ProgramError;
    throw error;
  }
}

/** Whether a query ran (whatever its exit code). */
export function ran(result: RunResult | ProgramError): result is RunResult {
  return !(result instanceof Error);
}

/** Whether a query could not run because the program is not installed. */
export function missing(result: RunResult | ProgramError): boolean {
  return !ran(result) && result.code === PROGRAM_ERRORS.missing;
}

/** Whether a query could not run because the permission set does not allow it. */
export function refused(result: RunResult | ProgramError): boolean {
  return !ran(result) && result.code === PROGRAM_ERRORS.notPermitted;
}

/**
 * Whether a program is installed, from a query's outcome: it ran, or it could not
 * run for want of permission and is found on disk. `undefined`: could not tell.
 */
export async function installed(
  name: string,
  result: RunResult | ProgramError,
): Promise<boolean | undefined> {
  if (ran(result)) return true;
  if (missing(result)) return false;
  const found = await findProgram(name);
  return found === REFUSED ? undefined : found !== undefined;
}

/** One line about why a query did not answer. */
export function whyNot(result: RunResult | ProgramError): string {
  if (!ran(result)) return result.message;
  const said = (result.stderr || result.stdout).trim().split("\n").slice(-2).join(" | ");
  return `\`${result.argv.join(" ")}\` exited ${result.code}${said ? `: ${said}` : ""}`;
}
