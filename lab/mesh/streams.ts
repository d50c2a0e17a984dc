/**
 * The JetStream streams of the stand-in control plane (DESIGN.md §18, §19): what each
 * keeps, how much of it one node may fill, and the storage each reserves on the broker.
 */
import {
  CONTENT_STREAM,
  CONTENT_SUBJECTS,
  DECLARATION_REPUBLISH,
  DECLARATION_STREAM,
  NODE_LIMITS,
} from "../../src/link/subjects.ts";

const DAY_NS = 24 * 3600 * 1e9;
const WEEK_NS = 7 * DAY_NS;
const MiB = 1024 * 1024;

/**
 * What a stored message takes beyond what `max_msg_size` counts (headers and body):
 * its subject and the file store's record (nats-server 2.9: 22 bytes + subject + 8).
 */
const RECORD_ROOM = 512;

/** Reports the broker keeps per node (its own oldest go first). */
export const REPORTS_KEPT = 100;
/** The largest declaration the stand-in publishes (nats-server's default max_payload). */
export const DECLARATION_MAX_BYTES = 1 * MiB;
/** The object store's reservation unless mesh.json says otherwise (`objectStoreBytes`). */
export const OBJECT_STORE_BYTES = 512 * MiB;
/** Chunks of an object in the object store. */
export const CHUNK = 128 * 1024;

/** One stream of the stand-in: what a node may have kept there, per subject. */
export interface StreamPlan {
  subjects: string[];
  /** Messages kept per subject (per node: a node has one subject per stream). */
  max_msgs_per_subject: number;
  max_msg_size: number;
  /** `new`: a full stream refuses (never drops another node's); `old`: drops its oldest. */
  discard: "new" | "old";
  no_ack: boolean;
  duplicate_window?: number;
  /** 0: kept until replaced or deleted. */
  max_age: number;
  /** Where each stored message is sent again (the declarations: to each node's push subject). */
  republish?: { src: string; dest: string };
}

/**
 * Streams the stand-in keeps, each bounded per node (DESIGN.md §18): the last
 * declaration per node, reports (the last REPORTS_KEPT), the last heartbeat and the
 * last inventory. Every message is at most `max_msg_size` (a larger one is refused,
 * and the host keeps its own within NODE_LIMITS), every node's subject holds at most
 * `max_msgs_per_subject` (a node's next report replaces its own oldest), and each
 * stream's `max_bytes` is that share times the nodes with an account, reserved on the
 * broker when the stream is made or grows: one node can fill only its own share, and
 * nothing a node sends can take the storage the declarations need. Declarations never
 * expire by age (a node reinstalled after a month still gets its last one); reports,
 * heartbeats and inventories after a week. Reports and inventories are acknowledged
 * (the node keeps a report in its outbox until then) and deduplicated by their
 * `Nats-Msg-Id` within a day: nodes reach them through a service import, whose reply
 * subject is the broker's own mapping of the node's inbox. The heartbeat stream never
 * acknowledges (`no_ack`): the control plane does (its answer says where the node's
 * declaration stands).
 */
export const STREAMS: Record<string, StreamPlan> = {
  [DECLARATION_STREAM]: {
    subjects: ["mesh.decl.*"],
    max_msgs_per_subject: 1,
    max_msg_size: DECLARATION_MAX_BYTES,
    discard: "new",
    no_ack: false,
    max_age: 0,
    // Each declaration stored goes on to its node's push subject, with the stream's
    // headers (src/link/subjects.ts): the node's plain subscription hears it; no consumer.
    republish: DECLARATION_REPUBLISH,
  },
  MESH_REPORT: {
    subjects: ["mesh.node.*.report"],
    max_msgs_per_subject: REPORTS_KEPT,
    max_msg_size: NODE_LIMITS.reportBytes,
    discard: "old",
    no_ack: false,
    duplicate_window: DAY_NS,
    max_age: WEEK_NS,
  },
  MESH_BEAT: {
    subjects: ["mesh.node.*.heartbeat"],
    max_msgs_per_subject: 1,
    max_msg_size: NODE_LIMITS.heartbeatBytes,
    discard: "old",
    no_ack: true,
    max_age: WEEK_NS,
  },
  MESH_INV: {
    subjects: ["mesh.node.*.inventory"],
    max_msgs_per_subject: 1,
    max_msg_size: NODE_LIMITS.inventoryBytes,
    discard: "old",
    no_ack: false,
    duplicate_window: DAY_NS,
    max_age: WEEK_NS,
  },
};

/** What one node may have kept in a stream at most (bytes): its share of `max_bytes`. */
export function nodeShare(plan: StreamPlan): number {
  return plan.max_msgs_per_subject * (plan.max_msg_size + RECORD_ROOM);
}

/** The configuration of stream `name` for a mesh of `nodes` nodes, `replicas` copies. */
export function streamConfig(
  name: string,
  nodes: number,
  replicas: number,
): Record<string, unknown> {
  const {
    subjects,
    max_msgs_per_subject,
    max_msg_size,
    discard,
    no_ack,
    duplicate_window,
    max_age,
    republish,
  } = STREAMS[name];
  return {
    name,
    subjects,
    storage: "file",
    num_replicas: replicas,
    allow_direct: true,
    max_msgs_per_subject,
    max_msg_size,
    discard,
    no_ack,
    ...(duplicate_window ? { duplicate_window } : {}),
    ...(republish ? { republish } : {}),
    max_age,
    max_bytes: Math.max(1, nodes) * nodeShare(STREAMS[name]),
  };
}

/**
 * The mesh's object store (DESIGN.md §19, src/link/subjects.ts): written by the
 * control plane only, read by nodes by direct get (each only what its declaration
 * names). Its reservation is fixed (`objectStoreBytes` in mesh.json, else
 * OBJECT_STORE_BYTES): a put beyond it is refused, never a declaration.
 */
export function objectStoreConfig(bytes: number, replicas: number): Record<string, unknown> {
  return {
    name: CONTENT_STREAM,
    subjects: [CONTENT_SUBJECTS.all],
    storage: "file",
    num_replicas: replicas,
    allow_direct: true,
    max_msgs_per_subject: 1,
    max_msg_size: CHUNK + 4096,
    discard: "new",
    max_bytes: bytes,
  };
}
