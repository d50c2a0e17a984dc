/**
 * The size of a module's parts, read from its syntax tree (Deno's lint plugin API, which
 * `deno test` runs): each function's lines and whether a `// Long because: …` comment
 * stands right before it, and each class's fields. tests/architecture_test.ts holds the
 * tree to the limits (issue 36 item 4); `deno run` cannot load it (the API is deno test's).
 */

/** Lines a function may take without a comment that says why it is long. */
export const FUNCTION_LINES = 60;
/** Fields (properties, private or not, static excluded) a class may hold. */
export const CLASS_FIELDS = 15;
/** Lines a file of src/run or src/engine may take. */
export const FILE_LINES = 400;
/** The comment that lets a function be longer than {@link FUNCTION_LINES}. */
export const LONG_BECAUSE = /\/\/\s*Long because:\s*\S/;

/** A function over the limit without its comment, or a class over its fields. */
export interface ShapeProblem {
  file: string;
  line: number;
  what: string;
}

interface Measured {
  functions: { name: string; line: number; lines: number; explained: boolean }[];
  classes: { name: string; line: number; fields: number }[];
}

// deno-lint-ignore no-explicit-any
type Node = any;

/** The functions and classes of `source` (TypeScript text named `file`), measured. */
export function measure(file: string, source: string): Measured {
  const out: Measured = { functions: [], classes: [] };
  const lineAt = (offset: number): number => {
    let n = 1;
    for (let i = 0; i < offset; i++) if (source.charCodeAt(i) === 10) n++;
    return n;
  };
  const plugin: Deno.lint.Plugin = {
    name: "shape",
    rules: {
      measure: {
        create() {
          // What stands right above the line a function starts on: the comment lines there
          // (its JSDoc, `//` lines) say why it is long, or nothing does.
          const lines = source.split("\n");
          const explained = (first: number): boolean => {
            for (let i = first - 2; i >= 0; i--) {
              const line = lines[i].trim();
              if (!/^(\/\/|\/\*|\*)/.test(line)) return false;
              if (LONG_BECAUSE.test(line.replace(/^(\/\*\*?|\*)\s*/, "// "))) return true;
            }
            return false;
          };
          const nameOf = (node: Node): string => {
            if (node.id?.name) return node.id.name;
            const p = node.parent;
            if (p?.type === "MethodDefinition" || p?.type === "PropertyDefinition") {
              return p.key?.name ?? (p.key?.type === "PrivateIdentifier" ? `#${p.key.name}` : "?");
            }
            if (p?.type === "VariableDeclarator") return p.id?.name ?? "?";
            return "(anonymous)";
          };
          const fn = (node: Node) => {
            const [start, end] = node.range;
            const first = lineAt(start);
            const length = lineAt(end) - first + 1;
            out.functions.push({
              name: nameOf(node),
              line: first,
              lines: length,
              explained: false,
            });
            if (length > FUNCTION_LINES) out.functions.at(-1)!.explained = explained(first);
          };
          const cls = (node: Node) => {
            const fields =
              node.body.body.filter((m: Node) =>
                (m.type === "PropertyDefinition" && !m.static) ||
                (m.type === "TSParameterProperty")
              ).length;
            // Constructor parameter properties (`constructor(readonly x: T)`) are fields too.
            const ctor = node.body.body.find((m: Node) =>
              m.type === "MethodDefinition" && m.kind === "constructor"
            );
            const params =
              (ctor?.value?.params ?? []).filter((p: Node) => p.type === "TSParameterProperty")
                .length;
            out.classes.push({
              name: node.id?.name ?? "(anonymous)",
              line: lineAt(node.range[0]),
              fields: fields + params,
            });
          };
          return {
            FunctionDeclaration: fn,
            FunctionExpression: fn,
            ArrowFunctionExpression: fn,
            ClassDeclaration: cls,
            ClassExpression: cls,
          };
        },
      },
    },
  };
  Deno.lint.runPlugin(plugin, file, source);
  return out;
}

/** What in `source` breaks the limits: functions over the lines unexplained, classes over the fields. */
export function shapeProblems(file: string, source: string): ShapeProblem[] {
  const { functions, classes } = measure(file, source);
  return [
    ...functions.filter((f) => f.lines > FUNCTION_LINES && !f.explained).map((f) => ({
      file,
      line: f.line,
      what: `function ${f.name} is ${f.lines} lines (over ${FUNCTION_LINES}) with no ` +
        "`// Long because: …` comment before it",
    })),
    ...classes.filter((c) => c.fields > CLASS_FIELDS).map((c) => ({
      file,
      line: c.line,
      what: `class ${c.name} has ${c.fields} fields (over ${CLASS_FIELDS})`,
    })),
  ];
}
