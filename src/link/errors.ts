/**
 * Legible link failures (DESIGN.md §7): every way the link can fail is turned
 * into one error that says which side refused (this node, the network, the
 * broker) and why, in words a person can act on.
 */
import { HostError, type HostErrorOptions } from "../errors.ts";

/** Why the link failed; the code of a LinkError is `link.<reason>`. */
export type LinkReason =
  | "dns"
  | "tcp"
  | "timeout"
  | "tls-name"
  | "tls-ca"
  | "tls-expired"
  | "auth"
  | "permission"
  | "protocol"
  | "enrol"
  | "closed";

/** Which side refused or failed. */
export type LinkSide = "node" | "network" | "broker";

/** The link could not be made or kept. */
export class LinkError extends HostError {
  readonly reason: LinkReason;
  readonly side: LinkSide;

  constructor(reason: LinkReason, side: LinkSide, what: string, options: HostErrorOptions = {}) {
    super(`link.${reason}`, what, options);
    this.reason = reason;
    this.side = side;
  }
}

/** The token is not an enrolment token this host can use. */
export class TokenError extends HostError {}

/** Thrown from checkServerIdentity when the broker's certificate does not name the broker. */
export class NameMismatch extends Error {
  /** The broker's name (or address) the node asked for. */
  readonly expected: string;
  /** What the TLS layer said of the certificate's names. */
  readonly detail: string;

  constructor(expected: string, detail: string) {
    super(`the certificate does not name ${expected}: ${detail}`);
    this.name = "NameMismatch";
    this.expected = expected;
    this.detail = detail;
  }
}

const CA_CODES = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
]);

const TCP_CODES: Record<string, string> = {
  ECONNREFUSED:
    "refused the connection (nothing listens there: the broker is down or the port is wrong)",
  ECONNRESET: "reset the connection",
  ETIMEDOUT: "did not answer (timed out)",
  EHOSTUNREACH: "is unreachable (no route to the host)",
  ENETUNREACH: "is unreachable (no route to the network)",
  EPIPE: "closed the connection",
};

/** Where the link goes, for messages. */
export interface LinkTarget {
  url: string;
  /** The node's public key, named when the broker refuses it. */
  publicKey?: string;
}

/**
 * Turn anything the NATS client or the TLS layer threw into a LinkError that
 * names the side and the reason.
 *
 * Long because: a table of the NATS client's and the TLS layer's errors, each turned into a code
 * and a sentence; a case per error reads best as one switch.
 */
export function classifyLinkError(error: unknown, target: LinkTarget): LinkError {
  if (error instanceof LinkError) return error;
  const err = error as { name?: string; message?: string; code?: string; cause?: unknown };
  const cause = err?.cause as typeof err | undefined;
  const code = err?.code ?? cause?.code;
  const message = String(err?.message ?? error);
  const { host, port } = hostPort(target.url);
  const where = `${host}:${port}`;
  const name = findNameMismatch(error);
  if (name || code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return new LinkError(
      "tls-name",
      "broker",
      `TLS: the broker at ${where} presented a certificate of the mesh's CA that does not ` +
        `name ${host} (${name?.detail ?? message}); refused before sending any credential`,
      {
        hint: "the broker's certificate must carry the name (or address) the token gives " +
          "for it, in its subject alternative names; otherwise something else answers there",
        cause: error,
      },
    );
  }
  if (
    code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_FAIL" || code === "EAI_NONAME"
  ) {
    return new LinkError(
      "dns",
      "node",
      `DNS: this node cannot resolve the broker's name "${host}" (${code})`,
      { hint: "check this machine's resolver or /etc/hosts, or the broker address", cause: error },
    );
  }
  if (code !== undefined && CA_CODES.has(code)) {
    return new LinkError(
      "tls-ca",
      "broker",
      `TLS: the broker at ${where} presented a certificate this node's enrolled CA does not vouch for (${message})`,
      {
        hint: "the broker's certificate must be signed by the CA in the enrolment token",
        cause: error,
      },
    );
  }
  if (code !== undefined && code in TCP_CODES) {
    return new LinkError("tcp", "network", `TCP: ${where} ${TCP_CODES[code]}`, {
      hint: "check that the broker runs and that this machine can reach it",
      cause: error,
    });
  }
  if (err?.name === "AuthorizationError" || /authorization violation/i.test(message)) {
    return new LinkError(
      "auth",
      "broker",
      `auth: the broker at ${where} refused this node's key${
        target.publicKey ? ` ${target.publicKey}` : ""
      } (not admitted, or no longer)`,
      {
        hint: "the control plane must admit this node's key; enrol with a fresh token",
        cause: error,
      },
    );
  }
  if (err?.name === "PermissionViolationError" || /permissions violation/i.test(message)) {
    return new LinkError(
      "permission",
      "broker",
      `permission: the broker refused ${message.replace(/^Permissions Violation for /i, "")}`,
      {
        hint:
          "the broker's permissions for this node do not include it; the control plane grants them",
        cause: error,
      },
    );
  }
  if (err?.name === "TimeoutError" || /timeout/i.test(message)) {
    return new LinkError(
      "timeout",
      "network",
      `timeout: no NATS handshake from ${where} in time (the broker is slow, stopped, or not a NATS server)`,
      { hint: "check the broker and the network path to it", cause: error },
    );
  }
  if (/connection refused/i.test(message)) {
    return new LinkError("tcp", "network", `TCP: ${where} ${TCP_CODES.ECONNREFUSED}`, {
      cause: error,
    });
  }
  return new LinkError("protocol", "broker", `link to ${where} failed: ${message}`, {
    cause: error,
  });
}

function findNameMismatch(error: unknown): NameMismatch | undefined {
  for (let e = error, depth = 0; e && depth < 5; depth++) {
    if (e instanceof NameMismatch) return e;
    const m = /the certificate does not name (\S+): (.*)$/.exec(String((e as Error).message));
    if (m) return new NameMismatch(m[1], m[2]);
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Host and port of a broker URL (tls://host:port). */
export function hostPort(url: string): { host: string; port: number } {
  try {
    const u = new URL(url);
    return { host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port || 4222) };
  } catch {
    return { host: url, port: 4222 };
  }
}
