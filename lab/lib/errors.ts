/** Error codes a caller of the lab library can branch on. */
export type LabErrorCode =
  | "command-failed"
  | "timeout"
  | "base-build-failed"
  | "machine-failed"
  | "broker-failed"
  | "network-failed"
  | "usage"
  | "assertion-failed"
  | "missing-tool";

/** Every failure of the lab library: `code` to branch on, a message that says what to do. */
export class LabError extends Error {
  /** What kind of failure this is. */
  readonly code: LabErrorCode;
  constructor(code: LabErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "LabError";
    this.code = code;
  }
}
