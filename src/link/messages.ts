/**
 * What the node says upward (JSON, version 1): a report per apply, a report per
 * refused declaration, heartbeats, and the inventory. A heartbeat without the held list stays
 * well under 1 KiB; the held list rides along only when it changed since the
 * last heartbeat that carried it (and on every link-up).
 */
import type { ApplyReport } from "../engine/types.ts";
import { createHash } from "node:crypto";
import { canonicalJson } from "../declaration/canonical.ts";
import type { Problem } from "../declaration/envelope.ts";
import type { RefusalReason } from "../engine/admit.ts";
import type { Store } from "../store/store.ts";
import type { ResourceResult } from "../engine/types.ts";
import { runtimeVersion, VERSION } from "../version.ts";
import type { CapabilityState, Profile } from "../profile.ts";

/**
 * What started a reconcile or an apply; `revert`: a confirm window lapsed and the host
 * goes back to the declaration it held before (src/run/confirm.ts).
 */
export type Trigger = "start" | "declaration" | "reconnect" | "drift" | "revert";

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
  /** Unchanged results left out to keep the message small. */
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
  held: { count: number; digest: string };
  /** When the next drift check runs. */
  nextDriftAt: string | null;
  /** Present only when the held set changed since it was last sent: [key, digest] pairs. */
  heldList?: [string, string][];
}

/** Results above this size are trimmed to the ones that are not "unchanged". */
const MAX_RESULTS_BYTES = 256 * 1024;

/** The report of an apply. */
export function applyMessage(node: string, report: ApplyReport, trigger: Trigger): ApplyMessage {
  let results = report.results;
  let omitted: number | undefined;
  if (JSON.stringify(results).length > MAX_RESULTS_BYTES) {
    results = results.filter((r) => r.outcome !== "unchanged");
    omitted = report.results.length - results.length;
  }
  return {
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
    ...(omitted ? { omitted } : {}),
    ...(report.error ? { error: report.error } : {}),
  };
}

/** The report of a refusal. */
export function refusalMessage(
  node: string,
  serial: number | undefined,
  reason: RefusalMessage["reason"],
  message: string,
  problems: Problem[],
): RefusalMessage {
  return {
    v: 1,
    kind: "refused",
    node,
    version: VERSION,
    at: new Date().toISOString(),
    serial: serial ?? null,
    reason,
    message,
    problems: problems.slice(0, 50),
  };
}

/** The held set as [key, digest] pairs, and its digest. */
export function heldSummary(store: Store): { list: [string, string][]; digest: string } {
  const list = [...store.heldIndex()]
    .sort(([ka, a], [kb, b]) => a.position - b.position || (ka < kb ? -1 : 1))
    .map(([key, h]): [string, string] => [key, h.digest]);
  // Synchronous on purpose (heartbeats are built in timers); the link loads node:crypto anyway.
  const digest = `sha256:${createHash("sha256").update(canonicalJson(list)).digest("hex")}`;
  return { list, digest };
}

/** Build a heartbeat; `withList` adds the held list. */
export function heartbeatMessage(
  node: string,
  store: Store,
  facts: { startedAt: number; serial: number | null; nextDriftAt: string | null },
  held: { list: [string, string][]; digest: string },
  withList: boolean,
): HeartbeatMessage {
  const last = store.lastApply();
  return {
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
    held: { count: held.list.length, digest: held.digest },
    nextDriftAt: facts.nextDriftAt,
    ...(withList ? { heldList: held.list } : {}),
  };
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
  /** What the host holds: [key, digest] pairs, in declaration order. */
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
