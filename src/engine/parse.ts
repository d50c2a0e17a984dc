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
import { kindOf, KINDS, PathTree, placeOf, type Resource } from "../resources/mod.ts";

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

/** Who provides what (the first to), and what is touched by whom, by the kinds' hooks. */
interface DeclaredOrder {
  provided: Map<string, { index: number; id: string }>;
  touched: Map<string, { index: number; id: string; type: string }>;
}

function declaredOrder(resources: [number, Resource][]): DeclaredOrder {
  const order: DeclaredOrder = { provided: new Map(), touched: new Map() };
  for (const [index, resource] of resources) {
    const kind = kindOf(resource);
    for (const what of kind.provides?.(resource) ?? []) {
      if (!order.provided.has(what)) order.provided.set(what, { index, id: resource.id });
    }
    for (const key of kind.touches?.(resource) ?? []) {
      if (!order.touched.has(key)) {
        order.touched.set(key, { index, id: resource.id, type: resource.type });
      }
    }
  }
  return order;
}

/**
 * What a resource names (a file's owner) that a resource of the declaration provides (a
 * user) is provided BEFORE it: the host makes the user, then gives it the file.
 */
function checkRequires(
  requires: readonly { what: string; field: string }[],
  index: number,
  self: string,
  at: string,
  order: DeclaredOrder,
  problems: ProblemSink,
) {
  for (const { what, field } of requires) {
    const by = order.provided.get(what);
    if (by === undefined || by.index < index) continue;
    const [type, name] = [what.slice(0, what.indexOf(":")), what.slice(what.indexOf(":") + 1)];
    problems.push({
      path: `${at}.${field}`,
      message: by.index === index
        ? `names the ${type} "${name}" this resource ("${self}") declares itself`
        : `names the ${type} "${name}", declared by resources[${by.index}] ("${by.id}") after ` +
          `this one ("${self}"): declare "${by.id}" first, so the ${type} exists before "${self}" ` +
          "is applied (the order is stated, never derived)",
    });
  }
}

/** A resource whose key another kind's resource touches (the account files) is refused. */
function checkTouched(keys: Map<string, number>, order: DeclaredOrder, problems: ProblemSink) {
  if (order.touched.size === 0) return;
  for (const [key, index] of keys) {
    const by = order.touched.get(key);
    if (by === undefined) continue;
    const what = key.slice(key.indexOf(":") + 1);
    problems.push({
      path: `resources[${index}]`,
      message: `manages ${what}, which the ${by.type} resources of this declaration change ` +
        `(resources[${by.index}], "${by.id}"): one owner per fact; declare users and groups, ` +
        `not the file`,
    });
  }
}

/**
 * Nothing is declared before what it lies inside (each kind says where its resources lie:
 * `place`): a path below a mount's target declared before the mount is made under the mount
 * point and hidden once it is mounted, and a bind of a path in a later mount binds what is
 * under that mount point. The order is stated, never derived: the parse says so.
 */
function checkInsideLater(resources: [number, Resource][], problems: ProblemSink) {
  const places = resources.map(([index, resource]) => [index, placeOf(resource)] as const);
  // What lies over a path (a mount over its target), by where it is declared.
  const over = new PathTree<number>();
  let mounts = 0;
  for (const [index, place] of places) {
    if (place?.over && place.encloses) over.add(place.path, index), mounts++;
  }
  if (mounts === 0) return;
  for (const [index, place] of places) {
    if (place === undefined) continue;
    // The first mount declared after this one that encloses `path` (or lies at it, `at`).
    const later = (path: string, at: boolean) => {
      let found: { path: string; mount: number } | undefined;
      over.along(path, (mount, where, end) => {
        if (found || mount <= index || (where === "at" && !at)) return;
        found = { path: path.slice(0, end), mount };
      });
      return found;
    };
    const inside = later(place.path, false);
    if (inside !== undefined) {
      problems.push({
        path: `resources[${index}]`,
        message: `${place.path} lies inside the mount at ${inside.path} ` +
          `(resources[${inside.mount}]), declared after it: it would be made under the mount ` +
          "point and hidden once that is mounted; declare the mount first",
      });
      continue;
    }
    for (const used of place.uses ?? []) {
      const holder = later(used, true);
      if (holder === undefined) continue;
      problems.push({
        path: `resources[${index}]`,
        message: `${used} lies in the mount at ${holder.path} (resources[${holder.mount}]), ` +
          "declared after this one: it would use what is under the mount point; declare the " +
          "mount first",
      });
      break;
    }
  }
}

/**
 * A resource's `restartOn` names resources declared BEFORE it: the restart happens at
 * its own position, after all of them (the order is stated, never derived).
 */
function checkRestartOn(
  restartOn: readonly string[],
  self: string,
  at: string,
  earlier: ReadonlyMap<string, number>,
  everyId: ReadonlyMap<string, number>,
  problems: ProblemSink,
) {
  const seen = new Set<string>();
  restartOn.forEach((id, i) => {
    const path = `${at}.restartOn[${i}]`;
    if (seen.has(id)) {
      problems.push({ path, message: `names "${id}" twice` });
      return;
    }
    seen.add(id);
    if (id === self) {
      problems.push({ path, message: `names this resource itself ("${id}")` });
      return;
    }
    // `earlier` holds the ids declared so far (this one's included, refused above).
    if (earlier.has(id)) return;
    const later = everyId.get(id);
    problems.push({
      path,
      message: later === undefined
        ? `names no resource of this declaration ("${id}"); it names the id of a resource ` +
          "declared before this one"
        : `names "${id}" (resources[${later}]), declared after this one; a restart happens at ` +
          "the resource's own position, after what it names: declare that resource first",
    });
  });
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
