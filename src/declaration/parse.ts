/**
 * Parse a declaration: the whole text is accepted or the whole declaration is
 * refused, with every problem named by its JSON path. Nothing is skipped.
 *
 * Two entry points: `parseDeclaration` (safe, the default: refuses `action`)
 * and `parseTrustedDeclaration` (the bundle only: permits `action`).
 */
import * as v from "valibot";
import { HostError } from "../errors.ts";
import { digestOf } from "./canonical.ts";
import { parseStrictJson } from "./json.ts";
import { compileOwnPaths, isWithin, type OwnPattern, ownRelation } from "./paths.ts";
import {
  type ContainerResource,
  type DirectoryResource,
  EnvelopeSchema,
  type FileResource,
  type Resource,
  RESOURCE_SCHEMAS,
  type ResourceType,
  type ServiceResource,
} from "./schema.ts";

/** Size limits; a declaration over any of them is refused. */
export interface Limits {
  /** The declaration's JSON text, in bytes. */
  maxBytes: number;
  /** Resources in one declaration. */
  maxResources: number;
  /** One file's content, in bytes (after base64 decoding). */
  maxFileBytes: number;
}

/** The limits used when none are given. */
export const DEFAULT_LIMITS: Limits = {
  maxBytes: 8 * 1024 * 1024,
  maxResources: 10_000,
  maxFileBytes: 2 * 1024 * 1024,
};

/** What belongs to the host itself and so may never be declared. */
export interface OwnResources {
  /**
   * Files and directories (and everything below them) the host never manages,
   * nor any directory above them; a component may hold `*` (any characters
   * within it). Per OS from packaging/<os>/own_paths.ts, plus the configured ones.
   */
  paths: readonly string[];
  /** Service names (with or without ".service"); every unit of these names is refused. */
  services: readonly string[];
}

/** What the parse needs to know about this host. */
export interface ParseOptions {
  /** Roots the host may manage; a path outside every one of them is refused. */
  managedRoots: readonly string[];
  /** The host's own files and services. */
  own: OwnResources;
  limits?: Partial<Limits>;
  /** Where the text came from, for messages: a file name, "the link", "the bundle". */
  origin?: string;
}

/** A parsed declaration: valid, complete, addressed (or not), with its digest. */
export interface Declaration {
  version: 1;
  node?: string;
  serial?: number;
  resources: Resource[];
  /** "sha256:…" of the canonical JSON of the whole declaration. */
  digest: string;
}

/** One reason a declaration was refused, with the JSON path it concerns. */
export interface Problem {
  path: string;
  message: string;
}

/** The declaration was refused as a whole (exit code 2). */
export class DeclarationRefused extends HostError {
  readonly problems: Problem[];

  constructor(problems: Problem[], origin = "declaration") {
    const shown = problems.slice(0, 20).map((
      p,
    ) => (p.path ? `${p.path}: ${p.message}` : p.message));
    if (problems.length > shown.length) shown.push(`… and ${problems.length - shown.length} more`);
    super(
      "declaration.refused",
      `${origin} refused, nothing was applied:\n  ${shown.join("\n  ")}`,
    );
    this.problems = problems;
  }
}

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

/**
 * The one thing a resource manages, shared by resources that would fight over it:
 * files and directories share the path namespace.
 */
export function resourceKey(resource: Resource): string {
  switch (resource.type) {
    case "file":
    case "directory":
      return `path:${resource.path}`;
    case "package":
      return `package:${resource.name}`;
    case "service":
      return `service:${serviceBaseName(resource.name)}`;
    case "container":
      return `container:${resource.name}`;
    case "action":
      return `action:${resource.id}`;
  }
}

/** A service name without the ".service" suffix systemd allows. */
export function serviceBaseName(name: string): string {
  return name.endsWith(".service") ? name.slice(0, -".service".length) : name;
}

/** The decoded size in bytes of a file resource's content. */
export function contentSize(resource: { content?: string; contentBase64?: string }): number {
  if (resource.content !== undefined) return new TextEncoder().encode(resource.content).length;
  const b64 = resource.contentBase64 ?? "";
  const padding = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return (b64.length / 4) * 3 - padding;
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
    if (strict.problems.length > 0) throw new DeclarationRefused(strict.problems, origin);
    data = strict.value;
  } catch (error) {
    if (error instanceof DeclarationRefused) throw error;
    const why = error instanceof Error ? error.message : String(error);
    throw new DeclarationRefused([{ path: "", message: `is not valid JSON (${why})` }], origin);
  }

  const envelope = v.safeParse(EnvelopeSchema, data, { abortEarly: false });
  if (!envelope.success) throw new DeclarationRefused(envelope.issues.map(toProblem), origin);
  const { resources: raw, ...head } = envelope.output;
  if (raw.length > limits.maxResources) {
    throw new DeclarationRefused([{
      path: "resources",
      message: `has ${raw.length} resources, over the limit of ${limits.maxResources}`,
    }], origin);
  }

  const problems: Problem[] = [];
  const parsed: [number, Resource][] = [];
  raw.forEach((item, index) => {
    const resource = parseResource(item, `resources[${index}]`, trusted, problems);
    if (resource) parsed.push([index, resource]);
  });
  checkTogether(parsed, options, limits, problems);
  if (problems.length > 0) {
    throw new DeclarationRefused(problems.sort((a, b) => comparePaths(a.path, b.path)), origin);
  }
  const resources = parsed.map(([, resource]) => resource);

  const declaration = { ...head, resources };
  return { ...declaration, digest: await digestOf(declaration) };
}

function parseResource(
  item: unknown,
  at: string,
  trusted: boolean,
  problems: Problem[],
): Resource | undefined {
  if (item === null || typeof item !== "object" || Array.isArray(item)) {
    problems.push({ path: at, message: "a resource is an object with a type and an id" });
    return undefined;
  }
  const type = (item as { type?: unknown }).type;
  const schema = typeof type === "string" ? RESOURCE_SCHEMAS.get(type) : undefined;
  if (schema === undefined) {
    const known = [...RESOURCE_SCHEMAS.keys()].join(", ");
    problems.push({
      path: `${at}.type`,
      message: type === undefined
        ? `is missing; it is one of ${known}`
        : `unknown type ${JSON.stringify(type)}; this host knows ${known}`,
    });
    return undefined;
  }
  if (type === "action" && !trusted) {
    problems.push({
      path: `${at}.type`,
      message: `"action" is accepted only from the bundle the host carries (substrate.lock); ` +
        `declarations from the link or a file may not run programs`,
    });
    return undefined;
  }
  const result = v.safeParse(schema, item, { abortEarly: false });
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

/** What the per-kind rules need: this host's configuration, compiled once per parse. */
interface RuleContext {
  problems: Problem[];
  limits: Limits;
  roots: readonly string[];
  own: OwnPattern[];
  ownServices: ReadonlySet<string>;
}

/**
 * A path a resource manages (a file, a directory, a container's mount source):
 * inside a managed root, never a root itself nor above one, never one of the
 * host's own paths, inside one, or above one.
 */
function checkManagedPath(path: string, at: string, ctx: RuleContext): void {
  const relation = ownRelation(path, ctx.own);
  if (relation?.relation === "inside") {
    ctx.problems.push({
      path: at,
      message: `${path} belongs to the host itself (${relation.own}); ` +
        "the host never manages its own files",
    });
    return;
  }
  if (!ctx.roots.some((root) => isWithin(path, root))) {
    ctx.problems.push({
      path: at,
      message: `${path} is outside the managed roots (${ctx.roots.join(", ")})`,
    });
    return;
  }
  const root = ctx.roots.find((r) => isWithin(r, path));
  if (root !== undefined) {
    ctx.problems.push({
      path: at,
      message: root === path
        ? `${path} is a managed root itself; declare what lies inside it, never the root`
        : `${path} contains the managed root ${root}; declare what lies inside a root`,
    });
    return;
  }
  if (relation?.relation === "contains") {
    ctx.problems.push({
      path: at,
      message: `${path} contains the host's own ${relation.own}: whoever controls a directory ` +
        "above the host's files can replace them, so a declaration may neither manage it nor " +
        "mount it into a container; declare a path below it that holds none of the host's files",
    });
  }
}

/** The rules of each kind beyond its shape, against this host's configuration. */
const KIND_RULES: {
  [T in ResourceType]?: (
    resource: Extract<Resource, { type: T }>,
    at: string,
    ctx: RuleContext,
  ) => void;
} = {
  directory(resource: DirectoryResource, at, ctx) {
    checkManagedPath(resource.path, `${at}.path`, ctx);
  },
  file(resource: FileResource, at, ctx) {
    checkManagedPath(resource.path, `${at}.path`, ctx);
    const size = contentSize(resource);
    if (size > ctx.limits.maxFileBytes) {
      ctx.problems.push({
        path: `${at}.content`,
        message: `is ${size} bytes, over the limit of ${ctx.limits.maxFileBytes} bytes per file`,
      });
    }
  },
  service(resource: ServiceResource, at, ctx) {
    // Every unit of the host's name: its .service, .socket, .timer, .path, instances (@), and
    // OpenRC's multiplexed names (name.x), all start or stop the host.
    const base = resource.name.split(/[.@]/, 1)[0];
    if (ctx.ownServices.has(base)) {
      ctx.problems.push({
        path: `${at}.name`,
        message: `"${resource.name}" is a unit of the host's own service ${base}; the ` +
          "installation owns every unit of that name, never a declaration",
      });
    }
  },
  container(resource: ContainerResource, at, ctx) {
    resource.mounts.forEach((m, i) => checkManagedPath(m.source, `${at}.mounts[${i}].source`, ctx));
  },
};

/** Rules across resources and against this host's configuration. */
function checkTogether(
  resources: [number, Resource][],
  options: ParseOptions,
  limits: Limits,
  problems: Problem[],
) {
  const ids = new Map<string, number>();
  const keys = new Map<string, number>();
  const ctx: RuleContext = {
    problems,
    limits,
    roots: options.managedRoots,
    own: compileOwnPaths(options.own.paths),
    ownServices: new Set(options.own.services.map(serviceBaseName)),
  };

  for (const [index, resource] of resources) {
    const at = `resources[${index}]`;
    const firstId = ids.get(resource.id);
    if (firstId !== undefined) {
      problems.push({
        path: `${at}.id`,
        message: `duplicate id "${resource.id}" (also resources[${firstId}])`,
      });
    } else ids.set(resource.id, index);

    const key = resourceKey(resource);
    const firstKey = keys.get(key);
    if (firstKey !== undefined) {
      problems.push({
        path: at,
        message: `conflicts with resources[${firstKey}]: both manage ${key.replace(":", " ")}`,
      });
    } else keys.set(key, index);

    const rule = KIND_RULES[resource.type] as
      | ((r: Resource, at: string, ctx: RuleContext) => void)
      | undefined;
    rule?.(resource, at, ctx);
  }
}

/** Order problems by resource index, then by path, so messages read top to bottom. */
function comparePaths(a: string, b: string): number {
  const index = (p: string) => Number(/^resources\[(\d+)\]/.exec(p)?.[1] ?? -1);
  return index(a) - index(b) || (a < b ? -1 : a > b ? 1 : 0);
}

function toProblem(issue: v.BaseIssue<unknown>): Problem {
  const path = (issue.path ?? [])
    .map((item) => (typeof item.key === "number" ? `[${item.key}]` : `.${String(item.key)}`))
    .join("")
    .replace(/^\./, "");
  if (issue.kind === "schema" && issue.received === "undefined") {
    return { path, message: `is missing (expected ${issue.expected})` };
  }
  // Our own messages (set in schema.ts) never start with valibot's "Invalid …".
  if (issue.kind === "validation" || !issue.message.startsWith("Invalid")) {
    return { path, message: issue.message };
  }
  if (issue.type === "strict_object" && issue.expected === "never") {
    return { path, message: "is not a known field" };
  }
  return { path, message: `expected ${issue.expected}, got ${issue.received}` };
}
