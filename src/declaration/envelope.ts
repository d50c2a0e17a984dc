/**
 * The envelope of declaration v1 (DESIGN.md §4): version, node, serial and the
 * ordered resources, and what a parse answers (a declaration, or the problems
 * that refused it). The resources themselves are each kind's business
 * (src/resources/); the parse that joins them is src/engine/parse.ts.
 */
import * as v from "valibot";
import type { Resource } from "../resources/mod.ts";
import { NODE_ID } from "./fields.ts";
import type { Problem } from "./refused.ts";

export { DeclarationRefused, type Problem } from "./refused.ts";

/** Size limits; a declaration over any of them is refused. */
export interface Limits {
  /** The declaration's JSON text, in bytes. */
  maxBytes: number;
  /** Resources in one declaration. */
  maxResources: number;
  /** One file's content, in bytes (after base64 decoding). */
  maxFileBytes: number;
  /** One file's content declared by reference (contentSha256 + size), in bytes. */
  maxReferencedBytes: number;
}

/** The limits used when none are given. */
export const DEFAULT_LIMITS: Limits = {
  maxBytes: 8 * 1024 * 1024,
  maxResources: 10_000,
  maxFileBytes: 2 * 1024 * 1024,
  maxReferencedBytes: 256 * 1024 * 1024,
};

/** What belongs to the host itself and so may never be declared. */
export interface OwnResources {
  /**
   * Files and directories (and everything below them) the host never manages,
   * nor any directory above them; a component may hold `*` (any characters
   * within it). Per OS from packaging/own_paths_by_os.ts, plus the configured ones.
   */
  paths: readonly string[];
  /** Service names (with or without ".service"); every unit of these names is refused. */
  services: readonly string[];
}

/**
 * What this machine's configuration (host.json `permit`) lets the safe parse accept although
 * it refuses it by default: kernel settings that run programs, turn a protection off or
 * lower a hardening setting, services that stop or isolate the node, groups that confer root
 * and existing system accounts to adopt (src/resources/sysctl.ts, service.ts, user.ts). The
 * trusted parse (the bundle) accepts them all.
 */
export interface Permit {
  /** Setting names, in their dotted form ("kernel.core_pattern"). */
  sysctls: readonly string[];
  /** Service names (every unit of the name, as for the host's own service). */
  services: readonly string[];
  /** Groups that confer root or read secrets, which a user may then be given ("docker"). */
  groups: readonly string[];
  /** System accounts (below the machine's UID_MIN) that a user resource may then adopt. */
  users: readonly string[];
}

/** What the parse needs to know about this host. */
export interface ParseOptions {
  /** Roots the host may manage; a path outside every one of them is refused. */
  managedRoots: readonly string[];
  /** The host's own files and services. */
  own: OwnResources;
  /** What this machine permits that the safe parse refuses by default (none when absent). */
  permit?: Permit;
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
  /**
   * Parsed with the trusted parse (the bundle the host carries): what only the bundle may do
   * is accepted at the check too. Not part of the digest.
   */
  trusted?: boolean;
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

/** The envelope, with resources checked one by one by their kinds. */
export const EnvelopeSchema = v.strictObject({
  version: v.literal(
    1,
    (i) => `version ${JSON.stringify(i.input)} is not supported; this host reads version 1`,
  ),
  node: v.optional(
    v.pipe(v.string(), v.regex(NODE_ID, "a node id is 1–63 lowercase letters, digits and -")),
  ),
  serial: v.optional(
    v.pipe(v.number(), v.safeInteger("serial is an integer"), v.minValue(0, "serial is >= 0")),
  ),
  resources: v.array(v.unknown()),
});
