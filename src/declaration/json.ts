/**
 * Strict JSON: what `JSON.parse` accepts, less what a reader of the text and the
 * host could understand differently. A duplicate key (JSON.parse keeps the last
 * value; a reviewer sees the first), a `__proto__` key (JavaScript gives it a
 * meaning of its own), and a string that is not well-formed Unicode (a lone
 * surrogate: two spellings of one file name, content that never reads back
 * equal) are each named by their JSON path.
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
export function parseStrictJson(text: string): { value: unknown; problems: JsonProblem[] } {
  const value: unknown = JSON.parse(text);
  const problems: JsonProblem[] = [];
  scanKeys(text, problems);
  checkStrings(value, "", problems);
  return { value, problems };
}

interface Frame {
  /** Path of this object or array. */
  path: string;
  /** Keys seen so far (objects only). */
  keys?: Set<string>;
  /** The key whose value comes next (objects), or undefined while a key is expected. */
  key?: string;
  /** The index of the current element (arrays). */
  index: number;
}

const QUOTE = 0x22, BACKSLASH = 0x5c;

/** Join a path and a key the way problems are named (`a.b[3].c`). */
function child(frame: Frame | undefined): string {
  if (frame === undefined) return "";
  if (frame.keys === undefined) return `${frame.path}[${frame.index}]`;
  return frame.path === "" ? frame.key! : `${frame.path}.${frame.key}`;
}

/** The index of the quote that closes the string opened at `start`. */
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
function scanKeys(text: string, problems: JsonProblem[]): void {
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
        const at = child(top);
        if (key === "__proto__") {
          problems.push({
            path: at,
            message: `"__proto__" is not a key a declaration may use (JavaScript gives it a ` +
              `meaning of its own); remove it`,
          });
        } else if (top.keys.has(key)) {
          problems.push({
            path: at,
            message: `duplicate key "${key}": JSON keeps only the last value, so a reader of ` +
              `the text may see another value than the host would apply; write each key once`,
          });
        }
        top.keys.add(key);
      }
      i = end;
      continue;
    }
    switch (c) {
      case 0x7b: // {
        stack.push({ path: child(stack[stack.length - 1]), keys: new Set(), index: 0 });
        break;
      case 0x5b: // [
        stack.push({ path: child(stack[stack.length - 1]), index: 0 });
        break;
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
function checkStrings(value: unknown, path: string, problems: JsonProblem[]): void {
  if (typeof value === "string") {
    if (!value.isWellFormed()) {
      problems.push({
        path,
        message: "is not well-formed Unicode (a lone surrogate such as \\ud800); " +
          "write the characters it means",
      });
    }
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) checkStrings(value[i], `${path}[${i}]`, problems);
  } else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      const at = path === "" ? key : `${path}.${key}`;
      if (!key.isWellFormed()) {
        problems.push({ path: at, message: "this key is not well-formed Unicode" });
      }
      checkStrings(item, at, problems);
    }
  }
}
