/** Program argument vectors, shown the way a person would type them. */

/**
 * An argv as a person would type it in a shell, for messages (quoted only where needed).
 *
 * @example
 * ```ts
 * shownArgv(["/usr/bin/test", "-f", "/var/lib/db ok"]); // '/usr/bin/test -f "/var/lib/db ok"'
 * ```
 */
export function shownArgv(argv: readonly string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(" ");
}
