/**
 * nftables (the `Firewall` port): one table at a time. The syntax check runs
 * exactly the transaction a replace would (`nft -c -f -`); a replace is ONE
 * `nft -f -` transaction that makes sure the table exists, deletes it and
 * defines it again, so there is no moment without rules. Read-back is
 * `nft -j list table FAMILY NAME` with handles, counter values and the state
 * that rules fill (dynamic sets' elements, timeouts' countdowns) dropped
 * (and the table's comment from `nft list table` where the JSON lacks it).
 */
import { canonicalJson } from "../../src/declaration/canonical.ts";
import type { Firewall, FirewallTable, RulesProblem } from "../../src/providers.ts";
import { mustRun, runProgram, type RunVia } from "../_run.ts";

/** Options of {@link nftables}. */
export interface NftablesOptions extends RunVia {
  /** How long one nft run may take (default 30 s). */
  timeoutMs?: number;
}

const FAMILIES = new Set(["inet", "ip", "ip6"]);
const TABLE = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

function named(family: string, table: string): string {
  if (!FAMILIES.has(family)) {
    throw new TypeError(`nftables family "${family}" is not inet, ip or ip6`);
  }
  if (!TABLE.test(table)) throw new TypeError(`nftables table name "${table}" is not allowed`);
  return `${family} ${table}`;
}

/** Lines before the rules in {@link replaceText}. */
export const RULES_OFFSET = 4;

/** The one transaction that replaces a table: ensure it exists, delete it, define it. */
export function replaceText(family: string, table: string, rules: string, comment: string): string {
  const t = named(family, table);
  if (/["\n\\]/.test(comment)) throw new TypeError("a table comment is one line without quotes");
  return `table ${t}\ndelete table ${t}\ntable ${t} {\n\tcomment "${comment}"\n${rules}\n}\n`;
}

/** The first problem nft reported, mapped to a line of the rules. */
export function firstProblem(stderr: string): RulesProblem {
  const m = /^[^:\n]*:(\d+):[0-9-]+: Error: (.*)$/m.exec(stderr);
  if (!m) {
    const line = stderr.split("\n").find((l) => /Error/.test(l)) ?? stderr.trim();
    return { line: 0, message: line.replace(/^.*?Error: /, "").trim() || "nft refused them" };
  }
  const line = Number(m[1]) - RULES_OFFSET;
  return { line: line >= 1 ? line : 0, message: m[2].trim() };
}

/**
 * The kernel's JSON as canonical text, without what changes by itself: handles,
 * counter and quota values, the countdown of an element's timeout (`expires`),
 * and the elements of sets and maps that the rules fill (an `add @set` or
 * `update @set` statement, or the `dynamic` flag): those are the table's state,
 * not its rules, and reloading the table to "repair" them would reset every
 * rate limit and every learnt address.
 */
export function normaliseRuleset(json: string): string {
  const drop = new Set(["handle", "packets", "bytes", "used", "expires"]);
  const parsed = JSON.parse(json) as { nftables?: Record<string, unknown>[] };
  const objects = (parsed.nftables ?? []).filter((o) => !("metainfo" in o));
  const filled = setsFilledByRules(objects);
  const clean = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(clean);
    if (value === null || typeof value !== "object") return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (!drop.has(k)) out[k] = clean(v);
    return out;
  };
  return canonicalJson({
    nftables: objects.map((o) => {
      for (const kind of ["set", "map"] as const) {
        const set = o[kind] as { name?: string; flags?: unknown; elem?: unknown } | undefined;
        if (!set) continue;
        const dynamic = Array.isArray(set.flags) && set.flags.includes("dynamic");
        if (dynamic || filled.has(String(set.name))) {
          const { elem: _state, ...rest } = set;
          return clean({ [kind]: rest });
        }
      }
      return clean(o);
    }),
  });
}

/** The names of the sets and maps that a rule's `add`/`update` statement writes to. */
function setsFilledByRules(objects: Record<string, unknown>[]): Set<string> {
  const names = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) return value.forEach(visit);
    if (value === null || typeof value !== "object") return;
    for (const [k, v] of Object.entries(value)) {
      const target = (v as { op?: unknown; set?: unknown; map?: unknown } | null) ?? {};
      if (
        (k === "set" || k === "map") && (target.op === "add" || target.op === "update") &&
        typeof target[k] === "string"
      ) {
        names.add((target[k] as string).replace(/^@/, ""));
      }
      visit(v);
    }
  };
  objects.filter((o) => "rule" in o).forEach(visit);
  return names;
}

/**
 * The nftables adapter.
 *
 * @example
 * ```ts
 * const fw = nftables();
 * await fw.replace("inet", "edge", "chain input { type filter hook input priority 0; }", "nox-mesh-host");
 * ```
 */
export function nftables(options: NftablesOptions = {}): Firewall {
  const { timeoutMs = 30_000 } = options;
  const base = { env: options.env, via: options.via, timeoutMs };
  return {
    name: "nftables",

    async checkRules(family, table, rules) {
      const r = await runProgram(["nft", "-c", "-f", "-"], {
        ...base,
        input: replaceText(family, table, rules, "check"),
      });
      return r.code === 0 ? null : firstProblem(r.stderr);
    },

    async read(family, table): Promise<FirewallTable | null> {
      const t = named(family, table).split(" ");
      const r = await runProgram(["nft", "-j", "list", "table", ...t], base);
      if (r.code !== 0) {
        if (/No such file or directory/.test(r.stderr)) return null;
        await mustRun(["nft", "-j", "list", "table", ...t], base); // throws, naming it
      }
      const parsed = JSON.parse(r.stdout) as { nftables?: { table?: { comment?: string } }[] };
      let comment = parsed.nftables?.find((o) => o.table)?.table?.comment;
      if (comment === undefined) {
        // Older nft (1.0.6) leaves the table's comment out of its JSON.
        const text = await mustRun(["nft", "list", "table", ...t], base);
        comment = /^table [^\n]*\{\n\tcomment "([^"\n]*)"$/m.exec(text.stdout)?.[1];
      }
      return { ...(comment === undefined ? {} : { comment }), ruleset: normaliseRuleset(r.stdout) };
    },

    async replace(family, table, rules, comment) {
      await mustRun(["nft", "-f", "-"], {
        ...base,
        input: replaceText(family, table, rules, comment),
      });
    },

    async remove(family, table) {
      await mustRun(["nft", "delete", "table", ...named(family, table).split(" ")], base);
    },
  };
}
