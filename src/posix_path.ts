/**
 * POSIX path strings: `dirname`, `basename`, `join`, `normalize` and `resolve`, exactly as
 * node:path's `posix` answers them (tests/posix_path_test.ts compares the two). The modules
 * every apply and plan runs import these instead of node:path: importing node:path loads
 * Deno's node layer, which costs every command about 10 ms of CPU and 6 MiB before it does
 * anything (tests/bench/RESULTS.md).
 */

const SLASH = 47; // "/"
const DOT = 46; // "."

/**
 * `path` with `.` and empty segments dropped and each `..` taking the segment before it
 * away; `..` above the start is kept only when `aboveRoot` (a relative path).
 */
function normalizeString(path: string, aboveRoot: boolean): string {
  let res = "";
  let lastSegmentLength = 0;
  let lastSlash = -1;
  let dots = 0;
  let code = 0;
  for (let i = 0; i <= path.length; ++i) {
    if (i < path.length) code = path.charCodeAt(i);
    else if (code === SLASH) break;
    else code = SLASH;
    if (code === SLASH) {
      if (lastSlash === i - 1 || dots === 1) {
        // An empty segment or ".": nothing.
      } else if (dots === 2) {
        if (
          res.length < 2 || lastSegmentLength !== 2 ||
          res.charCodeAt(res.length - 1) !== DOT || res.charCodeAt(res.length - 2) !== DOT
        ) {
          if (res.length > 2) {
            const lastSlashIndex = res.lastIndexOf("/");
            if (lastSlashIndex === -1) {
              res = "";
              lastSegmentLength = 0;
            } else {
              res = res.slice(0, lastSlashIndex);
              lastSegmentLength = res.length - 1 - res.lastIndexOf("/");
            }
            lastSlash = i;
            dots = 0;
            continue;
          } else if (res.length !== 0) {
            res = "";
            lastSegmentLength = 0;
            lastSlash = i;
            dots = 0;
            continue;
          }
        }
        if (aboveRoot) {
          res += res.length > 0 ? "/.." : "..";
          lastSegmentLength = 2;
        }
      } else {
        if (res.length > 0) res += `/${path.slice(lastSlash + 1, i)}`;
        else res = path.slice(lastSlash + 1, i);
        lastSegmentLength = i - lastSlash - 1;
      }
      lastSlash = i;
      dots = 0;
    } else if (code === DOT && dots !== -1) {
      ++dots;
    } else {
      dots = -1;
    }
  }
  return res;
}

/** The path without `.`, `..` and repeated slashes (a trailing slash is kept). */
function normalize(path: string): string {
  if (path.length === 0) return ".";
  const absolute = path.charCodeAt(0) === SLASH;
  const trailing = path.charCodeAt(path.length - 1) === SLASH;
  let normal = normalizeString(path, !absolute);
  if (normal.length === 0) {
    if (absolute) return "/";
    return trailing ? "./" : ".";
  }
  if (trailing) normal += "/";
  return absolute ? `/${normal}` : normal;
}

/** The parts joined with `/`, normalised; empty parts are skipped. */
function join(...parts: string[]): string {
  let joined: string | undefined;
  for (const part of parts) {
    if (part.length > 0) joined = joined === undefined ? part : `${joined}/${part}`;
  }
  return joined === undefined ? "." : normalize(joined);
}

/** The directory part: everything before the last segment (`/` for `/x`, `.` for `x`). */
function dirname(path: string): string {
  if (path.length === 0) return ".";
  const rooted = path.charCodeAt(0) === SLASH;
  let end = -1;
  let matchedSlash = true;
  for (let i = path.length - 1; i >= 1; --i) {
    if (path.charCodeAt(i) === SLASH) {
      if (!matchedSlash) {
        end = i;
        break;
      }
    } else {
      matchedSlash = false;
    }
  }
  if (end === -1) return rooted ? "/" : ".";
  if (rooted && end === 1) return "//";
  return path.slice(0, end);
}

/** The last segment (trailing slashes ignored). */
function basename(path: string): string {
  let start = 0;
  let end = -1;
  let matchedSlash = true;
  for (let i = path.length - 1; i >= 0; --i) {
    if (path.charCodeAt(i) === SLASH) {
      if (!matchedSlash) {
        start = i + 1;
        break;
      }
    } else if (end === -1) {
      matchedSlash = false;
      end = i + 1;
    }
  }
  return end === -1 ? "" : path.slice(start, end);
}

/** The absolute path the parts lead to from the working directory, normalised. */
function resolve(...parts: string[]): string {
  let resolved = "";
  let absolute = false;
  for (let i = parts.length - 1; i >= -1 && !absolute; i--) {
    const part = i >= 0 ? parts[i] : Deno.cwd();
    if (part.length === 0) continue;
    resolved = `${part}/${resolved}`;
    absolute = part.charCodeAt(0) === SLASH;
  }
  resolved = normalizeString(resolved, !absolute);
  if (absolute) return `/${resolved}`;
  return resolved.length > 0 ? resolved : ".";
}

/** The calls of node:path's `posix` that the host makes, with node's answers. */
export const posix = { basename, dirname, join, normalize, resolve } as const;
