/** The link and service part of `status`: identity, service, link state, next drift check. */
import { brokerList, readIdentity } from "../link/identity.ts";
import type { LinkState } from "../link/link.ts";
import { isCurrent, readRunStatus } from "../run/run_status.ts";
import type { Store } from "../store/store.ts";
import { type TlsExpiry, tlsExpiry } from "../link/trust.ts";

/** What `status --json` adds about the link and the service. */
export interface LinkStatus {
  identity:
    | {
      node: string;
      publicKey: string;
      brokers: { url: string; pin?: string }[];
      enrolledAt: string;
      /** The control plane's signing key this node trusts (pinned, or rotated to). */
      signer: string;
    }
    | null;
  service: {
    running: boolean;
    pid: number;
    version: string;
    phase: string;
    startedAt: string;
    updatedAt: string;
    nextDriftAt: string | null;
    lastHeartbeatAt: string | null;
  } | null;
  link: {
    state: string;
    since: string | null;
    lastError: { code: string; side: string; message: string; at: string } | null;
    /** The broker in use (or being tried), while the service runs. */
    server: string | null;
    /** The last move to another broker: from, to, why it left, when. */
    lastMove: { from: string; to: string; why: string; at: string } | null;
  };
  /**
   * When the link's TLS expires (days left): the broker's certificate the service's link
   * came up with last, and each CA this node trusts; null when not enrolled.
   */
  tls: TlsExpiry | null;
}

/** Read the identity and the run process's status record from the store. */
export function linkStatus(store: Store, now: Date = new Date()): LinkStatus {
  const identity = readIdentity(store);
  const run = readRunStatus<LinkState>(store);
  const running = run !== null && isCurrent(run, now);
  const state = !identity
    ? "not enrolled"
    : !running
    ? "service not running"
    : run.linkProblem
    ? "cannot start"
    : run.link?.phase ?? "not started";
  const lastError = run?.link?.lastError ??
    (run?.linkProblem
      ? { code: "link.start", side: "node", message: run.linkProblem, at: run.updatedAt }
      : null);
  return {
    identity: identity
      ? {
        node: identity.node,
        publicKey: identity.publicKey,
        brokers: identity.brokers,
        enrolledAt: identity.enrolledAt,
        signer: identity.signer,
      }
      : null,
    service: run && {
      running,
      pid: run.pid,
      version: run.version,
      phase: running
        ? run.phase
        : run.phase === "upgrading"
        ? "exited for an upgrade"
        : run.phase === "restarting"
        ? `exited for a restart (${run.restartFor ?? "memory ceiling"})`
        : "stopped",
      startedAt: run.startedAt,
      updatedAt: run.updatedAt,
      nextDriftAt: running ? run.nextDriftAt : null,
      lastHeartbeatAt: run.lastHeartbeatAt,
    },
    link: {
      state,
      since: running && run.link ? run.link.since : null,
      lastError,
      server: running && run.link ? run.link.url : null,
      lastMove: run?.link?.lastMove ?? null,
    },
    tls: identity ? tlsExpiry(identity.trust, run?.link?.certificate, now.getTime()) : null,
  };
}

/** Rows for people. */
export function linkRows(s: LinkStatus): [string, string][] {
  const rows: [string, string][] = [];
  rows.push([
    "identity",
    s.identity
      ? `key ${s.identity.publicKey}, ${s.identity.brokers.length === 1 ? "broker" : "brokers"} ${
        brokerList(s.identity)
      }`
      : "none: enrol with a token (enrol --token - < token.txt)",
  ]);
  rows.push([
    "service",
    !s.service
      ? "never ran on this state directory"
      : s.service.running
      ? `running (pid ${s.service.pid}, ${s.service.version}, since ${s.service.startedAt})`
      : `${s.service.phase} (last seen ${s.service.updatedAt}, pid ${s.service.pid})`,
  ]);
  rows.push(["link", `${s.link.state}${s.link.since ? ` since ${s.link.since}` : ""}`]);
  if (s.link.server) rows.push(["broker", s.link.server]);
  if (s.link.lastMove) {
    const m = s.link.lastMove;
    rows.push(["link moved", `from ${m.from} to ${m.to} at ${m.at}: ${m.why}`]);
  }
  if (s.link.lastError) {
    rows.push([
      "link error",
      `${s.link.lastError.message} (${s.link.lastError.side} side, ${s.link.lastError.at})`,
    ]);
  }
  if (s.tls?.broker) {
    const b = s.tls.broker;
    rows.push([
      "broker cert",
      `${b.subject} (${b.issuer}) expires ${b.notAfter}: ${b.daysLeft} days left`,
    ]);
  }
  for (const ca of s.tls?.cas ?? []) {
    rows.push([
      "trusted CA",
      `${ca.subject} ${ca.usable ? "until" : "NOT USED since"} ${ca.ends}${
        ca.usable ? `: ${ca.daysLeft} days left` : ""
      }`,
    ]);
  }
  rows.push(["next drift", s.service?.nextDriftAt ?? "-"]);
  return rows;
}
