/**
 * The subjects and permissions of the link (DESIGN.md §15), in one place so the
 * host and whatever runs the broker agree. The broker enforces them; the host's
 * code never relies on its own good behaviour for confinement.
 */

/** The JetStream stream holding the last declaration per node (direct get allowed). */
export const DECLARATION_STREAM = "MESH_DECL";

/**
 * The mesh's object store (DESIGN.md §19): one bucket per mesh (one broker here), in
 * the NATS object store's layout, so `nats object` tools read and write it too.
 */
export const CONTENT_BUCKET = "mesh";
/** The JetStream stream behind the bucket. */
export const CONTENT_STREAM = `OBJ_${CONTENT_BUCKET}`;

/** The subjects of the mesh's object store. */
export const CONTENT_SUBJECTS = {
  /** Direct get with a body (`{seq, next_by_subj}`): how a node reads an object's chunks. */
  directGet: `$JS.API.DIRECT.GET.${CONTENT_STREAM}`,
  /** Direct get of an object's description by name (subject in the name). */
  metaGet: `$JS.API.DIRECT.GET.${CONTENT_STREAM}.$O.${CONTENT_BUCKET}.M.*`,
  /** Where an object's description is kept (the name, base64url with padding). */
  meta: (name: string): string =>
    `$O.${CONTENT_BUCKET}.M.${new TextEncoder().encode(name).toBase64({ alphabet: "base64url" })}`,
  /** Where an object's chunks are kept. */
  chunks: (nuid: string): string => `$O.${CONTENT_BUCKET}.C.${nuid}`,
} as const;

/**
 * The header that names a report's message id: JetStream keeps one message per id
 * within the stream's duplicate window, so a report delivered twice counts once.
 */
export const MESSAGE_ID_HEADER = "Nats-Msg-Id";

/** Every subject one node uses. */
export interface NodeSubjects {
  /** Declarations to the node (captured by DECLARATION_STREAM, last per subject). */
  declaration: string;
  /** Apply reports and refusals from the node. */
  report: string;
  /** Heartbeats from the node. */
  heartbeat: string;
  /** The node's inventory (identity, profile, held resources, overlay key). */
  inventory: string;
  /** The node's inbox prefix: replies to its requests arrive below it. */
  inboxPrefix: string;
  /** Direct get of the node's last declaration (subject-in-the-name form, empty body). */
  directGet: string;
  /** Enrolment requests for this node (only the one-time join key may publish here). */
  enrol: string;
}

/** The subjects of node `node` (a node id: safe as a NATS token). */
export function subjectsOf(node: string): NodeSubjects {
  const declaration = `mesh.decl.${node}`;
  return {
    declaration,
    report: `mesh.node.${node}.report`,
    heartbeat: `mesh.node.${node}.heartbeat`,
    inventory: `mesh.node.${node}.inventory`,
    inboxPrefix: `_INBOX.${node}`,
    directGet: `$JS.API.DIRECT.GET.${DECLARATION_STREAM}.${declaration}`,
    enrol: `mesh.enrol.${node}`,
  };
}

/** What a broker user may publish and subscribe to. */
export interface Permissions {
  publish: string[];
  subscribe: string[];
}

/**
 * What the broker grants an enrolled node: publish its own report, heartbeat and
 * inventory, the direct get of its own declaration and the direct gets that read the
 * mesh's object store (reads only: no write, no delete); subscribe to its own
 * declaration subject and its own inbox (where JetStream's acknowledgements of its
 * reports and inventory arrive). Nothing else (no `$JS.API.>`, no wildcards across nodes).
 */
export function nodePermissions(node: string): Permissions {
  const s = subjectsOf(node);
  return {
    publish: [
      s.report,
      s.heartbeat,
      s.inventory,
      s.directGet,
      CONTENT_SUBJECTS.directGet,
      CONTENT_SUBJECTS.metaGet,
    ],
    subscribe: [s.declaration, `${s.inboxPrefix}.>`],
  };
}

/**
 * The inbox prefix of a one-time join key: its own, named by the key, never a
 * node's (a token holder must not hear replies meant for the node).
 */
export function joinInboxPrefix(joinPublicKey: string): string {
  return `_JOIN.${joinPublicKey}`;
}

/**
 * What the broker grants a one-time join key (public key `joinPublicKey`): ask
 * to enrol this node, and hear the answer on its own inbox.
 */
export function joinPermissions(node: string, joinPublicKey: string): Permissions {
  return {
    publish: [subjectsOf(node).enrol],
    subscribe: [`${joinInboxPrefix(joinPublicKey)}.>`],
  };
}
