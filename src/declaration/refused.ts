/**
 * A declaration refused as a whole, and the problems that say why: a module of its own
 * (no schema in it), so the command line can tell a refusal by its class without
 * loading the parse (src/cli/main.ts).
 */
import { HostError } from "../errors.ts";

/** One reason a declaration was refused, with the JSON path it concerns. */
export interface Problem {
  path: string;
  message: string;
}

/** The declaration was refused as a whole (exit code 2). */
export class DeclarationRefused extends HostError {
  readonly problems: Problem[];
  /** Problems found beyond those listed (see MAX_PROBLEMS). */
  readonly omitted: number;

  constructor(problems: Problem[], origin = "declaration", omitted = 0) {
    const shown = problems.slice(0, 20).map((
      p,
    ) => (p.path ? `${p.path}: ${p.message}` : p.message));
    const more = problems.length - shown.length + omitted;
    if (more > 0) shown.push(`… and ${more} more`);
    super(
      "declaration.refused",
      `${origin} refused, nothing was applied:\n  ${shown.join("\n  ")}`,
    );
    this.problems = problems;
    this.omitted = omitted;
  }
}

/**
 * The most problems a refusal lists; the rest are counted. A hostile declaration can hold
 * hundreds of thousands of them, and a refusal must not cost more than the declaration.
 */
export const MAX_PROBLEMS = 1000;

/** Where problems go while a parse collects them: the first {@link MAX_PROBLEMS} are kept. */
export interface ProblemSink {
  push(...problems: Problem[]): unknown;
}

/** A sink that keeps the first {@link MAX_PROBLEMS} problems and counts the others. */
export function problemList(): ProblemSink & { list: Problem[]; omitted: number } {
  const sink = {
    list: [] as Problem[],
    omitted: 0,
    push(...problems: Problem[]) {
      for (const p of problems) {
        if (sink.list.length < MAX_PROBLEMS) sink.list.push(p);
        else sink.omitted++;
      }
      return sink.list.length;
    },
  };
  return sink;
}
