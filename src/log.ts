/**
 * The service's log lines and their levels. Under systemd, with the journal as
 * the output (JOURNAL_STREAM is set), each line starts with its syslog priority
 * (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug), which journald takes as
 * the line's priority, so `journalctl -u nox-mesh-host -p warning` shows what
 * went wrong. Anywhere else (OpenRC's log file, a terminal) lines stay plain.
 *
 * Lines carry text the host did not write: a tool's stderr, a broker's error. On
 * both paths every control character in it is escaped (`\x1b`, `\r`, `\x00`,
 * `\u009b`, bidirectional overrides as `\u202e`; a tab stays), so reading the log
 * in a terminal (`tail -f`, `cat`) runs no escape sequence, and no carriage
 * return hides what came before it on the line. A newline in such text would start
 * a line that looks like the host's own: every line after the first that does not
 * start with white space is indented by two spaces.
 */

/** How much a log line matters. */
export type LogLevel = "error" | "warning" | "info" | "debug";

/** Writes one log line (info unless a level is given). */
export type Log = (line: string, level?: LogLevel) => void;

/** syslog priorities (RFC 5424) of the levels. */
export const SYSLOG_PRIORITY: Readonly<Record<LogLevel, number>> = {
  error: 3,
  warning: 4,
  info: 6,
  debug: 7,
};

/**
 * One line as written: `<N>line` for the journal, the line alone otherwise.
 * Each line of a multi-line text gets the prefix, so none falls back to info.
 *
 * @example
 * ```ts
 * logLine("apply failed", "error", true); // "<3>apply failed\n"
 * ```
 */
export function logLine(line: string, level: LogLevel = "info", journal = false): string {
  const lines = line.split("\n");
  const prefix = journal ? `<${SYSLOG_PRIORITY[level]}>` : "";
  return lines.map((l, i) => {
    const text = escapeControls(l);
    const indent = i > 0 && text !== "" && !/^[ \t]/.test(text) ? "  " : "";
    return `${prefix}${indent}${text}\n`;
  }).join("");
}

/** C0 (but tab and newline), DEL, C1, and the invisible marks that reorder or break lines. */
// deno-lint-ignore no-control-regex
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with each control character written as an escape (`\r`, `\x1b`, `\u202e`).
 *
 * @example
 * ```ts
 * escapeControls("a\u001b[31mb"); // "a\\x1b[31mb"
 * ```
 */
export function escapeControls(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    if (c === "\r") return "\\r";
    return code < 0x80 ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`;
  });
}

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, "0");
}

/** Whether stderr goes to the journal: systemd sets JOURNAL_STREAM for a unit's output. */
export function journalIsOutput(env: (name: string) => string | undefined): boolean {
  const value = env("JOURNAL_STREAM");
  return value !== undefined && /^\d+:\d+$/.test(value);
}
