/**
 * The command line's own reader of options (src/cli/args.ts) reads every argument vector
 * the way node:util's parseArgs (strict, positionals allowed) does: the same values and
 * positionals, or a refusal where it refuses. Compared on the commands' real options and
 * on seeded random vectors of the shapes that matter (groups, `=`, `--`, dashes as values).
 */
import assert from "node:assert/strict";
import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import { ArgsError, readArgs } from "../src/cli/args.ts";
import { COMMANDS } from "../src/cli/main.ts";
import { GLOBAL_OPTIONS } from "../src/cli/command.ts";

function node(args: string[], options: ParseArgsOptionsConfig) {
  try {
    const { values, positionals } = parseArgs({ args, options, allowPositionals: true });
    return { values: { ...values }, positionals };
  } catch (error) {
    return { refused: (error as Error).message };
  }
}

function ours(args: string[], options: ParseArgsOptionsConfig) {
  try {
    return readArgs(args, options);
  } catch (error) {
    assert.ok(error instanceof ArgsError, `not an ArgsError: ${error}`);
    return { refused: (error as Error).message };
  }
}

function same(args: string[], options: ParseArgsOptionsConfig) {
  const want = node(args, options);
  const got = ours(args, options);
  const shown = JSON.stringify(args);
  if ("refused" in want) {
    assert.ok(
      "refused" in got,
      `${shown}: node refuses (${want.refused}), ours reads ${JSON.stringify(got)}`,
    );
  } else {
    assert.deepEqual(got, want, shown);
  }
}

/** A little random generator with a seed, so a failure can be run again. */
function random(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
}

const WORDS = [
  "--json",
  "--json=",
  "--json=1",
  "-h",
  "-q",
  "-qh",
  "-hq",
  "-qq",
  "--wait",
  "--wait=5",
  "--wait=-1",
  "5",
  "-5",
  "-",
  "--",
  "site.json",
  "--bundle",
  "--bundle=x",
  "-x",
  "-qx",
  "--nope",
  "--state-dir",
  "/var/lib/x",
  "--config",
  "--token",
  "--token-file",
  "-w",
  "-w5",
  "-qw",
  "-qw5",
  "-wq",
  "--replace",
  "--drift-interval",
  "--help",
  "---",
  "--=",
  "-=",
  "--__proto__",
  "--constructor",
  "--toString",
  "-ä",
  "--wait=",
  "--quiet",
];

Deno.test("cli args: every command's options read as node's parseArgs reads them", () => {
  for (const command of COMMANDS) {
    const options = { ...GLOBAL_OPTIONS, ...command.options };
    for (const a of WORDS) {
      same([a], options);
      for (const b of WORDS) {
        same([a, b], options);
        same([b, "file", a], options);
      }
    }
  }
});

Deno.test("cli args: seeded random vectors, with a short string option too, read the same (20,000 cases)", () => {
  const options: ParseArgsOptionsConfig = {
    ...GLOBAL_OPTIONS,
    quiet: { type: "boolean", short: "q" },
    wait: { type: "string", short: "w" },
    bundle: { type: "boolean" },
  };
  const next = random(28);
  for (let n = 0; n < 20_000; n++) {
    const length = Math.floor(next() * 6);
    const args = Array.from({ length }, () => WORDS[Math.floor(next() * WORDS.length)]);
    same(args, options);
  }
});

Deno.test("cli args: what a person is told names the option", () => {
  const options = { ...GLOBAL_OPTIONS, wait: { type: "string" as const } };
  assert.throws(() => readArgs(["--nope"], options), /Unknown option '--nope'/);
  assert.throws(() => readArgs(["--json=yes"], options), /'--json' does not take an argument/);
  assert.throws(() => readArgs(["--wait"], options), /'--wait <value>' argument missing/);
  assert.throws(() => readArgs(["--wait", "-5"], options), /'--wait' argument is ambiguous/);
  assert.deepEqual(readArgs(["--wait=-5", "--", "-f"], options), {
    values: { wait: "-5" },
    positionals: ["-f"],
  });
});
