/**
 * The subjects and permissions of the link (DESIGN.md §15), in one place so the
 * host and whatever runs the broker agree. The broker enforces them; the host's
 * code never relies on its own good behaviour for confinement.
 */

/** The JetStream stream holding the last declaration per node (direct get allowed). */
export const DECLARATION_STREAM = "MESH_DECL";

/**
 * The mesh's object store (DESIGN.md §19): one JetStream stream per mesh, keyed by
 * content. An object named by its SHA-256 (hex) `H` is a description on
 * `mesh.obj.H.meta` (`{v, size, chunks}`) and its bytes in chunks on `mesh.obj.H.0`,
 * `mesh.obj.H.1`, … (one message per subject, the last one kept). A node never reads
 * the stream itself: it asks for each part on its own subject (OBJECT_READS), and the
 * control plane answers with the stream's bytes once it checked that the node's
 * current declaration names the object (DESIGN.md §20).
 */
export const CONTENT_STREAM = "MESH_OBJ";

/** The subjects of the mesh's object store. */
export const CONTENT_SUBJECTS = {
  /** Every subject of the stream. */
  all: "mesh.obj.>",
  /** Where an object's description is kept. */
  meta: (sha256: string): string => `mesh.obj.${sha256}.meta`,
  /** Where an object's chunk `index` (0, 1, …) is kept. */
  chunk: (sha256: string, index: number): string => `mesh.obj.${sha256}.${index}`,
  /** The direct get of one subject of the stream (`meta` or a chunk), empty body. */
  get: (subject: string): string => `$JS.API.DIRECT.GET.${CONTENT_STREAM}.${subject}`,
} as const;

/**
 * How a node reads the object store: on its own subject, `mesh.node.<node>.obj.<sha256>.meta`
 * for an object's description and `mesh.node.<node>.obj.<sha256>.<i>` for its chunk `i`,
 * empty body. Only that node may publish there; the control plane answers (the object
 * store's answer: its bytes, or its status), after it checked that the node's current
 * declaration names the object, else 403 with why. No broker configuration follows what a
 * declaration names.
 */
export const OBJECT_READS = {
  /** Every node's reads (what the control plane serves). */
  all: "mesh.node.*.obj.>",
  /** The read of an object's description by `node`. */
  meta: (node: string, sha256: string): string => `mesh.node.${node}.obj.${sha256}.meta`,
  /** The read of an object's chunk `index` by `node`. */
  chunk: (node: string, sha256: string, index: number): string =>
    `mesh.node.${node}.obj.${sha256}.${index}`,
  /** Who reads which part, from a read's subject; undefined for anything else. */
  parse(subject: string): { node: string; sha256: string; part: "meta" | number } | undefined {
    const [m, n, node, obj, sha256, part, ...rest] = subject.split(".");
    if (m !== "mesh" || n !== "node" || obj !== "obj" || rest.length > 0) return undefined;
    if (!node || !SHA256_HEX.test(sha256 ?? "")) return undefined;
    if (part === "meta") return { node, sha256, part };
    return /^(0|[1-9]\d{0,8})$/.test(part ?? "") ? { node, sha256, part: Number(part) } : undefined;
  },
} as const;

/** A content digest as the object store names it (64 lowercase hex digits). */
const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * The objects a declaration names (every `contentSha256` of its resources: files, the
 * host's own tarball), sorted, each once: what the node it is addressed to may read.
 * Anything that is not a declaration's shape names nothing.
 */
export function contentDigestsOf(declaration: unknown): string[] {
  const resources = (declaration as { resources?: unknown } | null)?.resources;
  if (!Array.isArray(resources)) return [];
  const found = new Set<string>();
  for (const r of resources) {
    const sha = (r as { contentSha256?: unknown } | null)?.contentSha256;
    if (typeof sha === "string" && SHA256_HEX.test(sha)) found.add(sha);
  }
  return [...found].sort();
}

/**
 * What a node may send and what the broker keeps of it (DESIGN.md §18): the broker
 * enforces each (its account's `max_payload`, each stream's `max_msg_size`), and the
 * host keeps its own messages within them, so that it is never cut off for one.
 */
export const NODE_LIMITS = {
  /** The largest message a node may publish at all (its account's `max_payload`). */
  maxPayload: 1024 * 1024,
  /** The largest report (an apply, a refusal, a restart) its stream stores. */
  reportBytes: 64 * 1024,
  /** The largest heartbeat its stream stores (the held list is left out above it). */
  heartbeatBytes: 64 * 1024,
  /** The largest inventory its stream stores. */
  inventoryBytes: 1024 * 1024,
} as const;

/**
 * The header that names a report's message id: JetStream keeps one message per id
 * within the stream's duplicate window, so a report delivered twice counts once.
 */
export const MESSAGE_ID_HEADER = "Nats-Msg-Id";

/**
 * How declarations reach a node (DESIGN.md §7): a durable push consumer of
 * DECLARATION_STREAM per node, made by the control plane (never by the node), named
 * as the node, filtered to the node's declaration subject, delivering the last one
 * and every later one to the node's push subject. The broker delivers only while the
 * node's subscription is there (its interest reaches the consumer, through a site's
 * leaf too), keeps what it delivered until the node acknowledges it (`ack_wait`: a
 * delivery lost on a connection that was dying is delivered again), sends an idle
 * heartbeat when it has nothing to say (a silence the node can notice) and asks for
 * flow control. Nothing polls: an idle node receives only those heartbeats.
 */
export const DECLARATION_PUSH = {
  /** The consumer's idle heartbeat (ms): how often an idle node hears from it. */
  idleHeartbeatMs: 30_000,
  /** How long a delivery waits for the node's acknowledgement before it is sent again (ms). */
  ackWaitMs: 30_000,
} as const;

/**
 * Where the declaration consumers of site `site`'s nodes deliver, on the cluster: one
 * subject per node below the site's own prefix, `mesh.site.<site>.push.<node>` (the site's
 * leaf carries it to the node as its push subject). The site's account imports the
 * whole prefix once, when the site is made: nats-server 2.9.10 gives a leaf connection
 * no stream import added by a later reload (its subscriptions stay without the
 * exporting account's interest until the leaf connects again).
 */
export const SITE_PUSH = {
  /** Every node of the site. */
  all: (site: string): string => `mesh.site.${site}.push.*`,
  /** Node `node` of the site. */
  node: (site: string, node: string): string => `mesh.site.${site}.push.${node}`,
} as const;

/**
 * The configuration of node `node`'s declaration consumer (`$JS.API.CONSUMER.DURABLE.
 * CREATE.MESH_DECL.<node>`), made by the control plane. It delivers to the node's push
 * subject, or to `deliverSubject` (a site's node: SITE_PUSH). `idleHeartbeatMs` and
 * `ackWaitMs` may be shortened (tests).
 */
export function declarationConsumer(
  node: string,
  {
    idleHeartbeatMs = DECLARATION_PUSH.idleHeartbeatMs,
    ackWaitMs = DECLARATION_PUSH.ackWaitMs,
    deliverSubject,
  }: { idleHeartbeatMs?: number; ackWaitMs?: number; deliverSubject?: string } = {},
): Record<string, unknown> {
  const s = subjectsOf(node);
  return {
    durable_name: s.consumer,
    description: `declarations to node ${node}`,
    deliver_subject: deliverSubject ?? s.push,
    filter_subject: s.declaration,
    deliver_policy: "last_per_subject",
    ack_policy: "explicit",
    ack_wait: ackWaitMs * 1e6,
    max_deliver: -1,
    idle_heartbeat: idleHeartbeatMs * 1e6,
    flow_control: true,
    replay_policy: "instant",
  };
}

/** Every subject one node uses. */
export interface NodeSubjects {
  /** Declarations to the node (captured by DECLARATION_STREAM, last per subject). */
  declaration: string;
  /** The node's declaration consumer (DECLARATION_PUSH), named as the node. */
  consumer: string;
  /** Where that consumer delivers: the node subscribes here, and nowhere else for declarations. */
  push: string;
  /** The acknowledgements of that consumer's deliveries (the reply subject of each). */
  ack: string;
  /** That consumer's flow control answers (the reply subject of its requests). */
  flowControl: string;
  /** Apply reports and refusals from the node. */
  report: string;
  /** Heartbeats from the node. */
  heartbeat: string;
  /** The node's inventory (identity, profile, held resources, overlay key). */
  inventory: string;
  /** Where the node asks for parts of the object store (OBJECT_READS), every one. */
  objects: string;
  /** The node's inbox prefix: replies to its requests arrive below it. */
  inboxPrefix: string;
  /** Direct get of the node's last declaration (subject-in-the-name form, empty body). */
  directGet: string;
}

/** The subjects of node `node` (a node id: safe as a NATS token). */
export function subjectsOf(node: string): NodeSubjects {
  const declaration = `mesh.decl.${node}`;
  return {
    declaration,
    consumer: node,
    push: `mesh.push.${node}`,
    ack: `$JS.ACK.${DECLARATION_STREAM}.${node}.>`,
    flowControl: `$JS.FC.${DECLARATION_STREAM}.${node}.>`,
    report: `mesh.node.${node}.report`,
    heartbeat: `mesh.node.${node}.heartbeat`,
    inventory: `mesh.node.${node}.inventory`,
    objects: `mesh.node.${node}.obj.>`,
    inboxPrefix: `_INBOX.${node}`,
    directGet: `$JS.API.DIRECT.GET.${DECLARATION_STREAM}.${declaration}`,
  };
}

/** What a broker user may publish and subscribe to. */
export interface Permissions {
  publish: string[];
  subscribe: string[];
}

/**
 * What the broker grants an enrolled node: publish its own report, heartbeat and
 * inventory, its reads of the object store (OBJECT_READS: answered only for the objects
 * its declaration names, by the control plane), the direct get of its own declaration
 * (once per connection, the catch-up), the acknowledgements and flow control answers of
 * its own declaration consumer; subscribe to its own push subject (where its consumer
 * delivers) and its own inbox (where JetStream's acknowledgements of its reports and
 * inventory arrive). Nothing else: no `$JS.API.>` (it cannot make, read or delete a
 * consumer, its own included: the control plane makes it, so the node never chooses
 * where it delivers; nor read the object store's stream), no wildcards across nodes.
 * The one place that says what a node may do: the control plane renders it, the tests
 * hold the broker to it.
 */
export function nodePermissions(node: string): Permissions {
  const s = subjectsOf(node);
  return {
    publish: [
      s.report,
      s.heartbeat,
      s.inventory,
      s.objects,
      s.directGet,
      s.ack,
      s.flowControl,
    ],
    subscribe: [s.push, `${s.inboxPrefix}.>`],
  };
}

/**
 * Where the holder of a one-time join key (public key `joinPublicKey`) asks to
 * enrol `node`: the key is a token of the subject, and the broker lets that key
 * publish there and nowhere else, so the control plane knows which token is being
 * spent from the subject the broker accepted, never from what the request says.
 */
export function enrolSubject(node: string, joinPublicKey: string): string {
  return `mesh.enrol.${node}.${joinPublicKey}`;
}

/** Every enrolment subject (the control plane's subscription, the service it exports). */
export const ENROL_SUBJECTS = "mesh.enrol.*.*";

/**
 * The inbox prefix of a one-time join key: its own, named by the key, never a
 * node's (a token holder must not hear replies meant for the node).
 */
export function joinInboxPrefix(joinPublicKey: string): string {
  return `_JOIN.${joinPublicKey}`;
}

/**
 * What the broker grants a one-time join key (public key `joinPublicKey`): ask
 * to enrol this node on its own enrolment subject, and hear the answer on its own inbox.
 */
export function joinPermissions(node: string, joinPublicKey: string): Permissions {
  return {
    publish: [enrolSubject(node, joinPublicKey)],
    subscribe: [`${joinInboxPrefix(joinPublicKey)}.>`],
  };
}
