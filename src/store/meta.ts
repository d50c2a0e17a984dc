/**
 * The store's meta keys: one table of small values (who this node is, where its
 * link goes, what the link last accepted, the run status). Every writer and
 * reader names them from here.
 */

/** Store meta keys. */
export const META = {
  /** This node's id (the engine refuses a declaration addressed to another node). */
  node: "node_id",
  /** The brokers (JSON `[{url, pin}]`, token version 3). */
  brokers: "link_brokers",
  /** One broker's URL and pin: written by hosts before token version 3, still read. */
  url: "link_url",
  pin: "link_pin",
  ca: "link_ca",
  seedFile: "link_seed_file",
  publicKey: "link_public_key",
  enrolledAt: "link_enrolled_at",
  /** The control plane's signing public key, pinned by the token: declarations must verify. */
  signer: "link_signer",
  /** The serial of the last declaration accepted from the link (replays are refused). */
  serial: "link_serial",
  /** The digest of that declaration (the same one arriving again is not a replay). */
  digest: "link_digest",
  /** A JSON status record the run process keeps up to date (see src/run/run_status.ts). */
  runStatus: "run_status",
  /** Reports the outbox's bounds dropped that no delivered report has told of yet. */
  outboxDropped: "outbox_dropped",
  /** The hold a person put on the host (JSON, src/engine/hold.ts): nothing is applied. */
  hold: "hold",
  /** A rescue not yet answered by an apply (JSON, src/engine/hold.ts). */
  rescue: "rescue",
  /** The last rescue an apply answered (JSON), for `status`. */
  lastRescue: "rescue_last",
  /** Digest of the last inventory the broker acknowledged. */
  inventoryDigest: "inventory_digest",
  /** When that inventory was acknowledged (ISO). */
  inventorySentAt: "inventory_sent_at",
} as const;
