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
  /** Problems found beyond those listed (see MAX_PROBLEMS in envelope.ts). */
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
