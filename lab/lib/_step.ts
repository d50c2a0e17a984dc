import { LabError } from "./errors.ts";
import type { Lab } from "./lab.ts";
import type { Machine } from "./machine.ts";

/** What a step can use. */
export interface StepContext {
  lab: Lab;
  machine(name: string): Machine;
}

/** One named step; `run` throws a LabError("assertion-failed") saying expected vs seen. */
export interface Step {
  title: string;
  /** Longest the step may take (default 120 s). */
  timeoutS?: number;
  run(ctx: StepContext): Promise<void>;
}

/** Thrown by a step whose expectation does not hold. */
export function fail(expected: string, seen: string): never {
  throw new LabError("assertion-failed", `expected ${expected}; saw ${seen}`);
}

/** A command output, quoted and clipped for an error message. */
export function shown(text: string): string {
  const t = text.trim();
  return t.length > 600 ? JSON.stringify(t.slice(0, 600)) + "…" : JSON.stringify(t);
}
