/**
 * The outbox (DESIGN.md §19): every report the host makes is written here first,
 * then delivered in order when the link is up, and removed only after the broker
 * acknowledged it. Bounded by count and age: when a bound drops old reports, the
 * number dropped is carried by the next report delivered.
 */
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import { META } from "./meta.ts";

/** How much the outbox keeps (host.json `outbox`). */
export interface OutboxBounds {
  /** At most this many reports; the oldest go first. */
  maxReports: number;
  /** Reports older than this are dropped (seconds). */
  maxAgeSeconds: number;
}

/** A report waiting for the broker. */
export interface OutboxEntry {
  /** Its place in the outbox (order). */
  seq: number;
  /** `<seq>.<random>`: unique even when a lost commit gives the same seq out again. */
  key: string;
  /** The report, JSON. */
  body: string;
  /** When it was made (ISO). */
  at: string;
  /** How many older reports the bounds dropped before this one (0: none). */
  dropped: number;
}

type Row = Record<string, SQLInputValue>;

/** The outbox table of one store (made by the Store, which owns the database). */
export class OutboxTable {
  readonly #transaction: <T>(work: () => T) => T;
  readonly #stmt: Record<string, StatementSync>;

  constructor(db: DatabaseSync, transaction: <T>(work: () => T) => T) {
    this.#transaction = transaction;
    const s = (sql: string) => db.prepare(sql);
    this.#stmt = {
      push: s(`INSERT INTO outbox (nonce, body, at) VALUES (?, ?, ?) RETURNING seq`),
      head: s(`SELECT * FROM outbox ORDER BY seq LIMIT 1`),
      all: s(`SELECT * FROM outbox ORDER BY seq`),
      count: s(`SELECT count(*) AS n FROM outbox`),
      remove: s(`DELETE FROM outbox WHERE seq = ?`),
      // Each drop returns the dropped rows' own counts, so a count already handed
      // to a report that is then dropped too is not lost.
      dropOld: s(`DELETE FROM outbox WHERE at < ? RETURNING dropped`),
      dropOver: s(
        `DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox ORDER BY seq DESC LIMIT -1 OFFSET ?)
         RETURNING dropped`,
      ),
      setDropped: s(`UPDATE outbox SET dropped = ? WHERE seq = ?`),
      meta: s(`SELECT value FROM meta WHERE key = ?`),
      setMeta: s(
        `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
      ),
    };
  }

  /** Keep a report (JSON) made at `at`; returns its seq and how many the bounds dropped now. */
  push(body: string, bounds: OutboxBounds, at: Date = new Date()): {
    seq: number;
    dropped: number;
  } {
    return this.#transaction(() => {
      const seq = Number((this.#stmt.push.get(nonce(), body, at.toISOString()) as Row).seq);
      return { seq, dropped: this.#enforce(bounds, at) };
    });
  }

  /**
   * The oldest report still waiting, after the bounds are applied at `now`. The
   * first time a report is handed out it takes the count of reports dropped
   * before it, so that count travels with exactly one delivered report.
   */
  head(bounds: OutboxBounds, now: Date = new Date()): OutboxEntry | undefined {
    return this.#transaction(() => {
      this.#enforce(bounds, now);
      const row = this.#stmt.head.get() as Row | undefined;
      if (!row) return undefined;
      const seq = Number(row.seq);
      let dropped = row.dropped === null ? null : Number(row.dropped);
      if (dropped === null) {
        dropped = Number(this.#meta(META.outboxDropped) ?? 0);
        this.#stmt.setDropped.run(dropped, seq);
        this.#stmt.setMeta.run(META.outboxDropped, "0");
      }
      return { ...entry(row), dropped };
    });
  }

  /** Remove a report the broker acknowledged. */
  remove(seq: number): void {
    this.#stmt.remove.run(seq);
  }

  /** How many reports wait. */
  size(): number {
    return Number((this.#stmt.count.get() as Row).n);
  }

  /** Every waiting report, oldest first (status, tests). */
  list(): OutboxEntry[] {
    return (this.#stmt.all.all() as Row[]).map(entry);
  }

  /** Reports dropped by the bounds that no delivered report has told of yet. */
  droppedUntold(): number {
    return Number(this.#meta(META.outboxDropped) ?? 0);
  }

  /** Drop what is too old or too many; count it for the next report handed out. */
  #enforce(bounds: OutboxBounds, now: Date): number {
    const cutoff = new Date(now.getTime() - bounds.maxAgeSeconds * 1000).toISOString();
    const rows = [
      ...this.#stmt.dropOld.all(cutoff) as Row[],
      ...this.#stmt.dropOver.all(Math.max(0, bounds.maxReports)) as Row[],
    ];
    if (rows.length > 0) {
      const told = rows.reduce((n, row) => n + (row.dropped === null ? 0 : Number(row.dropped)), 0);
      const before = Number(this.#meta(META.outboxDropped) ?? 0);
      this.#stmt.setMeta.run(META.outboxDropped, String(before + rows.length + told));
    }
    return rows.length;
  }

  #meta(key: string): string | undefined {
    return (this.#stmt.meta.get(key) as Row | undefined)?.value as string | undefined;
  }
}

function entry(row: Row): OutboxEntry {
  return {
    seq: Number(row.seq),
    key: `${row.seq}.${row.nonce}`,
    body: row.body as string,
    at: row.at as string,
    dropped: row.dropped === null ? 0 : Number(row.dropped),
  };
}

function nonce(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
