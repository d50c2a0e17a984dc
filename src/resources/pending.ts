/**
 * Kinds whose providers have not landed yet: parsed and validated like every
 * other kind, but applying one fails with "no provider on this machine".
 */
import type { Resource } from "../declaration/schema.ts";
import { NoProviderError, type ResourceKind } from "./kind.ts";

/** A kind that cannot be checked or applied on this build, saying what it needs. */
export function withoutProvider<R extends Resource>(
  type: R["type"],
  needs: string,
): ResourceKind<R> {
  const refuse = () => Promise.reject(new NoProviderError(type, needs));
  return { type, check: refuse, apply: refuse, release: refuse };
}
