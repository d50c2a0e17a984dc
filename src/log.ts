/**
 * The service's log lines and their levels. Under systemd, with the journal as
 * the output (JOURNAL_STREAM is set), each line starts with its syslog priority
 * (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug), which journald takes as
 * the line's priority, so `journalctl -u nox-mesh-host -p warning` shows what
 * went wrong. Anywhere else lines stay plain.
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
  return lines.map((l) => `${prefix}${l}\n`).join("");
}

/** Whether stderr goes to the journal: systemd sets JOURNAL_STREAM for a unit's output. */
export function journalIsOutput(env: (name: string) => string | undefined): boolean {
  const value = env("JOURNAL_STREAM");
  return value !== undefined && /^\d+:\d+$/.test(value);
}
