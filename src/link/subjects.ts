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
 * How declarations reach a node (DESIGN.md §7, §20): the declaration stream keeps the last
 * one per node and republishes each one it stores, once stored, on the node's push subject
 * (`mesh.push.<node>`, DECLARATION_REPUBLISH) with headers naming the stream, the stored
 * subject and its sequence (PUSH_HEADERS): the node's plain subscription there hears it.
 * Nothing is kept per node on the broker (no consumer): what is published while the node
 * is away is fetched once on each link-up, by the catch-up (`mesh.node.<node>.decl`: the
 * stream's direct get of the node's own subject, imported under its own subject), and
 * after a heartbeat whose acknowledgement says the stream holds a later declaration than
 * the node took, or after one that was not acknowledged (HeartbeatAck). Never polled.
 */
export const DECLARATION_REPUBLISH = {
  src: "mesh.decl.*",
  dest: "mesh.push.{{wildcard(1)}}",
} as const;

/**
 * The headers the declaration stream sets on what it republishes and on a direct get's
 * answer: a node takes from its push subject only what names the stream and its own
 * declaration subject (anything else there is a reply another node steered into it).
 */
export const PUSH_HEADERS = {
  stream: "Nats-Stream",
  subject: "Nats-Subject",
  sequence: "Nats-Sequence",
} as const;

/**
 * The control plane's answer to a heartbeat (the heartbeat is a request): `decl`, the
 * stream sequence of the last declaration stored for the node (0: none), when the control
 * plane knows it. A node that took less asks for it once (the catch-up).
 */
export interface HeartbeatAck {
  v: 1;
  decl?: number;
}

/** Every subject one node uses. */
export interface NodeSubjects {
  /** Declarations to the node (captured by DECLARATION_STREAM, last per subject). */
  declaration: string;
  /** Where the stream republishes them: the node subscribes here, and nowhere else for them. */
  push: string;
  /** The catch-up: a request (empty body) answered by the stream's direct get of `declaration`. */
  catchUp: string;
  /** Apply reports and refusals from the node. */
  report: string;
  /** Heartbeats from the node (requests: the control plane acknowledges them, HeartbeatAck). */
  heartbeat: string;
  /** The node's inventory (identity, profile, held resources, overlay key). */
  inventory: string;
  /** Where the node asks for parts of the object store (OBJECT_READS), every one. */
  objects: string;
  /** Everything the node may publish: every subject above that it sends on is below it. */
  own: string;
  /** The node's inbox prefix: replies to its requests arrive below it. */
  inboxPrefix: string;
}

/** The subjects of node `node` (a node id: safe as a NATS token). */
export function subjectsOf(node: string): NodeSubjects {
  return {
    declaration: `mesh.decl.${node}`,
    push: `mesh.push.${node}`,
    catchUp: `mesh.node.${node}.decl`,
    report: `mesh.node.${node}.report`,
    heartbeat: `mesh.node.${node}.heartbeat`,
    inventory: `mesh.node.${node}.inventory`,
    objects: `mesh.node.${node}.obj.>`,
    own: `mesh.node.${node}.>`,
    inboxPrefix: `_INBOX.${node}`,
  };
}

/**
 * The stream's direct get of node `node`'s last declaration (subject-in-the-name form,
 * empty body): what the node's catch-up is imported as; the control plane asks it itself.
 */
export function declarationGet(node: string): string {
  return `$JS.API.DIRECT.GET.${DECLARATION_STREAM}.mesh.decl.${node}`;
}

/** What a broker user may publish and subscribe to. */
export interface Permissions {
  publish: string[];
  subscribe: string[];
}

/**
 * What the broker grants an enrolled node (its user JWT's permissions: lab/mesh/operator.ts
 * mints it): publish below its own `mesh.node.<node>.` only (its report, heartbeat and
 * inventory, its catch-up, its reads of the object store: the control plane answers only
 * for the objects its declaration names); subscribe to its own push subject and its own
 * inbox (where every answer to what it asks arrives). Nothing else: no `$JS.API.>` (its
 * catch-up is imported under its own subject, so it neither names the stream nor reaches
 * the JetStream API), no wildcard across nodes. The one place that says what a node may
 * do: the control plane mints it, the tests hold the broker to it.
 */
export function nodePermissions(node: string): Permissions {
  const s = subjectsOf(node);
  return {
    publish: [s.own],
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
