/**
 * The store's schema, as an ordered list of migrations. The schema version is
 * SQLite's user_version: the number of migrations applied. Append only: never
 * edit a migration that has shipped.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: the first schema.
  `
  CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
  ) STRICT;

  -- The current declaration: the one the host holds the machine to.
  CREATE TABLE declaration (
    slot        INTEGER PRIMARY KEY CHECK (slot = 1),
    source      TEXT NOT NULL,   -- link | file | bundle
    origin      TEXT NOT NULL,   -- a file name, "link", the bundle's path
    node        TEXT,
    serial      INTEGER,
    digest      TEXT NOT NULL,
    body        TEXT NOT NULL,   -- canonical JSON
    accepted_at TEXT NOT NULL
  ) STRICT;

  -- What the host holds: recorded only after a resource's read-back passed.
  CREATE TABLE held (
    key        TEXT PRIMARY KEY, -- what it manages, e.g. path:/etc/x, package:wireguard-tools
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    position   INTEGER NOT NULL, -- index in the declaration it was applied from
    digest     TEXT NOT NULL,    -- of the canonical resource
    spec       TEXT NOT NULL,    -- the resource, canonical JSON
    created    INTEGER NOT NULL, -- 1 when the host created the thing (it may then remove it)
    applied_at TEXT NOT NULL,
    apply_id   INTEGER NOT NULL
  ) STRICT;

  -- "About to create": written before a create, so a crash between the create
  -- and its record does not lose the fact that the host made it. Never read
  -- as "applied".
  CREATE TABLE intents (
    key  TEXT PRIMARY KEY,
    id   TEXT NOT NULL,
    type TEXT NOT NULL,
    spec TEXT NOT NULL,
    at   TEXT NOT NULL
  ) STRICT;

  CREATE TABLE applies (
    id         INTEGER PRIMARY KEY,
    source     TEXT NOT NULL,
    origin     TEXT NOT NULL,
    serial     INTEGER,
    digest     TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at   TEXT,
    outcome    TEXT NOT NULL,    -- running | converged | failed | interrupted
    changed    INTEGER NOT NULL DEFAULT 0,
    unchanged  INTEGER NOT NULL DEFAULT 0,
    removed    INTEGER NOT NULL DEFAULT 0,
    failed     INTEGER NOT NULL DEFAULT 0,
    error      TEXT
  ) STRICT;

  CREATE TABLE results (
    apply_id    INTEGER NOT NULL REFERENCES applies (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    resource_id TEXT NOT NULL,
    type        TEXT NOT NULL,
    key         TEXT NOT NULL,
    outcome     TEXT NOT NULL,   -- changed | unchanged | removed | forgotten | failed | skipped
    detail      TEXT,
    PRIMARY KEY (apply_id, seq)
  ) STRICT;
  `,
  // 2: the outbox (DESIGN.md §19): every report waits here until the broker acknowledged it.
  `
  CREATE TABLE outbox (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT, -- order; with nonce, the message id
    nonce   TEXT NOT NULL,                     -- random: an id stays unique when a crash
                                               -- (or a restored store) gives a seq again
    body    TEXT NOT NULL,                     -- the report, JSON
    at      TEXT NOT NULL,                     -- when it was made (ISO)
    dropped INTEGER                            -- older reports the bounds dropped before it
  ) STRICT;
  `,
  // 3: the last serial accepted from the link, per (signing key, node): a re-enrolment under
  // an earlier name, or with a key used before, keeps refusing what that key signed for that
  // name before (it was one meta value, cleared whenever the node or the key changed).
  `
  CREATE TABLE link_serials (
    signer TEXT NOT NULL,    -- the signing public key the declaration verified against (O...)
    node   TEXT NOT NULL,    -- the node it was addressed to
    serial INTEGER NOT NULL, -- the last serial accepted from that key for that node
    digest TEXT NOT NULL,    -- that declaration's digest (the same one again is not a replay)
    at     TEXT NOT NULL,    -- when it was accepted (ISO)
    PRIMARY KEY (signer, node)
  ) STRICT;

  INSERT INTO link_serials (signer, node, serial, digest, at)
    SELECT k.value, n.value, CAST(s.value AS INTEGER), coalesce(d.value, ''),
           strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
    FROM meta AS k
      JOIN meta AS n ON n.key = 'node_id'
      JOIN meta AS s ON s.key = 'link_serial'
      LEFT JOIN meta AS d ON d.key = 'link_digest'
    WHERE k.key = 'link_signer' AND k.value <> '' AND s.value GLOB '[0-9]*';

  DELETE FROM meta WHERE key IN ('link_serial', 'link_digest');
  `,
  // 4: what an apply forgot (stopped holding, left on the machine) is counted apart from
  // what it removed. Applies recorded before counted both as removed.
  `
  ALTER TABLE applies ADD COLUMN forgotten INTEGER NOT NULL DEFAULT 0;
  `,
  // 5: a held file's identity as last read back in sync (issue 28): a file whose device,
  // inode, size, modification and change times are still these is not read again (the
  // file kind decides when an identity may be trusted; NULL: read it next time). Times
  // in nanoseconds as text (beyond what a JS number holds exactly), as precise as the
  // runtime reports them.
  `
  ALTER TABLE held ADD COLUMN seen_dev INTEGER;
  ALTER TABLE held ADD COLUMN seen_ino INTEGER;
  ALTER TABLE held ADD COLUMN seen_size INTEGER;
  ALTER TABLE held ADD COLUMN seen_mtime_ns TEXT;
  ALTER TABLE held ADD COLUMN seen_ctime_ns TEXT;
  `,
];
