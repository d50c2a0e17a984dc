/**
 * Path rules for declared resources: absolute, already normalised, and inside
 * the roots the host manages. Pure functions, no file system access.
 */
import { posix } from "../posix_path.ts";

/** The longest path the host accepts, in UTF-8 bytes (Linux PATH_MAX less its NUL). */
export const MAX_PATH_BYTES = 4095;

/** The longest path component the host accepts, in UTF-8 bytes (NAME_MAX). */
export const MAX_NAME_BYTES = 255;

const encoder = new TextEncoder();

/** The UTF-8 length of a well-formed string. */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff) i++, bytes += 2; // a pair: 2 units, 4 bytes
    else bytes += 2;
  }
  return bytes;
}

/**
 * Why a string may not be written on a command line or in a path as is, or
 * `undefined`: lone surrogates (not well-formed Unicode: two spellings of one
 * file name once encoded), C0/C1 controls and DEL, and the bidirectional
 * controls that make text display other than it is.
 */
export function unsafeCharacter(text: string): string | undefined {
  if (!text.isWellFormed()) {
    return "is not well-formed Unicode (a lone surrogate); write the characters it means";
  }
  if (text.includes("\0")) return "contains a NUL character";
  // deno-lint-ignore no-control-regex
  const control = /[\x01-\x1f\x7f-\x9f]/.exec(text);
  if (control) {
    return `contains a control character (U+${
      control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")
    }: newline, tab, …)`;
  }
  const bidi = /[\u202a-\u202e\u2066-\u2069]/.exec(text);
  if (bidi) {
    return `contains a bidirectional control character (U+${
      bidi[0].charCodeAt(0).toString(16).toUpperCase()
    }), which makes it display other than it is`;
  }
  return undefined;
}

/**
 * Why a path is not acceptable as written, or `undefined` when it is.
 *
 * @example
 * ```ts
 * pathProblem("/etc/wg/../x"); // "contains \"..\"; ..."
 * pathProblem("/etc/wireguard/wg0.conf"); // undefined
 * ```
 */
export function pathProblem(path: string): string | undefined {
  if (plainPath(path)) return undefined;
  if (path.length === 0) return "is empty; give an absolute path such as /etc/example";
  const unsafe = unsafeCharacter(path);
  if (unsafe) return unsafe;
  if (!path.startsWith("/")) return `is relative ("${path}"); paths must be absolute`;
  const bytes = path.length > MAX_PATH_BYTES / 4 ? utf8Length(path) : path.length;
  if (bytes > MAX_PATH_BYTES) {
    return `is ${bytes} bytes long (UTF-8), over the limit of ${MAX_PATH_BYTES}; use a shorter path`;
  }
  if (path.split("/").includes("..")) {
    return `contains ".."; write the path it means without it`;
  }
  if (path === "/") return `is the root directory, which the host never manages`;
  const normal = posix.normalize(path).replace(/\/+$/, "");
  if (normal !== path) return `is not normalised; write "${normal}"`;
  for (const name of path.split("/")) {
    if (name.length > MAX_NAME_BYTES / 4 && encoder.encode(name).length > MAX_NAME_BYTES) {
      return `has a component of ${
        encoder.encode(name).length
      } bytes (UTF-8), over the limit of ${MAX_NAME_BYTES} bytes per name; use a shorter name`;
    }
  }
  return undefined;
}

/**
 * Whether a path passes every rule of {@link pathProblem}, seen in one loop over its
 * characters (declarations may hold hundreds of thousands of paths): absolute, no empty,
 * "." or ".." component, no trailing "/", no control, bidirectional control or surrogate
 * (a pair is left to the full check), components and the whole within their byte limits.
 * `false` means "ask the full check", which then says why or accepts.
 */
function plainPath(path: string): boolean {
  const n = path.length;
  if (n < 2 || path.charCodeAt(0) !== 0x2f || path.charCodeAt(n - 1) === 0x2f) return false;
  let bytes = 1, start = 1, nameBytes = 0;
  for (let i = 1; i <= n; i++) {
    const c = i < n ? path.charCodeAt(i) : 0x2f;
    if (c === 0x2f) {
      const length = i - start;
      if (length === 0 || nameBytes > MAX_NAME_BYTES) return false;
      if (
        path.charCodeAt(start) === 0x2e &&
        (length === 1 || (length === 2 && path.charCodeAt(start + 1) === 0x2e))
      ) {
        return false;
      }
      start = i + 1;
      nameBytes = 0;
      if (i < n) bytes++;
      continue;
    }
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return false;
    const size = c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    if (
      size === 3 &&
      ((c >= 0xd800 && c <= 0xdfff) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069))
    ) {
      return false;
    }
    nameBytes += size;
    bytes += size;
  }
  return bytes <= MAX_PATH_BYTES;
}

/** Where a path stands to one of the host's own paths. */
export type OwnRelation = "inside" | "contains";

/** An own path, compiled for matching: components, each a name or a pattern. */
export interface OwnPattern {
  /** The entry as written, for messages. */
  text: string;
  parts: (string | RegExp)[];
}

/**
 * Compile own-path entries: absolute paths whose components may hold `*`
 * (any run of characters within that component).
 *
 * @example
 * ```ts
 * const own = compileOwnPaths(["/etc/conf.d/nox-mesh-host*"]);
 * ownRelation("/etc/conf.d/nox-mesh-host.default", own); // { relation: "inside", … }
 * ```
 */
export function compileOwnPaths(entries: readonly string[]): OwnPattern[] {
  return entries.map((text) => ({
    text,
    parts: text.split("/").slice(1).map((part) =>
      part.includes("*")
        ? new RegExp(
          `^${part.split("*").map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`,
          "s",
        )
        : part
    ),
  }));
}

/**
 * Whether `path` (absolute, normalised) is one of the host's own paths or lies
 * below one ("inside"), or is a directory above one ("contains"); the first
 * match, "inside" before "contains".
 */
export function ownRelation(
  path: string,
  own: readonly OwnPattern[],
): { relation: OwnRelation; own: string } | undefined {
  const names = path.split("/").slice(1);
  let contains: string | undefined;
  for (const pattern of candidates(own, names[0])) {
    const n = Math.min(names.length, pattern.parts.length);
    let i = 0;
    for (; i < n; i++) {
      const part = pattern.parts[i];
      if (typeof part === "string" ? part !== names[i] : !part.test(names[i])) break;
    }
    if (i < n) continue;
    if (names.length >= pattern.parts.length) return { relation: "inside", own: pattern.text };
    contains ??= pattern.text;
  }
  return contains === undefined ? undefined : { relation: "contains", own: contains };
}

/** Per list of own paths: those whose first component can match a given first name, in order. */
const byFirstName = new WeakMap<readonly OwnPattern[], Map<string, OwnPattern[]>>();

function candidates(own: readonly OwnPattern[], first: string): readonly OwnPattern[] {
  let index = byFirstName.get(own);
  if (!index) byFirstName.set(own, index = new Map());
  let list = index.get(first);
  if (!list) {
    list = own.filter(({ parts: [part] }) =>
      part === undefined || (typeof part === "string" ? part === first : part.test(first))
    );
    index.set(first, list);
  }
  return list;
}

/** True when `path` is `root` or lies below it (by whole segments). */
export function isWithin(path: string, root: string): boolean {
  if (root === "/") return true;
  return path === root || path.startsWith(root + "/");
}

/** The ancestors of an absolute path, outermost first, without "/" and the path itself. */
export function ancestors(path: string): string[] {
  const out: string[] = [];
  let at = posix.dirname(path);
  while (at !== "/") {
    out.unshift(at);
    at = posix.dirname(at);
  }
  return out;
}
