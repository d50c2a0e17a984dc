/**
 * The stand-in control plane's fleet verbs (lab scenarios fleet, broker-failover,
 * site; `deno task bench:fleet`): tokens for many nodes at once, a rollout that
 * publishes one declaration per node and waits until every node reported it
 * applied, the per-node report count, and where the cluster keeps the streams.
 */
import type { ControlPlane } from "./control.ts";
import { STREAMS } from "./streams.ts";

/** One node's part of a rollout: when its declaration was published and applied. */
export interface RolloutRow {
  node: string;
  serial: number;
  /** Epoch ms before the publish request. */
  publishedAt: number;
  /** Epoch ms the node made its apply report (its `at`), when it arrived. */
  appliedAt?: number;
  outcome?: string;
}

/**
 * Publishes `template` (a declaration's JSON text; every `{{node}}` replaced by the
 * node's name) to each node with serial `serial`, then waits (≤ `timeoutMs`) until
 * each node's apply report of that serial, made after its publication, is kept by the broker
 * (one made before is an earlier declaration's of the same serial: not this one's), or its
 * refusal of it (the outcome then says `refused: <reason>`). Returns a row per node.
 * `pause`: after that many publications, say so and wait (a scenario acts meanwhile).
 */
export async function rollout(
  control: ControlPlane,
  nodes: string[],
  template: string,
  serial: number,
  timeoutMs: number,
  log: (line: string) => void = () => {},
  pause?: { after: number; ms: number },
): Promise<RolloutRow[]> {
  const rows: RolloutRow[] = [];
  for (const node of nodes) {
    if (pause && rows.length === pause.after) {
      // A scenario acts here (kills a server) while half the fleet has its declaration.
      log(`paused after ${rows.length} of ${nodes.length}`);
      await new Promise((resolve) => setTimeout(resolve, pause.ms));
    }
    const declaration = JSON.parse(template.replaceAll("{{node}}", node));
    const publishedAt = Date.now();
    await control.declare(node, declaration, { serial });
    rows.push({ node, serial, publishedAt });
  }
  log(`published serial ${serial} to ${nodes.length} nodes`);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const row of rows.filter((r) => r.appliedAt === undefined)) {
      const found = (await control.reports(row.node).catch(() => [])).find((r) =>
        (r.kind === "apply" || r.kind === "refused") && r.serial === serial &&
        Date.parse(String(r.at)) >= row.publishedAt
      );
      if (found?.kind === "refused") {
        row.appliedAt = Date.parse(String(found.at));
        row.outcome = `refused: ${found.reason}`;
      } else if (found) {
        row.appliedAt = Date.parse(String(found.at));
        row.outcome = String(found.outcome);
      }
    }
    const missing = rows.filter((r) => r.appliedAt === undefined).length;
    if (missing === 0 || Date.now() > deadline) return rows;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** What the broker keeps of one node's apply reports. */
export interface ReportTally {
  node: string;
  /** The apply reports, in stream order: serial, what started it, outcome. */
  applies: { serial: number | null; trigger: string; outcome: string }[];
  /** Reports kept under a message id seen before (should be 0: deduplicated). */
  duplicateIds: number;
  /** Reports without a message id. */
  withoutId: number;
  /** Whether MESH_BEAT holds a heartbeat of the node. */
  heartbeat: boolean;
}

/** Tallies each node's apply reports as the broker keeps them. */
export async function tallyReports(control: ControlPlane, nodes: string[]): Promise<ReportTally[]> {
  const out: ReportTally[] = [];
  for (const node of nodes) {
    const records = (await control.reportRecords(node)).filter((r) => r.body.kind === "apply");
    const ids = records.map((r) => r.msgId).filter((id): id is string => id !== null);
    out.push({
      node,
      applies: records.map((r) => ({
        serial: r.body.serial as number | null,
        trigger: String(r.body.trigger),
        outcome: String(r.body.outcome),
      })),
      duplicateIds: ids.length - new Set(ids).size,
      withoutId: records.length - ids.length,
      heartbeat: (await control.lastHeartbeat(node)) !== undefined,
    });
  }
  return out;
}

/** Where the cluster keeps one stream: its leader and each replica's state. */
export interface StreamPlacement {
  stream: string;
  leader?: string;
  replicas: { name: string; current: boolean; lag?: number }[];
  messages: number;
}

/** Each stream's leader and replicas, as JetStream reports them. */
export async function placement(control: ControlPlane): Promise<StreamPlacement[]> {
  const out: StreamPlacement[] = [];
  for (const stream of Object.keys(STREAMS)) {
    const reply = await control.nc.request(`$JS.API.STREAM.INFO.${stream}`, "", {
      timeout: 10_000,
    });
    const info = JSON.parse(reply.string()) as {
      error?: unknown;
      state?: { messages: number };
      cluster?: { leader?: string; replicas?: { name: string; current: boolean; lag?: number }[] };
    };
    if (info.error) throw new Error(`stream ${stream}: ${JSON.stringify(info.error)}`);
    out.push({
      stream,
      leader: info.cluster?.leader,
      replicas: info.cluster?.replicas ?? [],
      messages: info.state?.messages ?? 0,
    });
  }
  return out;
}

/**
 * Asks the leader of `stream` to step down; the cluster elects another of its
 * replicas (which one is JetStream's choice). Resolves when the request is taken.
 */
export async function stepDown(control: ControlPlane, stream: string): Promise<void> {
  const reply = await control.nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, "", {
    timeout: 10_000,
  });
  const answer = JSON.parse(reply.string()) as { success?: boolean; error?: unknown };
  if (!answer.success) {
    throw new Error(`stream ${stream}: the leader did not step down: ${JSON.stringify(answer)}`);
  }
}
