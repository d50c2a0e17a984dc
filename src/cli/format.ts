/** Human-readable lines for results, plans and reports. */
import { type ApplyReport, type PlanEntry, tally } from "../engine/types.ts";
import type { ResourceResult } from "../store/records.ts";

/** What a resource key names, for people: "path:/etc/x" → "/etc/x". */
export function subject(key: string): string {
  return key.slice(key.indexOf(":") + 1);
}

/** One progress line for a resource result. */
export function resultLine(result: ResourceResult): string {
  const notes = [...result.changes, ...(result.detail ? [result.detail] : [])];
  const tail = notes.length ? `  (${notes.join("; ")})` : "";
  return `  ${result.outcome.padEnd(10)}${result.type.padEnd(10)}${result.id}  ${
    subject(result.key)
  }${tail}\n`;
}

/** The closing line of an apply. */
export function reportLine(report: ApplyReport): string {
  const c = report.counts;
  const nothing = c.changed + c.removed + c.forgotten === 0 && report.outcome === "converged"
    ? " — nothing to do, the machine already matched"
    : "";
  const head = `${report.outcome}: ${tally(c)} in ${report.durationMs} ms${nothing}\n`;
  const later = report.restart === undefined
    ? ""
    : `takes effect when the host is next started: ${report.restart}\n`;
  return `${head}${report.error ? `${report.error}\n` : ""}${later}`;
}

/** One line per plan entry, then a tally. */
export function planLines(entries: PlanEntry[]): string {
  const lines = entries.map((e) => {
    const notes = [...e.changes, ...(e.detail ? [e.detail] : [])];
    const tail = notes.length ? `  (${notes.join("; ")})` : "";
    return `  ${e.status.padEnd(9)}${e.type.padEnd(10)}${e.id}  ${subject(e.key)}${tail}\n`;
  });
  const count = (status: PlanEntry["status"]) => entries.filter((e) => e.status === status).length;
  const tally = `plan: ${count("create")} to create, ${count("change")} to change, ` +
    `${count("remove")} to remove, ${count("forget")} to forget, ${count("in-sync")} in sync` +
    (count("unknown") ? `, ${count("unknown")} cannot be checked` : "");
  return `${lines.join("")}${tally}\n`;
}
