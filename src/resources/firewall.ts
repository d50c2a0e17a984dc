/**
 * The firewall resource (DESIGN.md §17): one nftables table per resource,
 * owned by the host. The declared rules (nft syntax for the table's body) are
 * syntax-checked before anything changes (a syntax error fails the plan and
 * names the line), then the whole table is replaced in ONE transaction (no
 * moment without rules). The kernel's JSON form of the table, handles and
 * counter values dropped, is digested after apply and recorded (a kind note);
 * every check compares it again, so a person's `nft flush table` or added rule
 * is drift, repaired. The host marks its tables with the comment
 * "nox-mesh-host"; a table without it is never touched. No longer declared:
 * the table is deleted (if it still carries the mark).
 */
import * as v from "valibot";
import { digestOf, sha256Hex } from "../declaration/canonical.ts";
import { resourceId } from "../declaration/fields.ts";
import type { Firewall, FirewallTable } from "../providers.ts";
import {
  type Change,
  change,
  type Diff,
  type KindContext,
  type Release,
  type ReleaseOptions,
  type ResourceKind,
} from "./kind.ts";
import { NoProviderError, ResourceError } from "./kind.ts";

/** The comment the host gives every table it creates. */
export const FIREWALL_MARK = "nox-mesh-host";

/** Longest rules text accepted (bytes). */
export const MAX_RULES_BYTES = 256 * 1024;

/**
 * Why a rules text could not stay inside its table, or `undefined`: it must be
 * a table body, so its braces balance without ever closing the table, and it
 * may not pull in files (`include`).
 */
export function rulesProblem(text: string): string | undefined {
  if (new TextEncoder().encode(text).length > MAX_RULES_BYTES) {
    return `the rules are over ${MAX_RULES_BYTES} bytes`;
  }
  if (text.includes("\0")) return "the rules contain a NUL character";
  let depth = 0;
  let line = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\n") line++;
    else if (c === "#") {
      while (i + 1 < text.length && text[i + 1] !== "\n") i++;
    } else if (c === '"') {
      i++;
      while (i < text.length && text[i] !== '"' && text[i] !== "\n") i++;
      if (text[i] !== '"') return `line ${line}: a string is not closed on its line`;
    } else if (c === "{") depth++;
    else if (c === "}") {
      depth--;
      if (depth < 0) {
        return `line ${line}: "}" closes the table itself; the rules are the table's body only`;
      }
    } else if (/[A-Za-z]/.test(c) && (i === 0 || !/[\w$@.-]/.test(text[i - 1]))) {
      const word = /^[A-Za-z_]+/.exec(text.slice(i))![0];
      if (word === "include") {
        return `line ${line}: "include" is refused; the rules are given whole, never read from files`;
      }
      i += word.length - 1;
    }
  }
  if (depth !== 0) return `the rules leave ${depth} "{" unclosed`;
  return undefined;
}

/** Resource: an nftables table, its body in nft syntax. */
export const FirewallSchema = v.strictObject({
  type: v.literal("firewall"),
  id: resourceId,
  family: v.picklist(["inet", "ip", "ip6"], "family is one of inet, ip, ip6"),
  table: v.pipe(
    v.string(),
    v.regex(
      /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/,
      "a table name is 1–64 letters, digits, _ and - (starting with a letter or _)",
    ),
  ),
  rules: v.pipe(
    v.string(),
    v.check((s) => rulesProblem(s) === undefined, (i) => `${rulesProblem(i.input as string)}`),
  ),
});

/** A firewall (nftables table) resource. */
export type FirewallResource = v.InferOutput<typeof FirewallSchema>;

/** What two firewall resources may not both manage: the table. */
export function firewallKey(resource: Pick<FirewallResource, "family" | "table">): string {
  return `firewall:${resource.family} ${resource.table}`;
}

/** One difference between the declaration and the kernel (its words say which). */
export type FirewallChange = Change<"create" | "declared" | "drift" | "unknown">;

/** What the kind records about a table after loading it. */
interface Loaded {
  /** Digest of the declared family, table and rules. */
  declared: string;
  /** Digest of the kernel's JSON form right after loading. */
  kernel: string;
  /** How many rules the kernel held then. */
  rules: number;
}

function firewall(ctx: KindContext): Firewall {
  const fw = ctx.providers.firewall;
  if (!fw) {
    throw new NoProviderError("firewall", "working nftables (see the profile's nftables row)");
  }
  return fw;
}

function name(r: Pick<FirewallResource, "family" | "table">): string {
  return `table ${r.family} ${r.table}`;
}

function notOurs(r: Pick<FirewallResource, "family" | "table">): ResourceError {
  return new ResourceError(
    "resource.firewall-not-ours",
    `nftables ${name(r)} exists but was not created by this host (it has no comment ` +
      `"${FIREWALL_MARK}"); the host never touches it`,
    { hint: "delete or rename that table by hand, or declare another table name" },
  );
}

function ruleCount(table: FirewallTable): number {
  return (JSON.parse(table.ruleset) as { nftables?: Record<string, unknown>[] }).nftables
    ?.filter((o) => "rule" in o).length ?? 0;
}

const noteKey = (r: FirewallResource | Pick<FirewallResource, "family" | "table">) =>
  `${firewallKey(r)}:loaded`;

function declaredDigest(r: FirewallResource): Promise<string> {
  return digestOf({ family: r.family, table: r.table, rules: r.rules });
}

/** Syntax-check the rules: a problem fails here, naming the line, before anything changes. */
async function syntaxCheck(fw: Firewall, r: FirewallResource): Promise<void> {
  const problem = await fw.checkRules(r.family, r.table, r.rules);
  if (problem) {
    throw new ResourceError(
      "resource.firewall-syntax",
      `the rules of ${name(r)} do not load: ${
        problem.line ? `line ${problem.line} of the rules: ` : ""
      }${problem.message}`,
      { hint: "fix the rules; the table loaded now is left as it is" },
    );
  }
}

/** The firewall kind. */
export const firewallKind: ResourceKind<FirewallResource, FirewallChange> = {
  type: "firewall",
  schema: FirewallSchema,
  needs: "firewall",
  mayCutLink: true,

  key: firewallKey,

  async check(ctx: KindContext, resource: FirewallResource): Promise<Diff<FirewallChange>> {
    const fw = firewall(ctx);
    const table = await fw.read(resource.family, resource.table);
    let changes: FirewallChange[];
    if (table === null) changes = [change("create", "create the table")];
    else {
      if (table.comment !== FIREWALL_MARK) throw notOurs(resource);
      const noted = ctx.notes.get(noteKey(resource));
      const loaded = noted ? JSON.parse(noted) as Loaded : undefined;
      if (!loaded) {
        changes = [change("unknown", "rule set not recorded by this host; reload it")];
      } else if (loaded.declared !== await declaredDigest(resource)) {
        changes = [change("declared", "rule set changed in the declaration")];
      } else if (loaded.kernel !== await sha256Hex(table.ruleset)) {
        const now = ruleCount(table);
        changes = [change(
          "drift",
          `rule set changed on the machine (${now} rules where ${loaded.rules} were loaded); ` +
            "reload it",
        )];
      } else changes = [];
    }
    if (changes.length) await syntaxCheck(fw, resource);
    return { exists: table !== null, changes };
  },

  async apply(ctx: KindContext, resource: FirewallResource): Promise<void> {
    const fw = firewall(ctx);
    // Look again right before acting: never replace a table that is not ours.
    const before = await fw.read(resource.family, resource.table);
    if (before !== null && before.comment !== FIREWALL_MARK) throw notOurs(resource);
    await fw.replace(resource.family, resource.table, resource.rules, FIREWALL_MARK);
    const after = await fw.read(resource.family, resource.table);
    if (after === null || after.comment !== FIREWALL_MARK) {
      throw new ResourceError(
        "resource.firewall-read-back",
        `after loading, the kernel holds no ${name(resource)} carrying the host's mark`,
      );
    }
    const loaded: Loaded = {
      declared: await declaredDigest(resource),
      kernel: await sha256Hex(after.ruleset),
      rules: ruleCount(after),
    };
    ctx.notes.set(noteKey(resource), JSON.stringify(loaded));
  },

  async release(
    ctx: KindContext,
    spec: FirewallResource,
    { dryRun }: ReleaseOptions,
  ): Promise<Release> {
    const fw = firewall(ctx);
    const table = await fw.read(spec.family, spec.table);
    if (table === null) {
      if (!dryRun) ctx.notes.set(noteKey(spec), undefined);
      return { outcome: "removed", detail: "already gone" };
    }
    if (table.comment !== FIREWALL_MARK) {
      if (!dryRun) ctx.notes.set(noteKey(spec), undefined);
      return {
        outcome: "forgotten",
        detail: `${name(spec)} no longer carries the host's mark; left in place`,
      };
    }
    if (!dryRun) {
      await fw.remove(spec.family, spec.table);
      ctx.notes.set(noteKey(spec), undefined);
    }
    return { outcome: "removed" };
  },
};
