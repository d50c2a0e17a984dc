/**
 * The store (R4): one SQLite file under the state directory, the record of
 * what this node applied and manages. Authoritative while disconnected, never a
 * cache of the control plane. Every step is one transaction, so killing the
 * process at any instant leaves a store that opens and is consistent.
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type * as NodeFs from "node:fs";
import { posix } from "../posix_path.ts";
import { StoreError } from "../errors.ts";
import type { Resource } from "../resources/mod.ts";
import type { FileIdentity } from "../providers.ts";
import type {
  ApplyOutcome,
  Counts,
  ManagedResource,
  ManagedSummary,
  ResourceResult,
  ResultOutcome,
  Source,
} from "./records.ts";
import { META } from "./meta.ts";
import { MIGRATIONS } from "./migrations.ts";
import { OutboxTable } from "./outbox_table.ts";

/** The declaration the host holds the machine to. */
export interface StoredDeclaration {
  source: Source;
  origin: string;
  node?: string;
  serial?: number;
  digest: string;
  /** Canonical JSON of the declaration. */
  body: string;
  acceptedAt: string;
}

/**
 * A declaration admitted from the link whose apply has not started yet (the lock was busy,
 * or the process ended in between): intake's one record (src/run/intake.ts). Written in
 * the commit that records its serial, so whatever is admitted is either owed here or
 * applied; gone when it becomes the current declaration (the apply's start, or stored
 * while the host is held), when a newer one is admitted, or when intake drops it.
 */
export interface AdmittedRecord {
  serial: number;
  digest: string;
  node: string;
  /** The uplink's subject it came on. */
  origin: string;
  /** Canonical JSON of the declaration. */
  body: string;
  /** When it was admitted (ISO). */
  at: string;
}

/** One row of apply history. */
export interface ApplyRecord {
  id: number;
  source: Source;
  origin: string;
  serial?: number;
  digest: string;
  startedAt: string;
  endedAt?: string;
  outcome: ApplyOutcome;
  counts: Counts;
  error?: string;
}

/** The store file's name inside the state directory. */
export const STORE_FILE = "state.db";

/** How many applies the history keeps (older ones and their results are pruned). */
export const HISTORY_KEPT = 200;

type Row = Record<string, SQLInputValue>;

/** The node's local store. Open one per process; close it when done. */
export class Store {
  readonly path: string;
  #db: DatabaseSync;
  #stmt: Record<string, StatementSync>;
  /** Reports waiting for the broker's acknowledgement (src/store/outbox_table.ts). */
  readonly outbox: OutboxTable;

  // Long because: the store's prepared statements, one line each, made once when it opens.
  private constructor(path: string, db: DatabaseSync) {
    this.path = path;
    this.#db = db;
    this.outbox = new OutboxTable(db, (work) => this.#transaction(work));
    const s = (sql: string) => db.prepare(sql);
    this.#stmt = {
      meta: s(`SELECT value FROM meta WHERE key = ?`),
      setMeta: s(
        `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
      ),
      deleteMeta: s(`DELETE FROM meta WHERE key = ?`),
      linkSerial: s(`SELECT serial, digest FROM link_serials WHERE signer = ? AND node = ?`),
      setLinkSerial: s(
        `INSERT INTO link_serials (signer, node, serial, digest, at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (signer, node) DO UPDATE SET serial = excluded.serial,
           digest = excluded.digest, at = excluded.at`,
      ),
      admittedDigest: s(
        `SELECT CASE WHEN json_valid(value) THEN json_extract(value, '$.digest') END AS digest
         FROM meta WHERE key = '${META.admitted}'`,
      ),
      dropAdmitted: s(
        `DELETE FROM meta WHERE key = '${META.admitted}' AND (? IS NULL OR
           (CASE WHEN json_valid(value) THEN json_extract(value, '$.digest') END) IS ?)`,
      ),
      current: s(`SELECT * FROM declaration WHERE slot = 1`),
      currentHead: s(`SELECT source, origin, serial, digest FROM declaration WHERE slot = 1`),
      makeCurrent: s(
        `INSERT INTO declaration (slot, source, origin, node, serial, digest, body, accepted_at)
         VALUES (1, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (slot) DO UPDATE SET source = excluded.source, origin = excluded.origin,
           node = excluded.node, serial = excluded.serial, digest = excluded.digest,
           body = excluded.body, accepted_at = excluded.accepted_at`,
      ),
      // The table `held` keeps its first schema's name for the managed resources: renaming it
      // would be a schema version that an older host, rolled back to, refuses (store.newer).
      managed: s(`SELECT * FROM held ORDER BY position, key`),
      managedIndex: s(
        `SELECT key, id, digest, created, position,
           seen_dev, seen_ino, seen_size, seen_mtime_ns, seen_ctime_ns FROM held`,
      ),
      setSeen: s(
        `UPDATE held SET seen_dev = ?, seen_ino = ?, seen_size = ?, seen_mtime_ns = ?,
           seen_ctime_ns = ? WHERE key = ?`,
      ),
      managedTypes: s(`SELECT DISTINCT type FROM held UNION SELECT DISTINCT type FROM intents`),
      managedCount: s(`SELECT count(*) AS n FROM held`),
      hasIntent: s(`SELECT 1 AS yes FROM intents WHERE key = ?`),
      intent: s(`INSERT OR REPLACE INTO intents (key, id, type, spec, at) VALUES (?, ?, ?, ?, ?)`),
      intents: s(`SELECT * FROM intents ORDER BY key`),
      dropIntent: s(`DELETE FROM intents WHERE key = ?`),
      upsertManaged: s(
        `INSERT INTO held (key, id, type, position, digest, spec, created, applied_at, apply_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET id = excluded.id, type = excluded.type,
           position = excluded.position, digest = excluded.digest, spec = excluded.spec,
           created = excluded.created, applied_at = excluded.applied_at, apply_id = excluded.apply_id`,
      ),
      touchManaged: s(`UPDATE held SET position = ?, apply_id = ? WHERE key = ?`),
      dropManaged: s(`DELETE FROM held WHERE key = ?`),
      result: s(
        `INSERT INTO results (apply_id, seq, resource_id, type, key, outcome, detail) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      begin: s(
        `INSERT INTO applies (source, origin, serial, digest, started_at, outcome) VALUES (?, ?, ?, ?, ?, 'running')`,
      ),
      finish: s(
        `UPDATE applies SET ended_at = ?, outcome = ?, changed = ?, unchanged = ?, removed = ?,
           forgotten = ?, failed = ?, error = ?
         WHERE id = ?`,
      ),
      interruptStale: s(
        `UPDATE applies SET outcome = 'interrupted', error = 'the process ended during this apply'
         WHERE outcome = 'running'`,
      ),
      lastApply: s(`SELECT * FROM applies ORDER BY id DESC LIMIT 1`),
      lastEndedApply: s(
        `SELECT * FROM applies WHERE outcome <> 'running' ORDER BY id DESC LIMIT 1`,
      ),
      applies: s(`SELECT * FROM applies ORDER BY id DESC LIMIT ?`),
      results: s(`SELECT * FROM results WHERE apply_id = ? ORDER BY seq`),
      prune: s(`DELETE FROM applies WHERE id <= (SELECT max(id) FROM applies) - ?`),
    };
  }

  /**
   * Open (creating if needed) the store in `stateDir`, migrating its schema.
   *
   * @example
   * ```ts
   * using store = Store.open("/var/lib/mesh-host");
   * ```
   */
  static open(stateDir: string): Store {
    const path = posix.join(stateDir, STORE_FILE);
    let db: DatabaseSync;
    try {
      Deno.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
      restrictStoreFiles(path);
      db = new DatabaseSync(path);
    } catch (error) {
      if (error instanceof StoreError) throw error;
      throw new StoreError(
        "store.open",
        `cannot open the store ${path}: ${(error as Error).message}`,
        {
          hint:
            "check that the state directory exists and is writable by the host (run as root), " +
            "or choose another with --state-dir",
          cause: error,
        },
      );
    }
    try {
      db.exec(`PRAGMA busy_timeout = 10000`);
      db.exec(`PRAGMA journal_mode = WAL`);
      db.exec(`PRAGMA synchronous = NORMAL`);
      db.exec(`PRAGMA foreign_keys = ON`);
      // SQLite gives the WAL files it creates the database's mode; ones left by an
      // earlier process were restricted before the open. Never open and close the
      // store's files again here: SQLite's locks are POSIX record locks, which a
      // process loses on ANY close of the file, and another process (a `status` beside
      // the running host) would then checkpoint and delete the WAL under it.
      migrate(db, path);
      return new Store(path, db);
    } catch (error) {
      db.close();
      if (error instanceof StoreError) throw error;
      throw new StoreError(
        "store.corrupt",
        `the store ${path} cannot be used: ${(error as Error).message}`,
        {
          hint:
            "move the file aside to start from an empty store (the host then re-applies its declaration)",
          cause: error,
        },
      );
    }
  }

  close(): void {
    if (this.#db.isOpen) this.#db.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** The schema version this store is at. */
  get schemaVersion(): number {
    return Number((this.#db.prepare(`PRAGMA user_version`).get() as Row).user_version);
  }

  meta(key: string): string | undefined {
    return (this.#stmt.meta.get(key) as Row | undefined)?.value as string | undefined;
  }

  setMeta(key: string, value: string | undefined): void {
    if (value === undefined) this.#stmt.deleteMeta.run(key);
    else this.#stmt.setMeta.run(key, value);
  }

  /** The declaration the host holds the machine to, if any. */
  current(): StoredDeclaration | null {
    const row = this.#stmt.current.get() as Row | undefined;
    if (!row) return null;
    return {
      source: row.source as Source,
      origin: row.origin as string,
      node: (row.node as string | null) ?? undefined,
      serial: row.serial === null ? undefined : Number(row.serial),
      digest: row.digest as string,
      body: row.body as string,
      acceptedAt: row.accepted_at as string,
    };
  }

  /**
   * The last serial accepted from the link from signing key `signer` for `node`,
   * with that declaration's digest; kept across re-enrolments.
   */
  linkSerial(signer: string, node: string): { serial: number; digest: string } | undefined {
    const row = this.#stmt.linkSerial.get(signer, node) as Row | undefined;
    return row ? { serial: Number(row.serial), digest: row.digest as string } : undefined;
  }

  /** {@link linkSerial} for the pinned signing key and this node (status, heartbeats). */
  lastLinkSerial(): { serial: number; digest: string } | undefined {
    const signer = this.meta(META.signer);
    const node = this.meta(META.node);
    return signer && node ? this.linkSerial(signer, node) : undefined;
  }

  /**
   * Record `serial` (and `digest`) as the last accepted from `signer` for `node`,
   * in one commit that is on disk when this returns (after a power cut a replay
   * of an older serial is still refused). With `pin`, `signer` also becomes the
   * pinned signing key in that commit (a key rotation), with `pin`'s values beside it;
   * `meta` is written in the same commit, and with `admitted` the declaration is owed
   * (see {@link AdmittedRecord}): one record replaces any other.
   */
  recordLinkSerial(
    accepted: { signer: string; node: string; serial: number; digest: string },
    pin?: Record<string, string>,
    more: { meta?: Record<string, string>; admitted?: Omit<AdmittedRecord, "at"> } = {},
  ): void {
    this.#db.exec(`PRAGMA synchronous = FULL`);
    try {
      this.#transaction(() => {
        const { signer, node, serial, digest } = accepted;
        this.#stmt.setLinkSerial.run(signer, node, serial, digest, now());
        if (pin) {
          for (const [key, value] of Object.entries(pin)) this.#stmt.setMeta.run(key, value);
          this.#stmt.setMeta.run(META.signer, signer);
        }
        for (const [key, value] of Object.entries(more.meta ?? {})) {
          this.#stmt.setMeta.run(key, value);
        }
        if (more.admitted) {
          const record: AdmittedRecord = { ...more.admitted, at: now() };
          this.#stmt.setMeta.run(META.admitted, JSON.stringify(record));
        }
      });
    } finally {
      this.#db.exec(`PRAGMA synchronous = NORMAL`);
    }
  }

  /**
   * The declaration admitted from the link and not applied yet, or undefined (none, or a
   * record that does not read as one: said in `problem`).
   */
  admitted(): { record?: AdmittedRecord; problem?: string } {
    const text = this.meta(META.admitted);
    if (text === undefined) return {};
    try {
      const r = JSON.parse(text);
      if (
        Number.isSafeInteger(r?.serial) && typeof r.digest === "string" &&
        typeof r.node === "string" && typeof r.origin === "string" &&
        typeof r.body === "string" && typeof r.at === "string"
      ) return { record: r as AdmittedRecord };
    } catch { /* said below */ }
    return { problem: `the store's record "${META.admitted}" is not an admitted declaration` };
  }

  /** The digest of {@link admitted}'s record, without reading its body (undefined: none). */
  admittedDigest(): string | undefined {
    const row = this.#stmt.admittedDigest.get() as Row | undefined;
    return typeof row?.digest === "string" ? row.digest : undefined;
  }

  /** Drop the admitted record (with `digest`: only when it is that declaration's). */
  dropAdmitted(digest?: string): void {
    this.#stmt.dropAdmitted.run(digest ?? null, digest ?? null);
  }

  /** Set meta values in one commit that is on disk when this returns (a hold, say). */
  setMetaDurably(values: Record<string, string>): void {
    this.#db.exec(`PRAGMA synchronous = FULL`);
    try {
      this.#transaction(() => {
        for (const [key, value] of Object.entries(values)) this.#stmt.setMeta.run(key, value);
      });
    } finally {
      this.#db.exec(`PRAGMA synchronous = NORMAL`);
    }
  }

  /** The current declaration without its body: where it came from, its serial and digest. */
  currentHead(): Pick<StoredDeclaration, "source" | "origin" | "serial" | "digest"> | null {
    const row = this.#stmt.currentHead.get() as Row | undefined;
    if (!row) return null;
    return {
      source: row.source as Source,
      origin: row.origin as string,
      serial: row.serial === null ? undefined : Number(row.serial),
      digest: row.digest as string,
    };
  }

  /**
   * Make a parsed declaration the current one (before applying it); an admitted record of
   * the same declaration ends in the same commit (it is no longer owed). Not the link's
   * replay guard: that is `recordLinkSerial` (trust/admission.ts `recordAdmitted`).
   */
  makeCurrent(declaration: Omit<StoredDeclaration, "acceptedAt">): void {
    const d = declaration;
    this.#transaction(() => {
      this.#stmt.makeCurrent.run(
        d.source,
        d.origin,
        d.node ?? null,
        d.serial ?? null,
        d.digest,
        d.body,
        now(),
      );
      this.#stmt.dropAdmitted.run(d.digest, d.digest);
    });
  }

  /** What the host manages, by key, without the specs: what an apply needs to compare. */
  managedIndex(): Map<string, ManagedSummary> {
    const index = new Map<string, ManagedSummary>();
    for (const row of this.#stmt.managedIndex.all() as Row[]) {
      const identity = identityOf(row);
      index.set(row.key as string, {
        id: row.id as string,
        digest: row.digest as string,
        created: row.created === 1,
        position: Number(row.position),
        ...(identity === undefined ? {} : { identity }),
      });
    }
    return index;
  }

  /** The resource types of everything managed or half-done. */
  managedTypes(): Set<string> {
    return new Set((this.#stmt.managedTypes.all() as Row[]).map((row) => row.type as string));
  }

  /** Everything the host manages (or those whose key `keep` accepts), in declared order. */
  managed(keep: (key: string) => boolean = () => true): ManagedResource[] {
    return (this.#stmt.managed.all() as Row[]).filter((row) => keep(row.key as string)).map((
      row,
    ) => ({
      key: row.key as string,
      id: row.id as string,
      type: row.type as Resource["type"],
      position: Number(row.position),
      digest: row.digest as string,
      spec: JSON.parse(row.spec as string),
      created: row.created === 1,
      appliedAt: row.applied_at as string,
      applyId: Number(row.apply_id),
    }));
  }

  managedCount(): number {
    return Number((this.#stmt.managedCount.get() as Row).n);
  }

  /** Whether a create of `key` was started and never recorded (a crash in between). */
  hasIntent(key: string): boolean {
    return this.#stmt.hasIntent.get(key) !== undefined;
  }

  /** Note that the host is about to create `key`, so a crash before its record cannot orphan it. */
  recordIntent(key: string, resource: Resource): void {
    this.#stmt.intent.run(key, resource.id, resource.type, JSON.stringify(resource), now());
  }

  /** Forget an intent whose create did not happen. */
  dropIntent(key: string): void {
    this.#stmt.dropIntent.run(key);
  }

  /** Creates that were started and never recorded, as resources the host made. */
  intents(): { key: string; spec: Resource }[] {
    return (this.#stmt.intents.all() as Row[]).map((row) => ({
      key: row.key as string,
      spec: JSON.parse(row.spec as string),
    }));
  }

  /** Start an apply; marks any apply left "running" by a dead process as interrupted. */
  beginApply(source: Source, origin: string, serial: number | undefined, digest: string): number {
    return this.#transaction(() => {
      this.#stmt.interruptStale.run();
      const info = this.#stmt.begin.run(source, origin, serial ?? null, digest, now());
      return Number(info.lastInsertRowid);
    });
  }

  /** Record a resource as managed, with its result, in one transaction (after its read-back passed). */
  recordManaged(
    applyId: number,
    seq: number,
    managed: Omit<ManagedResource, "appliedAt" | "applyId">,
    result: ResourceResult,
    identity?: FileIdentity,
  ): void {
    this.#transaction(() => {
      this.#stmt.upsertManaged.run(
        managed.key,
        managed.id,
        managed.type,
        managed.position,
        managed.digest,
        JSON.stringify(managed.spec),
        managed.created ? 1 : 0,
        now(),
        applyId,
      );
      this.#setSeen(managed.key, identity ?? null);
      this.#stmt.dropIntent.run(managed.key);
      this.#insertResult(applyId, seq, result);
    });
  }

  /**
   * Record that a managed resource was checked and is unchanged; `moved` gives its new
   * position, `identity` what it is now recognised by (a FileIdentity, or null to forget
   * the one kept; undefined: as kept).
   */
  recordUnchanged(
    applyId: number,
    seq: number,
    result: ResourceResult,
    moved?: number,
    identity?: FileIdentity | null,
  ): void {
    this.#transaction(() => {
      if (moved !== undefined) this.#stmt.touchManaged.run(moved, applyId, result.key);
      if (identity !== undefined) this.#setSeen(result.key, identity);
      this.#insertResult(applyId, seq, result);
    });
  }

  /** Keep (or with null, forget) the identity a managed file was last read back as. */
  #setSeen(key: string, identity: FileIdentity | null): void {
    if (identity === null) {
      this.#stmt.setSeen.run(null, null, null, null, null, key);
      return;
    }
    const { dev, ino, size, mtimeNs, ctimeNs } = identity;
    this.#stmt.setSeen.run(dev, ino, size, String(mtimeNs), String(ctimeNs), key);
  }

  /**
   * Before removing a thing the host created: it stops being managed and becomes an
   * intent, in one transaction. A crash during the removal then leaves "maybe on
   * disk, ours", never "managed" for something already gone; the next apply
   * finishes the removal.
   */
  beginRelease(managed: ManagedResource): void {
    this.#transaction(() => {
      this.#stmt.dropManaged.run(managed.key);
      this.#stmt.intent.run(
        managed.key,
        managed.id,
        managed.type,
        JSON.stringify(managed.spec),
        now(),
      );
    });
  }

  /**
   * Rescue: forget everything managed, every half-done create and the current
   * declaration, and set `meta` (the rescue's record), in one transaction. Nothing
   * else is touched: the identity, the link's accepted serial, the outbox and the
   * history stay. Returns how many managed resources and intents were forgotten.
   */
  forgetManaged(meta: Record<string, string>): { managed: number; intents: number } {
    return this.#transaction(() => {
      const count = (table: string) =>
        Number((this.#db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as Row).n);
      const forgotten = { managed: count("held"), intents: count("intents") };
      this.#db.exec(`DELETE FROM held; DELETE FROM intents; DELETE FROM declaration;`);
      for (const [key, value] of Object.entries(meta)) this.#stmt.setMeta.run(key, value);
      return forgotten;
    });
  }

  /** Record a managed resource as removed or forgotten: it is no longer managed. */
  recordReleased(applyId: number, seq: number, result: ResourceResult): void {
    this.#transaction(() => {
      this.#stmt.dropManaged.run(result.key);
      this.#stmt.dropIntent.run(result.key);
      this.#insertResult(applyId, seq, result);
    });
  }

  /** Record a result that changes nothing managed (failed, skipped). */
  recordResult(applyId: number, seq: number, result: ResourceResult): void {
    this.#insertResult(applyId, seq, result);
  }

  finishApply(
    applyId: number,
    outcome: Exclude<ApplyOutcome, "running">,
    counts: Counts,
    error?: string,
  ): void {
    this.#transaction(() => {
      this.#stmt.finish.run(
        now(),
        outcome,
        counts.changed,
        counts.unchanged,
        counts.removed,
        counts.forgotten,
        counts.failed,
        error ?? null,
        applyId,
      );
      this.#stmt.prune.run(HISTORY_KEPT);
    });
  }

  lastApply(): ApplyRecord | null {
    const row = this.#stmt.lastApply.get() as Row | undefined;
    return row ? toApplyRecord(row) : null;
  }

  /** The last apply that ended (one running now is not it), or null. */
  lastEndedApply(): ApplyRecord | null {
    const row = this.#stmt.lastEndedApply.get() as Row | undefined;
    return row ? toApplyRecord(row) : null;
  }

  applies(limit = 20): ApplyRecord[] {
    return (this.#stmt.applies.all(limit) as Row[]).map(toApplyRecord);
  }

  results(applyId: number): ResourceResult[] {
    return (this.#stmt.results.all(applyId) as Row[]).map((row) => {
      const detail = row.detail === null ? {} : JSON.parse(row.detail as string);
      return {
        id: row.resource_id as string,
        type: row.type as Resource["type"],
        key: row.key as string,
        outcome: row.outcome as ResultOutcome,
        changes: detail.changes ?? [],
        ...(detail.detail ? { detail: detail.detail } : {}),
      };
    });
  }

  #insertResult(applyId: number, seq: number, r: ResourceResult): void {
    const detail = r.changes.length || r.detail
      ? JSON.stringify({ changes: r.changes, detail: r.detail })
      : null;
    this.#stmt.result.run(applyId, seq, r.id, r.type, r.key, r.outcome, detail);
  }

  /**
   * Run several records as one transaction (used for results that change
   * nothing on the machine, such as a run of unchanged resources).
   */
  batch(work: () => void): void {
    this.#transaction(work);
  }

  /**
   * Run several records as one transaction that is on disk when this returns (the
   * WAL synced, as for the link's serial): for a decision that must survive a power cut.
   */
  batchDurably(work: () => void): void {
    this.#db.exec(`PRAGMA synchronous = FULL`);
    try {
      this.#transaction(work);
    } finally {
      this.#db.exec(`PRAGMA synchronous = NORMAL`);
    }
  }

  #transaction<T>(work: () => T): T {
    if (this.#db.isTransaction) return work(); // already inside a batch
    this.#db.exec("BEGIN IMMEDIATE");
    try {
      const value = work();
      this.#db.exec("COMMIT");
      return value;
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec("ROLLBACK");
      throw error;
    }
  }
}

/** The store's files: the database and SQLite's WAL and shared-memory files beside it. */
export function storeFiles(path: string): string[] {
  return [path, `${path}-wal`, `${path}-shm`];
}

/**
 * Make the store's files 0600 on open descriptors (O_NOFOLLOW: a symlink put in
 * their place is refused, never followed). The database is created here when
 * missing, so it never exists with a wider mode; the WAL files are restricted
 * when they exist. Called before SQLite opens them, never after (see `open`).
 */
function restrictStoreFiles(path: string): void {
  for (const [index, file] of storeFiles(path).entries()) {
    // A regular file already 0600 needs nothing (lstat: a link is never followed). Only a
    // file to make or to fix needs node's descriptor calls, whose loading costs a command
    // Deno's node layer (about 25 ms of CPU and 10 MiB).
    let seen: Deno.FileInfo | undefined;
    try {
      seen = Deno.lstatSync(file);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      if (index > 0) continue;
    }
    if (seen?.isFile && ((seen.mode ?? 0) & 0o7777) === 0o600) continue;
    const { closeSync, constants, fchmodSync, fstatSync, openSync } = process.getBuiltinModule(
      "node:fs",
    ) as typeof NodeFs;
    const { O_RDWR, O_CREAT, O_NOFOLLOW, O_NONBLOCK } = constants;
    let fd: number;
    try {
      const flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | (index === 0 ? O_CREAT : 0);
      fd = openSync(file, flags, 0o600);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" && index > 0) continue;
      if (code === "ELOOP") {
        throw new StoreError(
          "store.not-a-file",
          `${file} is a symbolic link; the store never follows one`,
          {
            hint:
              "remove the link (and find out who put it there); the host then starts a fresh store",
          },
        );
      }
      throw error;
    }
    try {
      if (!fstatSync(fd).isFile()) {
        throw new StoreError("store.not-a-file", `${file} is not a regular file`, {
          hint: "move it aside; the host then starts a fresh store",
        });
      }
      fchmodSync(fd, 0o600);
    } finally {
      closeSync(fd);
    }
  }
}

function migrate(db: DatabaseSync, path: string): void {
  const version = Number((db.prepare(`PRAGMA user_version`).get() as Row).user_version);
  if (version > MIGRATIONS.length) {
    throw new StoreError(
      "store.newer",
      `the store ${path} has schema version ${version}, newer than this host knows (${MIGRATIONS.length})`,
      { hint: "a newer host wrote it; run that version, or move the file aside to start afresh" },
    );
  }
  for (let next = version; next < MIGRATIONS.length; next++) {
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec(MIGRATIONS[next]);
      db.exec(`PRAGMA user_version = ${next + 1}`);
      db.exec("COMMIT");
    } catch (error) {
      db.exec("ROLLBACK");
      throw error;
    }
  }
}

/** The identity a managed row keeps, when it keeps one whole. */
function identityOf(row: Row): FileIdentity | undefined {
  const { seen_dev: dev, seen_ino: ino, seen_size: size } = row;
  const mtime = row.seen_mtime_ns, ctime = row.seen_ctime_ns;
  if (dev === null || ino === null || size === null || mtime === null || ctime === null) {
    return undefined;
  }
  if (typeof mtime !== "string" || typeof ctime !== "string") return undefined;
  if (!/^-?[0-9]{1,30}$/.test(mtime) || !/^-?[0-9]{1,30}$/.test(ctime)) return undefined;
  return {
    dev: Number(dev),
    ino: Number(ino),
    size: Number(size),
    mtimeNs: BigInt(mtime),
    ctimeNs: BigInt(ctime),
  };
}

function toApplyRecord(row: Row): ApplyRecord {
  return {
    id: Number(row.id),
    source: row.source as Source,
    origin: row.origin as string,
    ...(row.serial === null ? {} : { serial: Number(row.serial) }),
    digest: row.digest as string,
    startedAt: row.started_at as string,
    ...(row.ended_at === null ? {} : { endedAt: row.ended_at as string }),
    outcome: row.outcome as ApplyOutcome,
    counts: {
      changed: Number(row.changed),
      unchanged: Number(row.unchanged),
      removed: Number(row.removed),
      forgotten: Number(row.forgotten),
      failed: Number(row.failed),
    },
    ...(row.error === null ? {} : { error: row.error as string }),
  };
}

function now(): string {
  return new Date().toISOString();
}
