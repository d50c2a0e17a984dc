/**
 * A staged rollout of a host version (the seeds: "a host rollout is staged — a few
 * nodes, wait for heartbeats, continue or stop on silence"), as the stand-in control
 * plane does it: each node's last declaration is published again with the host's own
 * package at the new version, to a canary set first and then batch by batch; a batch
 * is done when each of its nodes heartbeats the new running version. The rollout stops,
 * naming the nodes and why, when a node of the batch goes silent, runs the old version
 * again after its launcher rolled the new one back (its apply of the rollout's serial,
 * made by a process started after the publication, left it on the old version), or
 * reports that apply failed; the nodes of later batches are never declared the new
 * version. Local rollback stays each node's own (its launcher); this is the mesh's half
 * of the watchdog, the one that tells a broken release from a broken machine.
 */
import type { ControlPlane } from "./control.ts";

/** The host's own package, as a declaration names it. */
export const HOST_PACKAGE = "nox-mesh-host";

/** What to roll out, and how. */
export interface HostRollout {
  /** The version to declare: the package manager's (`0.2.0-1` pacman, `0.2.0-r1` apk) or the tarball's. */
  version: string;
  /** The running version the nodes heartbeat once they run it (default: `version` without its build part). */
  running?: string;
  /** The tarball's digest and size in the object store (tarball nodes). */
  contentSha256?: string;
  size?: number;
  /** `"full"`: the package is installed by a full upgrade of the machine (Arch, Alpine). */
  upgrade?: "full";
  /** Nodes in the first batch (default 1). */
  canary?: number;
  /** Nodes in each later batch (default 2 × canary). */
  batch?: number;
  /** A node not heard from for this long (ms) is silent (default 120 s). */
  silenceMs?: number;
  /** How long one batch may take (ms, default 600 s). */
  batchTimeoutMs?: number;
  /** How often the heartbeats are looked at (ms, default 1 s). */
  pollMs?: number;
}

/** Why a node stopped the rollout. */
export interface Stopper {
  node: string;
  why: "silent" | "rolled-back" | "failed" | "timeout";
  detail: string;
}

/** One batch as it went. */
export interface BatchRow {
  /** "canary", then "batch 2", "batch 3", … */
  name: string;
  nodes: string[];
  /** The serial each node was declared. */
  serials: Record<string, number>;
  publishedAt: string;
  /** When its last node heartbeat the new version (done), or when it stopped. */
  endedAt: string;
  outcome: "upgraded" | "stopped";
  /** Per node: the version it heartbeats at the end, and when it first ran the new one. */
  nodeState: Record<string, { version: string | null; upgradedAt?: string }>;
}

/** The rollout's outcome. */
export interface HostRolloutResult {
  version: string;
  running: string;
  outcome: "completed" | "stopped";
  batches: BatchRow[];
  /** The nodes that stopped it, and why (empty when completed). */
  stoppedBy: Stopper[];
  /** Nodes never declared the new version (the batches after the one that stopped). */
  untouched: string[];
}

/** The upstream version of a package version: pacman's `-pkgrel` and apk's `-rN` dropped. */
export function runningVersionOf(version: string): string {
  return version.replace(/-r?\d+$/, "");
}

/** `nodes` in batches: the first `canary`, then `batch` at a time. */
export function batchesOf(nodes: readonly string[], canary: number, batch: number): string[][] {
  if (!(canary >= 1 && batch >= 1)) throw new Error("canary and batch must be at least 1");
  const out = [nodes.slice(0, canary)];
  for (let at = canary; at < nodes.length; at += batch) out.push(nodes.slice(at, at + batch));
  return out.filter((b) => b.length > 0);
}

/**
 * `declaration` (a node's last, or none) with the host's own package at the rollout's
 * version: the package resource named `nox-mesh-host` replaced (its id kept), or added
 * last. Its serial is dropped: the control plane gives the next one.
 */
export function withHostVersion(
  declaration: Record<string, unknown> | undefined,
  rollout: HostRollout,
): Record<string, unknown> {
  const base = declaration ?? { version: 1, resources: [] };
  const resources = Array.isArray(base.resources) ? [...base.resources] : [];
  const at = resources.findIndex((r) =>
    typeof r === "object" && r !== null && (r as Record<string, unknown>).type === "package" &&
    (r as Record<string, unknown>).name === HOST_PACKAGE
  );
  const id = at >= 0 ? String((resources[at] as Record<string, unknown>).id) : "host";
  const pkg: Record<string, unknown> = {
    type: "package",
    id,
    name: HOST_PACKAGE,
    version: rollout.version,
    ...(rollout.upgrade ? { upgrade: rollout.upgrade } : {}),
    ...(rollout.contentSha256 ? { contentSha256: rollout.contentSha256, size: rollout.size } : {}),
  };
  if (at >= 0) resources[at] = pkg;
  else resources.push(pkg);
  const { serial: _serial, ...rest } = base;
  return { ...rest, resources };
}

/** A heartbeat as the rollout reads it. */
interface Beat {
  version?: string;
  at?: string;
  uptimeS?: number;
  serial?: number | null;
  last?: { serial: number | null; outcome: string; at: string } | null;
}

/** When the process that sent `beat` started, by the node's clock (ms), or NaN. */
export function processStart(beat: Beat): number {
  return Date.parse(String(beat.at)) - 1000 * Number(beat.uptimeS);
}

/**
 * What one heartbeat says of a node of a batch declared `serial` at `publishedAt`.
 * `restarted`: its process started after the rollout's declaration (by its own clock,
 * later than the publication or than the process of the first heartbeat seen since).
 */
export function judge(
  beat: Beat | undefined,
  running: string,
  serial: number,
  restarted: boolean,
): "upgraded" | "rolled-back" | "failed" | "waiting" {
  if (!beat) return "waiting";
  if (beat.version === running && (beat.serial ?? 0) >= serial) return "upgraded";
  const last = beat.last;
  // An apply of the rollout's serial ran to its end (an interrupted one is done again).
  const appliedOurs = last != null && (last.serial ?? 0) >= serial &&
    (last.outcome === "converged" || last.outcome === "failed");
  // The apply that installs (or stages) the new version ends with the process that ran
  // it: another version running in a process started since did not stay (its launcher
  // rolled the new one back, or refused what was staged).
  if (appliedOurs && restarted) return "rolled-back";
  if (appliedOurs && last.outcome === "failed") return "failed";
  return "waiting";
}

/**
 * Roll `rollout.version` out to `nodes` in batches (the first `canary` nodes, then
 * `batch` at a time), each published to once its batch starts and watched until every
 * node of it heartbeats the new running version. Stops at the first batch where a node
 * went silent, was rolled back, failed its apply or ran out of time.
 */
export async function rolloutHost(
  control: ControlPlane,
  nodes: string[],
  rollout: HostRollout,
  log: (line: string) => void = () => {},
): Promise<HostRolloutResult> {
  const running = rollout.running ?? runningVersionOf(rollout.version);
  const canary = rollout.canary ?? 1;
  const silenceMs = rollout.silenceMs ?? 120_000;
  const batchTimeoutMs = rollout.batchTimeoutMs ?? 600_000;
  const pollMs = rollout.pollMs ?? 1000;
  const batches = batchesOf(nodes, canary, rollout.batch ?? 2 * canary);
  const result: HostRolloutResult = {
    version: rollout.version,
    running,
    outcome: "completed",
    batches: [],
    stoppedBy: [],
    untouched: [],
  };
  for (const [index, group] of batches.entries()) {
    const name = index === 0 ? "canary" : `batch ${index + 1}`;
    const serials: Record<string, number> = {};
    const publishedAt = Date.now();
    for (const node of group) {
      const last = await control.lastDeclaration(node);
      let declaration: Record<string, unknown> | undefined;
      try {
        declaration = last ? JSON.parse(last.body) : undefined;
      } catch {
        throw new Error(`${node}'s last declaration is not JSON: cannot add the host's package`);
      }
      const { serial } = await control.declare(node, withHostVersion(declaration, rollout));
      serials[node] = serial!;
    }
    log(`${name}: declared ${HOST_PACKAGE} ${rollout.version} to ${group.join(", ")}`);
    const row: BatchRow = {
      name,
      nodes: group,
      serials,
      publishedAt: new Date(publishedAt).toISOString(),
      endedAt: "",
      outcome: "upgraded",
      nodeState: Object.fromEntries(group.map((n) => [n, { version: null }])),
    };
    result.batches.push(row);
    // When each node was last heard: a heartbeat with a new `at`, as this control plane
    // saw it (its own clock: a node's clock may be wrong). The batch starts heard.
    const heard = new Map<string, { at: string; seen: number }>();
    // The process start of the first heartbeat of each node seen since the publication.
    const firstStart = new Map<string, number>();
    const pending = new Set(group);
    const stoppers: Stopper[] = [];
    const deadline = publishedAt + batchTimeoutMs;
    while (pending.size > 0 && stoppers.length === 0) {
      for (const node of [...pending]) {
        const beat = await control.lastHeartbeat(node).catch(() => undefined) as Beat | undefined;
        const now = Date.now();
        if (beat?.at && heard.get(node)?.at !== beat.at) {
          heard.set(node, { at: beat.at, seen: now });
        }
        row.nodeState[node].version = beat?.version ?? null;
        const started = beat ? processStart(beat) : NaN;
        if (!firstStart.has(node) && !Number.isNaN(started)) firstStart.set(node, started);
        const restarted = started > publishedAt || started > firstStart.get(node)! + 2000;
        const verdict = judge(beat, running, serials[node], restarted);
        if (verdict === "upgraded") {
          row.nodeState[node].upgradedAt = new Date(now).toISOString();
          pending.delete(node);
          log(`${name}: ${node} runs ${running}`);
          continue;
        }
        if (verdict === "rolled-back") {
          stoppers.push({
            node,
            why: "rolled-back",
            detail: `runs ${beat!.version} again: started at ${
              new Date(started).toISOString()
            }, after the declaration of ${running}, and applied serial ${beat!.last!.serial} (${
              beat!.last!.outcome
            }) without it (its launcher rolled ${running} back)`,
          });
          continue;
        }
        if (verdict === "failed") {
          stoppers.push({
            node,
            why: "failed",
            detail: `its apply of serial ${beat!.last!.serial} failed${await whyFailed(
              control,
              node,
              beat!.last!.serial,
            )}; it runs ${beat!.version}`,
          });
          continue;
        }
        const lastHeard = heard.get(node)?.seen ?? publishedAt;
        const since = Math.max(lastHeard, publishedAt);
        if (now - since > silenceMs) {
          stoppers.push({
            node,
            why: "silent",
            detail: `no heartbeat for ${Math.round((now - since) / 1000)} s (last ${
              beat?.at ?? "never"
            }, running ${beat?.version ?? "unknown"})`,
          });
        } else if (now > deadline) {
          stoppers.push({
            node,
            why: "timeout",
            detail: `still runs ${beat?.version ?? "unknown"} ${
              Math.round(batchTimeoutMs / 1000)
            } s after the declaration`,
          });
        }
      }
      if (pending.size > 0 && stoppers.length === 0) {
        await new Promise((resolve) => setTimeout(resolve, pollMs));
      }
    }
    row.endedAt = new Date().toISOString();
    if (stoppers.length > 0) {
      row.outcome = "stopped";
      result.outcome = "stopped";
      result.stoppedBy = stoppers;
      result.untouched = batches.slice(index + 1).flat();
      log(
        `${name}: stopped: ${stoppers.map((s) => `${s.node} ${s.why} (${s.detail})`).join("; ")}` +
          (result.untouched.length ? `; not declared: ${result.untouched.join(", ")}` : ""),
      );
      return result;
    }
    log(`${name}: every node runs ${running}`);
  }
  return result;
}

/**
 * What `node`'s report of its apply of `serial` says failed (": file f: why; …"), or
 * "" when no such report can be read: the verdict stands on the heartbeat alone.
 */
async function whyFailed(
  control: ControlPlane,
  node: string,
  serial: number | null,
): Promise<string> {
  const reports = await control.reports(node).catch(() => []);
  const report = reports.findLast((r) => r.kind === "apply" && r.serial === serial);
  if (!report) return "";
  const results = (report.results ?? []) as {
    type: string;
    id: string;
    outcome: string;
    detail?: string;
  }[];
  const failed = results.filter((r) => r.outcome === "failed")
    .map((r) => `${r.type} ${r.id}: ${r.detail ?? "no detail"}`);
  // The report's error repeats its failed resources; it is all there is without them.
  if (failed.length === 0 && typeof report.error === "string") failed.push(report.error);
  return failed.length ? `: ${failed.join("; ")}` : "";
}
