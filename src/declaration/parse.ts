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
import { isWithin } from "./paths.ts";
import { firewallKey } from "../resources/firewall.ts";
import { overlayKey, overlayProblems } from "../resources/overlay.ts";
import { sysctlKey } from "../resources/sysctl.ts";
import { EnvelopeSchema, type Resource, RESOURCE_SCHEMAS, type ResourceType } from "./schema.ts";

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
  /** Files and directories (and everything below them) the host never manages. */
  paths: readonly string[];
  /** Service names (with or without ".service") the host never manages. */
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
    case "overlay":
      return overlayKey(resource);
    case "firewall":
      return firewallKey(resource);
    case "sysctl":
      return sysctlKey(resource);
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
    data = JSON.parse(
      typeof text === "string" ? text : new TextDecoder("utf-8", { fatal: true }).decode(text),
    );
  } catch (error) {
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
  if (typeof type !== "string" || !(type in RESOURCE_SCHEMAS)) {
    const known = Object.keys(RESOURCE_SCHEMAS).join(", ");
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
  const result = v.safeParse(RESOURCE_SCHEMAS[type as ResourceType], item, { abortEarly: false });
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

/** Rules across resources and against this host's configuration. */
function checkTogether(
  resources: [number, Resource][],
  options: ParseOptions,
  limits: Limits,
  problems: Problem[],
) {
  const ids = new Map<string, number>();
  const keys = new Map<string, number>();
  const ownServices = new Set(options.own.services.map(serviceBaseName));
  const roots = options.managedRoots;
  const checkPath = (path: string, at: string) => {
    const own = options.own.paths.find((p) => isWithin(path, p));
    if (own) {
      problems.push({
        path: at,
        message:
          `${path} belongs to the host itself (${own}); the host never manages its own files`,
      });
    } else if (!roots.some((root) => isWithin(path, root))) {
      problems.push({
        path: at,
        message: `${path} is outside the managed roots (${roots.join(", ")})`,
      });
    }
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

    switch (resource.type) {
      case "file":
        checkPath(resource.path, `${at}.path`);
        if (contentSize(resource) > limits.maxFileBytes) {
          problems.push({
            path: `${at}.content`,
            message: `is ${
              contentSize(resource)
            } bytes, over the limit of ${limits.maxFileBytes} bytes per file`,
          });
        }
        break;
      case "directory":
        checkPath(resource.path, `${at}.path`);
        break;
      case "service":
        if (ownServices.has(serviceBaseName(resource.name))) {
          problems.push({
            path: `${at}.name`,
            message:
              `"${resource.name}" is the host's own service; the installation owns it, never a declaration`,
          });
        }
        break;
      case "container":
        resource.mounts.forEach((m, i) => checkPath(m.source, `${at}.mounts[${i}].source`));
        break;
      case "overlay":
        for (const p of overlayProblems(resource)) problems.push({ ...p, path: `${at}.${p.path}` });
        break;
    }
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
