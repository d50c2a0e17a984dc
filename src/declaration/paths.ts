/**
 * Path rules for declared resources: absolute, already normalised, and inside
 * the roots the host manages. Pure functions, no file system access.
 */
import { posix } from "node:path";

/** The longest path the host accepts (Linux PATH_MAX). */
export const MAX_PATH_LENGTH = 4096;

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
  if (path.length === 0) return "is empty; give an absolute path such as /etc/example";
  if (path.includes("\0")) return "contains a NUL character";
  // deno-lint-ignore no-control-regex
  if (/[\x01-\x1f\x7f]/.test(path)) return "contains a control character (newline, tab, …)";
  if (!path.startsWith("/")) return `is relative ("${path}"); paths must be absolute`;
  if (path.length > MAX_PATH_LENGTH) return `is longer than ${MAX_PATH_LENGTH} characters`;
  if (path.split("/").includes("..")) {
    return `contains ".."; write the path it means without it`;
  }
  if (path === "/") return `is the root directory, which the host never manages`;
  const normal = posix.normalize(path).replace(/\/+$/, "");
  if (normal !== path) return `is not normalised; write "${normal}"`;
  return undefined;
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
