/**
 * Strict JSON: what `JSON.parse` accepts, less what a reader of the text and the
 * host could understand differently. A duplicate key (JSON.parse keeps the last
 * value; a reviewer sees the first), a `__proto__` key (JavaScript gives it a
 * meaning of its own), and a string that is not well-formed Unicode (a lone
 * surrogate: two spellings of one file name, content that never reads back
 * equal) are each named by their JSON path. Text nested deeper, or objects
 * larger, than any declaration needs are refused before the text is parsed (the
 * parse alone would take seconds, and a walk of deep nesting exhausts the stack).
 */

/** One thing the strict reading refuses, at a JSON path such as `resources[2].mode`. */
export interface JsonProblem {
  path: string;
  message: string;
}

/**
 * Parse JSON text; throws `SyntaxError` for text that is not JSON, and returns
 * the value with the problems of the strict reading (empty: none).
 *
 * @example
 * ```ts
 * parseStrictJson('{"a":1,"a":2}').problems; // [{ path: "a", message: "duplicate key …" }]
 * ```
 */
export function parseStrictJson(
  text: string,
): { value: unknown; problems: JsonProblem[]; omitted: number } {
  const shape = shapeProblem(text);
  if (shape !== undefined) return { value: undefined, problems: [shape], omitted: 0 };
  const value: unknown = JSON.parse(text);
  const problems: JsonProblem[] = [];
  let omitted = 0;
  const add = (problem: JsonProblem) => {
    if (problems.length < MAX_LISTED) problems.push(problem);
    else omitted++;
  };
  scanKeys(text, add);
  checkStrings(value, "", add);
  return { value, problems, omitted };
}

/** The most problems listed (the rest are counted). */
const MAX_LISTED = 1000;

interface Frame {
  /** The frame this object or array is in, and its key or index there (none: the top). */
  parent: Frame | undefined;
  at: string | number;
  /** Its path, once asked for (only a problem asks). */
  path: string | undefined;
  /** Keys seen so far (objects only): a list while short, a set when long. */
  keys: string[] | Set<string> | undefined;
  /** The key whose value comes next (objects), or undefined while a key is expected. */
  key: string | undefined;
  /** The index of the current element (arrays). */
  index: number;
}

const QUOTE = 0x22, BACKSLASH = 0x5c;

/** The path of a frame (`a.b[3]`), written when a problem needs it. */
function pathOf(frame: Frame): string {
  if (frame.path === undefined) {
    frame.path = frame.parent === undefined ? "" : join(pathOf(frame.parent), frame.at);
  }
  return frame.path;
}

/** A path and a key or index, the way problems are named (`a.b[3].c`). */
function join(path: string, at: string | number): string {
  if (typeof at === "number") return `${path}[${at}]`;
  return path === "" ? at : `${path}.${at}`;
}

/** Where the value that comes next in `frame` is: its key (objects) or index (arrays). */
function next(frame: Frame): string | number {
  return frame.keys === undefined ? frame.index : frame.key!;
}

/** How deep objects and arrays may nest (resources[i].peers[j].allowedIps[k] is 5 deep). */
export const MAX_DEPTH = 64;

/**
 * The most keys one object may hold. The largest object a declaration has is a
 * container's env, and a process's environment holds far fewer (arguments and environment
 * together fit in the kernel's ARG_MAX, 2 MiB on this project's machines); JavaScript's
 * object of 500,000 keys alone takes seconds to build.
 */
export const MAX_KEYS = 10_000;

/**
 * Why the text's shape is refused before it is parsed (nested deeper than
 * {@link MAX_DEPTH}, an object of more than {@link MAX_KEYS} keys), or `undefined`.
 * One pass, whatever the text is; text that is not JSON is left to JSON.parse.
 */
function shapeProblem(text: string): JsonProblem | undefined {
  // Per open container: its key count (objects), or -1 (arrays).
  const keys = new Int32Array(MAX_DEPTH + 1);
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) return undefined; // not JSON: JSON.parse says so
    } else if (c === 0x7b || c === 0x5b) { // { [
      if (++depth > MAX_DEPTH) {
        return {
          path: "",
          message: `nests objects and arrays deeper than ${MAX_DEPTH} levels; a declaration ` +
            "never needs more than a few",
        };
      }
      keys[depth] = c === 0x7b ? 0 : -1;
    } else if (c === 0x7d || c === 0x5d) depth = Math.max(depth - 1, 0);
    else if (c === 0x3a && depth > 0 && keys[depth] >= 0 && ++keys[depth] > MAX_KEYS) { // :
      return {
        path: "",
        message: `holds an object of more than ${MAX_KEYS} keys; no object of a declaration ` +
          "needs that many (a container's environment cannot hold them)",
      };
    }
  }
  return undefined;
}

/** The index of the quote that closes the string opened at `start` (-1: none). */
function stringEnd(text: string, start: number): number {
  let at = start + 1;
  for (;;) {
    const quote = text.indexOf('"', at);
    let slashes = 0;
    while (text.charCodeAt(quote - 1 - slashes) === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return quote;
    at = quote + 1;
  }
}

/** Walk text that JSON.parse accepted, naming duplicate and `__proto__` keys. */
function scanKeys(text: string, add: (problem: JsonProblem) => void): void {
  const stack: Frame[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      const top = stack[stack.length - 1];
      if (top?.keys !== undefined && top.key === undefined) {
        const raw = text.slice(i + 1, end);
        const key: string = raw.includes("\\") ? JSON.parse(text.slice(i, end + 1)) : raw;
        top.key = key;
        const seen = Array.isArray(top.keys) ? top.keys.includes(key) : top.keys.has(key);
        if (key === "__proto__") {
          add({
            path: join(pathOf(top), key),
            message: `"__proto__" is not a key a declaration may use (JavaScript gives it a ` +
              `meaning of its own); remove it`,
          });
        } else if (seen) {
          add({
            path: join(pathOf(top), key),
            message: `duplicate key "${key}": JSON keeps only the last value, so a reader of ` +
              `the text may see another value than the host would apply; write each key once`,
          });
        }
        if (!Array.isArray(top.keys)) top.keys.add(key);
        else if (top.keys.push(key) > 16) top.keys = new Set(top.keys);
      }
      i = end;
      continue;
    }
    switch (c) {
      case 0x7b: // {
      case 0x5b: { // [
        const parent = stack[stack.length - 1];
        stack.push({
          parent,
          at: parent === undefined ? "" : next(parent),
          path: undefined,
          keys: c === 0x7b ? [] : undefined,
          key: undefined,
          index: 0,
        });
        break;
      }
      case 0x7d: // }
      case 0x5d: // ]
        stack.pop();
        break;
      case 0x2c: { // ,
        const top = stack[stack.length - 1];
        if (top.keys !== undefined) top.key = undefined;
        else top.index++;
        break;
      }
    }
  }
}

/** Name every string (value or key) that is not well-formed Unicode. */
function checkStrings(value: unknown, path: string, add: (problem: JsonProblem) => void): void {
  // A path is written only for a problem or a container: lists of strings may be long.
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) checkItem(value[i], path, i, add);
  } else if (value !== null && typeof value === "object") {
    for (const key of Object.keys(value)) {
      if (!key.isWellFormed()) {
        add({ path: join(path, key), message: "this key is not well-formed Unicode" });
      }
      checkItem((value as Record<string, unknown>)[key], path, key, add);
    }
  } else checkItem(value, "", undefined, add);
}

/** {@link checkStrings} for one item at `at` of the container at `path`. */
function checkItem(
  item: unknown,
  path: string,
  at: string | number | undefined,
  add: (problem: JsonProblem) => void,
): void {
  if (typeof item === "string") {
    if (!item.isWellFormed()) {
      add({
        path: at === undefined ? path : join(path, at),
        message: "is not well-formed Unicode (a lone surrogate such as \\ud800); " +
          "write the characters it means",
      });
    }
  } else if (item !== null && typeof item === "object") {
    checkStrings(item, at === undefined ? path : join(path, at), add);
  }
}
