/**
 * Field schemas shared by the resource kinds (valibot). Each kind's own schema
 * lives in its module under src/resources/; the envelope in envelope.ts.
 */
import * as v from "valibot";
import { pathProblem } from "./paths.ts";

/** Node ids: lowercase letters, digits and "-", 1–63 characters, not starting with "-". */
export const NODE_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** An absolute, normalised path within the byte limits (paths.ts). */
export const absolutePath = v.pipe(
  v.string(),
  v.check((p) => pathProblem(p) === undefined, (issue) => `${pathProblem(issue.input)}`),
);

/** A resource id: unique in a declaration, safe in messages and the store. */
export const resourceId = v.pipe(
  v.string(),
  v.regex(
    /^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$/,
    "an id is 1–128 characters: letters, digits and . _ @ : - (not starting with a symbol)",
  ),
);

/**
 * `restartOn`: ids of resources declared before this one whose change in an apply
 * restarts this one's process (the parse checks that they are declared before it).
 */
export const restartOn = v.pipe(
  v.array(resourceId),
  v.maxLength(64, "names at most 64 resources"),
);

/** The one documented form of a mode: four octal digits, the first 0 (special bits are fields). */
export const MODE_FORM = /^0[0-7]{3}$/;

/** A mode: the documented four-digit octal form; special bits are fields of their own. */
export const mode = v.pipe(
  v.string('a mode is an octal string of four digits with a leading 0, such as "0644"'),
  v.check(
    (m) => MODE_FORM.test(m),
    (i) =>
      /^[1-7][0-7]{3}$/.test(i.input)
        ? `mode ${JSON.stringify(i.input)} sets special bits; write "0${
          i.input.slice(1)
        }" and name each bit as a field of its own (setuid: true, setgid: true, sticky: true)`
        : `mode ${
          JSON.stringify(i.input)
        } is not the documented form, an octal string of four digits with a leading 0; ` +
          `write it as "0644" or "0755"`,
  ),
);

/** The largest user or group id: 4294967295 is chown's "leave unchanged". */
export const MAX_ID = 4294967294;

/** A user or group, by name or numeric id. */
export const principal = (what: string) =>
  v.pipe(
    v.string(),
    v.regex(
      /^([a-z_][a-z0-9_.-]{0,31}\$?|[0-9]{1,10})$/,
      `${what} is a user/group name (e.g. "root") or a numeric id`,
    ),
    v.check(
      (p) => !/^[0-9]/.test(p) || Number(p) <= MAX_ID,
      `${what} as a numeric id is 0…${MAX_ID} (4294967295 means "leave unchanged" to chown)`,
    ),
  );

/** An opt-in special bit: true sets it; false or absent clears it. */
export const specialBit = (what: string) =>
  v.optional(v.boolean(`${what} is true or false (absent: false, the bit is cleared)`));

/** What a command line, an env file or a spawned program cannot carry in one string. */
export const lineSafe = (what: string) =>
  v.pipe(
    v.string(),
    v.check((s) => lineProblem(what, s) === undefined, (i) => `${lineProblem(what, i.input)}`),
  );

/** Why `text` cannot be one argument or environment value (`what`), or `undefined`. */
export function lineProblem(what: string, text: string): string | undefined {
  if (!/[\0\n\r]/.test(text)) return undefined;
  return `${what} contains a ${
    text.includes("\0") ? "NUL" : "line break"
  }, which a program's arguments and environment cannot carry; remove it`;
}

/** A program and its arguments: an absolute program path, no NUL (never a shell). */
export const argv = (what: string) =>
  v.pipe(
    v.array(v.string()),
    v.minLength(1, `${what} needs at least the program to run`),
    v.check(
      (a) => a.length > 0 && a[0].startsWith("/") && pathProblem(a[0]) === undefined,
      `${what}[0] must be an absolute, normalised path to the program (no PATH lookup)`,
    ),
    v.check((a) => a.every((s) => !s.includes("\0")), `${what} contains a NUL character`),
  );

/**
 * A JSON object of names and values (a container's env), each name checked by `name` and
 * each value by `value` (each returns why it is refused, or `undefined`), and every name
 * kept. valibot's own record drops "constructor" and "prototype" without a word; here
 * nothing declared vanishes (a `__proto__` key is refused earlier, by the strict JSON
 * reading). Plain functions, not schemas: an object may hold hundreds of thousands of
 * names, and each is checked in one call.
 */
export function record<V>(
  what: string,
  name: (key: string) => string | undefined,
  value: (item: unknown) => string | undefined,
): v.GenericSchema<unknown, Record<string, V>> {
  return v.pipe(
    v.custom<Record<string, unknown>>(
      (input) => input !== null && typeof input === "object" && !Array.isArray(input),
      `${what} is an object of names and values`,
    ),
    v.rawTransform(({ dataset, addIssue }) => {
      const input = dataset.value;
      let bad = 0;
      for (const key of Object.keys(input)) {
        const item = input[key];
        const why = name(key) ?? value(item);
        if (why !== undefined && ++bad <= 1000) {
          addIssue({
            message: why,
            path: [{ type: "object", origin: "value", input, key, value: item }],
          });
        }
      }
      if (bad > 1000) addIssue({ message: `and ${bad - 1000} more names or values like those` });
      // A copy whose keys are all the object's own (JSON.parse made them so): none is lost.
      return { ...input } as Record<string, V>;
    }),
  );
}
