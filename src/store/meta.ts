/**
 * The store's meta keys: one table of small values (who this node is, where its
 * link goes, what the link last accepted, the run status). Every writer and
 * reader names them from here.
 */

/** Store meta keys. */
export const META = {
  /** This node's id (the engine refuses a declaration addressed to another node). */
  node: "node_id",
  /** The brokers (JSON `[{url}]`; `[{url, pin}]` for a node enrolled with a version 3 token). */
  brokers: "link_brokers",
  /** One broker's URL and pin: written by hosts before token version 3, still read. */
  url: "link_url",
  pin: "link_pin",
  /** The token's CA (PEM, public). */
  ca: "link_ca",
  /**
   * The last trust update taken (JSON `{serial, issued, cas: [{pem, until?}]}`,
   * src/link/trust.ts); absent: the token's CA alone.
   */
  trust: "link_trust",
  seedFile: "link_seed_file",
  /**
   * The node's user JWT file (beside the seed; what the broker lets this key do). Absent:
   * enrolled before the broker ran in operator mode, and refused until enrolled again.
   */
  jwtFile: "link_jwt_file",
  publicKey: "link_public_key",
  enrolledAt: "link_enrolled_at",
  /**
   * The control plane's signing public key, pinned by the token and moved on by a
   * signed key rotation: declarations must verify against it. The last serial
   * accepted per (signing key, node) is in the table `link_serials`.
   */
  signer: "link_signer",
  /** The last rotation followed: JSON `{from, at}` (the key pinned before, and when). */
  signerRotated: "link_signer_rotated",
  /**
   * Where the declaration accepted last was stored in the broker's declaration stream:
   * JSON `{node, seq}`. An older serial stored before it is a replica behind the
   * others (ignored), one stored after it an old declaration published again (refused
   * and reported as a replay).
   */
  declarationSeq: "link_declaration_seq",
  /**
   * A declaration admitted from the link whose apply has not started: JSON
   * (src/store/store.ts `AdmittedRecord`), intake's one record (src/run/intake.ts).
   */
  admitted: "link_admitted",
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
  /**
   * A network change pushed over the link and not confirmed yet: JSON (src/store/confirm_records.ts),
   * with the declaration to go back to when the confirm window lapses (src/run/confirm.ts).
   */
  confirmPending: "confirm_pending",
  /** The last serial refused because its window lapsed unconfirmed: JSON (src/store/confirm_records.ts). */
  confirmRefused: "confirm_refused",
  /**
   * Applies since the last one that read every file back in full (host.json
   * `fullReadBackEvery`; the others trust a file's identity: src/engine/apply.ts).
   */
  readBackPasses: "read_back_passes",
} as const;
