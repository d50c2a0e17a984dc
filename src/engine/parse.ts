/**
 * Parse a declaration: the whole text is accepted or the whole declaration is
 * refused, with every problem named by its JSON path. Nothing is skipped. The
 * envelope is src/declaration/envelope.ts; each resource is its kind's (schema,
 * key, rules: src/resources/). A declaration is parsed once, here, into the
 * value every later step uses.
 *
 * Two entry points: `parseDeclaration` (safe, the default: refuses kinds that
 * only the bundle may declare, i.e. `action`) and `parseTrustedDeclaration`
 * (the bundle only).
 */
import * as v from "valibot";
import { canonicalJson, sha256Hex } from "../declaration/canonical.ts";
import {
  type Declaration,
  DeclarationRefused,
  EnvelopeSchema,
  type Problem,
} from "../declaration/envelope.ts";
import type { ParseOptions } from "../declaration/options.ts";
import { DEFAULT_LIMITS, type Limits } from "../declaration/limits.ts";
import { problemList, type ProblemSink } from "../declaration/refused.ts";
import { parseStrictJson } from "../declaration/json.ts";
import { compileOwnPaths } from "../declaration/paths.ts";
import { permitSets, type RuleScope } from "../resources/kind.ts";
import { kindOf, KINDS, type Resource } from "../resources/mod.ts";
import {
  checkInsideLater,
  checkRequires,
  checkRestartOn,
  checkTouched,
  declaredOrder,
} from "./_cross_checks.ts";

/**
 * Parse a declaration from the link or from a person's file. Refuses `action`.
 *
 * @example
 * ```ts
 * const decl = await parseDeclaration(text, { managedRoots: ["/etc"], own: { paths: [], services: [] } });
 * ```
 */
export function parseDeclaration(
  text: string | Uint8Array,
  options: ParseOptions,
): Promise<Declaration> {
  return parse(text, options, false);
}

/** Parse the bundle the host carries (substrate.lock). Permits `action`; never use it for the link. */
export function parseTrustedDeclaration(
  text: string | Uint8Array,
  options: ParseOptions,
): Promise<Declaration> {
  return parse(text, options, true);
}

async function parse(
  text: string | Uint8Array,
  options: ParseOptions,
  trusted: boolean,
): Promise<Declaration> {
  const origin = options.origin ?? "declaration";
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const bytes = typeof text === "string" ? new TextEncoder().encode(text).length : text.length;
  if (bytes > limits.maxBytes) {
    throw new DeclarationRefused([{
      path: "",
      message:
        `is ${bytes} bytes, over the limit of ${limits.maxBytes} bytes; split the work or ship large files another way`,
    }], origin);
  }
  let data: unknown;
  try {
    const strict = parseStrictJson(
      typeof text === "string" ? text : new TextDecoder("utf-8", { fatal: true }).decode(text),
    );
    if (strict.problems.length > 0) {
      throw new DeclarationRefused(strict.problems, origin, strict.omitted);
    }
    data = strict.value;
  } catch (error) {
    if (error instanceof DeclarationRefused) throw error;
    const why = error instanceof Error ? error.message : String(error);
    throw new DeclarationRefused([{ path: "", message: `is not valid JSON (${why})` }], origin);
  }

  const envelope = v.safeParse(EnvelopeSchema, data, { abortEarly: false });
  if (!envelope.success) {
    const problems = problemList();
    for (const issue of envelope.issues) problems.push(toProblem(issue));
    throw new DeclarationRefused(problems.list, origin, problems.omitted);
  }
  const { resources: raw, ...head } = envelope.output;
  if (raw.length > limits.maxResources) {
    throw new DeclarationRefused([{
      path: "resources",
      message: `has ${raw.length} resources, over the limit of ${limits.maxResources}`,
    }], origin);
  }

  const problems = problemList();
  const parsed: [number, Resource][] = [];
  raw.forEach((item, index) => {
    const resource = parseResource(item, `resources[${index}]`, trusted, problems);
    if (resource) parsed.push([index, resource]);
  });
  checkTogether(parsed, options, limits, trusted, problems);
  if (problems.list.length > 0) {
    throw new DeclarationRefused(inReadingOrder(problems.list), origin, problems.omitted);
  }
  const resources = parsed.map(([, resource]) => resource);

  return await hashed({ ...head, resources }, trusted);
}

/** The declaration with its digest, the canonical text that is of kept (canonicalBody). */
async function hashed(
  declaration: Omit<Declaration, "digest" | "trusted">,
  trusted: boolean,
): Promise<Declaration> {
  const canonical = canonicalJson(declaration);
  const value = {
    ...declaration,
    digest: `sha256:${await sha256Hex(canonical)}`,
    ...(trusted ? { trusted } : {}),
  };
  CANONICAL.set(value, canonical);
  return value;
}

/**
 * The canonical JSON of each declaration the parse returned, without its digest: built once
 * for the digest and kept for the store, which keeps the same text as the declaration's body
 * (apply.ts makeCurrent). Weakly: it goes when the declaration does.
 */
const CANONICAL = new WeakMap<Declaration, string>();

/**
 * The canonical JSON of `declaration` without its digest (what the digest is of): the one
 * the parse built, or, for a value the parse did not return, made now.
 */
export function canonicalBody(declaration: Declaration): string {
  const known = CANONICAL.get(declaration);
  if (known !== undefined) return known;
  const { version, node, serial, resources } = declaration;
  return canonicalJson({ version, node, serial, resources });
}

function parseResource(
  item: unknown,
  at: string,
  trusted: boolean,
  problems: ProblemSink,
): Resource | undefined {
  if (item === null || typeof item !== "object" || Array.isArray(item)) {
    problems.push({ path: at, message: "a resource is an object with a type and an id" });
    return undefined;
  }
  const type = (item as { type?: unknown }).type;
  const kind = typeof type === "string" ? KINDS.get(type) : undefined;
  if (kind === undefined) {
    const known = [...KINDS.keys()].join(", ");
    problems.push({
      path: `${at}.type`,
      message: type === undefined
        ? `is missing; it is one of ${known}`
        : `unknown type ${JSON.stringify(type)}; this host knows ${known}`,
    });
    return undefined;
  }
  if (kind.trustedOnly && !trusted) {
    problems.push({
      path: `${at}.type`,
      message: `${JSON.stringify(type)} is accepted only from the bundle the host carries ` +
        `(substrate.lock); declarations from the link or a file may not run programs`,
    });
    return undefined;
  }
  const result = v.safeParse(kind.schema, item, { abortEarly: false });
  if (!result.success) {
    for (const issue of result.issues) {
      const problem = toProblem(issue);
      problems.push({
        path: problem.path ? `${at}.${problem.path}` : at,
        message: problem.message,
      });
    }
    return undefined;
  }
  return result.output as Resource;
}

/**
 * Rules across resources and against this host's configuration. Every rule costs at most
 * n·log n in the size of the declaration (maps for ids and keys, sorting for overlaps): a
 * declaration is input from the network, and a parse is not a place to spend hours.
 */
function checkTogether(
  resources: [number, Resource][],
  options: ParseOptions,
  limits: Limits,
  trusted: boolean,
  problems: ProblemSink,
) {
  const ids = new Map<string, number>();
  const keys = new Map<string, number>();
  const claims = new Map<string, string>();
  const scope: RuleScope = {
    problems,
    limits,
    roots: options.managedRoots,
    own: compileOwnPaths(options.own.paths),
    ownServices: options.own.services,
    trusted,
    permit: permitSets(options.permit),
    claim(what, at) {
      const first = claims.get(what);
      if (first === undefined) claims.set(what, at);
      return first;
    },
  };
  // Every id and where it is first declared, for restartOn's "declared after this one".
  const everyId = new Map<string, number>();
  for (const [index, resource] of resources) {
    if (!everyId.has(resource.id)) everyId.set(resource.id, index);
  }
  const order = declaredOrder(resources);

  for (const [index, resource] of resources) {
    const at = `resources[${index}]`;
    const firstId = ids.get(resource.id);
    if (firstId !== undefined) {
      problems.push({
        path: `${at}.id`,
        message: `duplicate id "${resource.id}" (also resources[${firstId}])`,
      });
    } else ids.set(resource.id, index);

    const kind = kindOf(resource);
    const key = kind.key(resource);
    const firstKey = keys.get(key);
    if (firstKey !== undefined) {
      problems.push({
        path: at,
        message: `conflicts with resources[${firstKey}]: both manage ${key.replace(":", " ")}`,
      });
    } else keys.set(key, index);

    kind.rules?.(resource, at, scope);
    checkRestartOn(kind.restartOn?.(resource) ?? [], resource.id, at, ids, everyId, problems);
    checkRequires(kind.requires?.(resource) ?? [], index, resource.id, at, order, problems);
  }
  checkTouched(keys, order, problems);
  checkInsideLater(resources, problems);
}

/**
 * Problems by resource index, then by path, so messages read top to bottom (each index
 * read once: a refusal may name hundreds of thousands of problems).
 */
function inReadingOrder(problems: Problem[]): Problem[] {
  return problems
    .map((p) => ({ p, index: Number(/^resources\[(\d+)\]/.exec(p.path)?.[1] ?? -1) }))
    .sort((a, b) => a.index - b.index || (a.p.path < b.p.path ? -1 : a.p.path > b.p.path ? 1 : 0))
    .map(({ p }) => p);
}

function toProblem(issue: v.BaseIssue<unknown>): Problem {
  const path = (issue.path ?? [])
    .map((item) => (typeof item.key === "number" ? `[${item.key}]` : `.${String(item.key)}`))
    .join("")
    .replace(/^\./, "");
  if (issue.kind === "schema" && issue.received === "undefined") {
    return { path, message: `is missing (expected ${issue.expected})` };
  }
  // Our own messages (set in the schemas) never start with valibot's "Invalid …".
  if (issue.kind === "validation" || !issue.message.startsWith("Invalid")) {
    return { path, message: issue.message };
  }
  if (issue.type === "strict_object" && issue.expected === "never") {
    return { path, message: "is not a known field" };
  }
  return { path, message: `expected ${issue.expected}, got ${issue.received}` };
}
