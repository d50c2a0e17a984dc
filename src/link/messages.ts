/**
 * What the node says upward (JSON, version 1): a report per apply, a report per
 * refused declaration, heartbeats, and the inventory. A heartbeat without the managed list
 * stays well under 1 KiB; the managed list rides along only when it changed since the
 * last heartbeat that carried it (and on every link-up).
 */
import type { ApplyReport } from "../engine/types.ts";
import { createHash } from "node:crypto";
import { canonicalJson } from "../declaration/canonical.ts";
import type { Problem } from "../declaration/envelope.ts";
import type { Trigger } from "../run/queue.ts";
import type { RefusalReason } from "../trust/admission.ts";
import type { Store } from "../store/store.ts";
import type { PlanEntry } from "../engine/types.ts";
import type { ResourceResult } from "../store/records.ts";
import type { Hold } from "../engine/hold.ts";
import { runtimeVersion, VERSION } from "../version.ts";
import type { CapabilityState, Profile } from "../profile.ts";
import { NODE_LIMITS } from "./subjects.ts";
import type { TlsExpiry } from "./trust.ts";

/**
/** Report of one apply (subject mesh.node.N.report). */
export interface ApplyMessage {
  v: 1;
  kind: "apply";
  node: string;
  version: string;
  at: string;
  trigger: Trigger;
  source: ApplyReport["source"];
  origin: string;
  serial: number | null;
  digest: string;
  outcome: ApplyReport["outcome"];
  durationMs: number;
  counts: ApplyReport["counts"];
  results: ResourceResult[];
  /**
   * Results left out to keep the report within what the broker stores
   * (NODE_LIMITS.reportBytes): the unchanged ones first, then the last of the others
   * (a failed one is always kept).
   */
  omitted?: number;
  error?: string;
  /** Added on delivery (src/run/outbox.ts): the message id, also sent as `Nats-Msg-Id`. */
  id?: string;
  /** Added on delivery: older reports the outbox's bounds dropped before this one. */
  dropped?: number;
}

/** Report of a declaration that was refused: nothing was applied. */
export interface RefusalMessage {
  v: 1;
  kind: "refused";
  node: string;
  version: string;
  at: string;
  serial: number | null;
  /**
   * unsigned (no signature header), bad-signature (it does not verify against the
   * pinned signing key, for this node), bad-rotation (signed by another key, and no
   * rotation signed by the pinned key leads to it), expired (past its not-after by
   * this node's clock), unpinned (this node holds no signing key: enrolled with an
   * old token), invalid (the parse refused it), wrong-node, replay, unaddressed
   * (no node or serial), unconfirmed (applied, but its network changes were not
   * confirmed by the link within the confirm window: undone, and refused from then on).
   */
  reason: RefusalReason;
  message: string;
  problems: Problem[];
  /** Added on delivery, as for an apply report. */
  id?: string;
  /** Added on delivery, as for an apply report. */
  dropped?: number;
}

/** Heartbeat (subject mesh.node.N.heartbeat). */
export interface HeartbeatMessage {
  v: 1;
  kind: "heartbeat";
  node: string;
  /** The RUNNING version (compiled in), not what is installed. */
  version: string;
  /** The Deno version it runs on (added after v1's first form; absent from older hosts). */
  deno: string;
  at: string;
  uptimeS: number;
  rssBytes: number;
  /** The last apply: serial (null for bundle/store reconciles without one), outcome, when. */
  last: { serial: number | null; outcome: string; at: string } | null;
  /** The last serial accepted from the link. */
  serial: number | null;
  /**
   * The managed resources: how many, and the digest of their list (`held` and `heldList`:
   * protocol v1's names, which the wire keeps).
   */
  held: { count: number; digest: string };
  /** When the next drift check runs. */
  nextDriftAt: string | null;
  /** Present only when the managed set changed since it was last sent: [key, digest] pairs. */
  heldList?: [string, string][];
  /** A person's hold on the host (nothing is applied): who, why, since when; null when none. */
  hold?: Hold | null;
  /**
   * When the link's TLS expires: the broker's certificate seen last and each trusted CA,
   * with days left (added after v1's first form; absent from older hosts).
   */
  tls?: TlsExpiry;
}

/**
 * What a held host found when it would have applied (subject mesh.node.N.report): the
 * declaration it holds the machine to (the latest accepted, stored, not applied) and
 * what differs from it. Nothing was changed.
 */
export interface HeldMessage {
  v: 1;
  kind: "held";
  node: string;
  version: string;
  at: string;
  trigger: Trigger;
  hold: Hold;
  serial: number | null;
  digest: string | null;
  /** The resources that are not in sync (what an apply would do), or why none could be checked. */
  differ: PlanEntry[];
  error?: string;
  /** Added on delivery, as for an apply report. */
  id?: string;
  /** Added on delivery, as for an apply report. */
  dropped?: number;
}

/** The report of a check made while held. */
export function heldMessage(
  node: string,
  trigger: Trigger,
  hold: Hold,
  declaration: { serial?: number; digest: string } | null,
  entries: PlanEntry[],
  error?: string,
): HeldMessage {
  return {
    v: 1,
    kind: "held",
    node,
    version: VERSION,
    at: new Date().toISOString(),
    trigger,
    hold,
    serial: declaration?.serial ?? null,
    digest: declaration?.digest ?? null,
    differ: entries.filter((e) => e.status !== "in-sync").slice(0, 200),
    ...(error ? { error } : {}),
  };
}

/**
 * What a report may take before delivery adds its `id` and `dropped` fields: the
 * broker stores reports of at most NODE_LIMITS.reportBytes, and one it refused would
 * stay at the head of the outbox for ever.
 */
export const REPORT_BUDGET = NODE_LIMITS.reportBytes - 512;

/** A message's size as it goes on the wire (UTF-8 JSON). */
export function wireSize(message: unknown): number {
  return utf8Length(JSON.stringify(message));
}

const UTF8 = new TextEncoder();

/** The length of `text` in UTF-8, in bytes. */
export function utf8Length(text: string): number {
  return UTF8.encode(text).length;
}

/** How many of the first `list` items `build` can carry within `budget` bytes. */
function fitting<T>(list: readonly T[], build: (items: T[]) => unknown, budget: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (wireSize(build(list.slice(0, mid))) <= budget) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** `text` cut to at most `max` characters, saying so. */
function cut(text: string, max: number): string {
  return text.length <= max
    ? text
    : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

/**
 * The report of an apply, within REPORT_BUDGET: unchanged results are left out first,
 * then the last of the others (the failed ones stay), counted in `omitted`.
 */
export function applyMessage(node: string, report: ApplyReport, trigger: Trigger): ApplyMessage {
  return applyReportText(node, report, trigger).message;
}

/**
 * The report of an apply (applyMessage) with its wire text: the text its size was measured
 * by, so a report is stringified once on its way to the outbox, which keeps that text.
 */
export function applyReportText(
  node: string,
  report: ApplyReport,
  trigger: Trigger,
): { message: ApplyMessage; text: string } {
  const all = report.results;
  const build = (results: ResourceResult[], error = report.error): ApplyMessage => ({
    v: 1,
    kind: "apply",
    node,
    version: VERSION,
    at: new Date().toISOString(),
    trigger,
    source: report.source,
    origin: report.origin,
    serial: report.serial ?? null,
    digest: report.digest,
    outcome: report.outcome,
    durationMs: report.durationMs,
    counts: report.counts,
    results,
    ...(results.length < all.length ? { omitted: all.length - results.length } : {}),
    ...(error ? { error } : {}),
  });
  const fits = (message: ApplyMessage) => {
    const text = JSON.stringify(message);
    return utf8Length(text) <= REPORT_BUDGET ? { message, text } : undefined;
  };
  const whole = fits(build(all));
  if (whole) return whole;
  const telling = all.filter((r) => r.outcome !== "unchanged");
  const changes = fits(build(telling));
  if (changes) return changes;
  // Still too large: the failed results, and as many of the others as fit, in order.
  const failed = all.filter((r) => r.outcome === "failed").slice(0, 10).map((r) => ({
    ...r,
    detail: r.detail === undefined ? undefined : cut(r.detail, 2000),
  }));
  const others = telling.filter((r) => r.outcome !== "failed");
  const error = report.error === undefined ? undefined : cut(report.error, 4000);
  const kept = (items: ResourceResult[]) => {
    const chosen = new Set<ResourceResult>(items);
    return [...others.filter((r) => chosen.has(r)), ...failed];
  };
  const n = fitting(others, (items) => build(kept(items), error), REPORT_BUDGET);
  const message = build(kept(others.slice(0, n)), error);
  return { message, text: JSON.stringify(message) };
}

/**
 * A stored report (JSON text) within `limit` bytes once delivery adds its fields: as it
 * is when it fits; otherwise without its per-resource results or problems (counted in
 * `omitted`) and with its long texts cut. A report kept by an earlier version (which
 * cut at 256 KiB) would otherwise stay at the head of the outbox for ever.
 */
export function shrinkReport(
  body: Record<string, unknown>,
  limit: number,
): Record<string, unknown> {
  if (wireSize(body) <= limit) return body;
  const out: Record<string, unknown> = { ...body };
  let omitted = typeof body.omitted === "number" ? body.omitted : 0;
  for (const key of ["results", "problems"]) {
    if (Array.isArray(out[key])) {
      omitted += (out[key] as unknown[]).length;
      out[key] = [];
    }
  }
  if (omitted > 0) out.omitted = omitted;
  for (const key of ["error", "message", "origin"]) {
    if (typeof out[key] === "string") out[key] = cut(out[key] as string, 2000);
  }
  return out;
}

/** The report of a refusal. */
export function refusalMessage(
  node: string,
  serial: number | undefined,
  reason: RefusalMessage["reason"],
  message: string,
  problems: Problem[],
): RefusalMessage {
  const build = (list: Problem[], text = message): RefusalMessage => ({
    v: 1,
    kind: "refused",
    node,
    version: VERSION,
    at: new Date().toISOString(),
    serial: serial ?? null,
    reason,
    message: text,
    problems: list,
  });
  const first = problems.slice(0, 50);
  const built = build(first);
  if (wireSize(built) <= REPORT_BUDGET) return built;
  // Within REPORT_BUDGET: the message and each problem cut short, then fewer problems.
  const short = first.map((p) => ({ ...p, path: cut(p.path, 500), message: cut(p.message, 1000) }));
  const text = cut(message, 4000);
  return build(short.slice(0, fitting(short, (list) => build(list, text), REPORT_BUDGET)), text);
}

/** The managed set as [key, digest] pairs, and its digest. */
export function managedSummary(store: Store): { list: [string, string][]; digest: string } {
  const list = [...store.managedIndex()]
    .sort(([ka, a], [kb, b]) => a.position - b.position || (ka < kb ? -1 : 1))
    .map(([key, h]): [string, string] => [key, h.digest]);
  // Synchronous on purpose (heartbeats are built in timers); the link loads node:crypto anyway.
  const digest = `sha256:${createHash("sha256").update(canonicalJson(list)).digest("hex")}`;
  return { list, digest };
}

/**
 * Build a heartbeat; `withList` adds the managed list, unless that makes it larger than
 * the broker stores of a heartbeat (NODE_LIMITS.heartbeatBytes): the list then stays
 * out, and the control plane has it from the inventory.
 */
export function heartbeatMessage(
  node: string,
  store: Store,
  facts: {
    startedAt: number;
    serial: number | null;
    nextDriftAt: string | null;
    hold?: Hold | null;
    tls?: TlsExpiry;
  },
  managed: { list: [string, string][]; digest: string },
  withList: boolean,
): HeartbeatMessage {
  const last = store.lastApply();
  const message: HeartbeatMessage = {
    v: 1,
    kind: "heartbeat",
    node,
    version: VERSION,
    deno: runtimeVersion(),
    at: new Date().toISOString(),
    uptimeS: Math.round((performance.now() - facts.startedAt) / 1000),
    rssBytes: Deno.memoryUsage().rss,
    last: last
      ? { serial: last.serial ?? null, outcome: last.outcome, at: last.endedAt ?? last.startedAt }
      : null,
    serial: facts.serial,
    held: { count: managed.list.length, digest: managed.digest },
    nextDriftAt: facts.nextDriftAt,
    ...(withList ? { heldList: managed.list } : {}),
    hold: facts.hold ?? null,
    ...(facts.tls ? { tls: facts.tls } : {}),
  };
  if (withList && wireSize(message) > NODE_LIMITS.heartbeatBytes) delete message.heldList;
  return message;
}

/** A capability as the inventory carries it: the state and what provides it, no evidence. */
export interface InventoryCapability {
  state: CapabilityState;
  provider?: string;
  version?: string;
}

/** The profile as the inventory carries it (the evidence and details stay on the node). */
export interface InventoryProfile {
  os: { id: string; versionId?: string };
  architecture: string;
  kernel?: string;
  hostname?: string;
  capabilities: Record<string, InventoryCapability>;
}

/**
 * Inventory (subject mesh.node.N.inventory): what this node is and holds. Sent on
 * the first link of a process (so on enrolment), when its digest changes, and daily.
 */
export interface InventoryMessage {
  v: 1;
  kind: "inventory";
  node: string;
  /** The node's public NKey (its identity on the link). */
  publicKey: string;
  /** The RUNNING version. */
  version: string;
  /**
   * The Deno version it runs on (added after v1's first form; absent from older hosts). In
   * the digest: a runtime changed under the host sends the inventory again.
   */
  deno: string;
  at: string;
  /** Digest of everything below (not `at`): the control plane can tell "unchanged". */
  digest: string;
  /** Null when the process was given no way to detect it. */
  profile: InventoryProfile | null;
  /** What the host manages: [key, digest] pairs, in declaration order (v1's name). */
  held: [string, string][];
  /** This node's WireGuard public key (base64), null before the overlay made one. */
  overlayKey: string | null;
}

/** The profile without its evidence and details (small, and stable while nothing changes). */
export function inventoryProfile(profile: Profile): InventoryProfile {
  const capabilities: Record<string, InventoryCapability> = {};
  for (const [name, c] of Object.entries(profile.capabilities)) {
    capabilities[name] = {
      state: c.state,
      ...(c.provider ? { provider: c.provider } : {}),
      ...(c.version ? { version: c.version } : {}),
    };
  }
  return {
    os: {
      id: profile.os.id,
      ...(profile.os.versionId ? { versionId: profile.os.versionId } : {}),
    },
    architecture: profile.architecture,
    ...(profile.kernel ? { kernel: profile.kernel } : {}),
    ...(profile.hostname ? { hostname: profile.hostname } : {}),
    capabilities,
  };
}

/** Build the inventory; its digest covers everything but the time. */
export function inventoryMessage(
  identity: { node: string; publicKey: string },
  facts: { profile: InventoryProfile | null; held: [string, string][]; overlayKey: string | null },
): InventoryMessage {
  const content = {
    node: identity.node,
    publicKey: identity.publicKey,
    version: VERSION,
    deno: runtimeVersion(),
    profile: facts.profile,
    held: facts.held,
    overlayKey: facts.overlayKey,
  };
  const digest = `sha256:${createHash("sha256").update(canonicalJson(content)).digest("hex")}`;
  return { v: 1, kind: "inventory", ...content, at: new Date().toISOString(), digest };
}
