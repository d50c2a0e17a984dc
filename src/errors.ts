/**
 * Errors as values a person can act on: a stable `code` a caller can branch on,
 * and a message that says what went wrong, where, why, and what to do.
 */

/** Options shared by every host error. */
export interface HostErrorOptions {
  /** Where it happened: a file, a JSON path, a resource id. */
  where?: string;
  /** What a person can do about it. */
  hint?: string;
  cause?: unknown;
}

/** The base of every error the host raises on purpose. */
export class HostError extends Error {
  readonly code: string;
  readonly where?: string;
  readonly hint?: string;

  constructor(code: string, what: string, options: HostErrorOptions = {}) {
    let message = options.where ? `${options.where}: ${what}` : what;
    if (options.hint) message += `${/[.!?:]$/.test(message) ? "" : "."} ${options.hint}`;
    super(message, { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.where = options.where;
    this.hint = options.hint;
  }
}

/** A problem with how the program was invoked (exit 64). */
export class UsageError extends HostError {
  constructor(what: string, options: HostErrorOptions = {}) {
    super("usage", what, options);
  }
}

/** The state directory or its store cannot be used. */
export class StoreError extends HostError {}

/** The configuration file could not be used (exit 78); src/config.ts raises it. */
export class ConfigError extends HostError {}

/** Another apply holds the lock (exit 75). */
export class BusyError extends HostError {}

/** Describe any thrown value in one line, for reports and logs. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
