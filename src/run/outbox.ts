/**
 * Delivering the outbox (DESIGN.md §19): reports wait in the store
 * (src/store/outbox_table.ts) and go out one at a time, oldest first, while the link
 * is up. Each carries a message id (`<node>.<seq>.<random>`, also in the body as
 * `id`) so the broker's stream keeps it once however often it is sent, and is
 * removed only after the broker acknowledged it. A report the bounds dropped is
 * counted in the next one delivered (`dropped`).
 */
import { describeError } from "../errors.ts";
import { REPORT_BUDGET, shrinkReport, utf8Length } from "../link/messages.ts";
import type { Uplink } from "./uplink.ts";
import type { Log } from "../log.ts";
import type { OutboxBounds, OutboxEntry } from "../store/outbox_table.ts";
import type { Store } from "../store/store.ts";

/**
 * A report's message id: the node, the report's place in the outbox and a random
 * part, so that a sequence number given out again (a commit lost in a power cut,
 * a store restored from a copy) never makes a new report look like an old one.
 */
export function messageId(node: string, entry: OutboxEntry): string {
  return `${node}.${entry.key}`;
}

/**
 * The report as it is delivered: the stored one with its id and the dropped count,
 * within what the broker stores of a report (shrunk when an older version kept it
 * larger). A stored report within the budget is not parsed again: the two fields are
 * added to its text (a kept report never has them: they are added here only).
 */
export function outgoing(entry: OutboxEntry, id: string): string {
  const added = { id, ...(entry.dropped > 0 ? { dropped: entry.dropped } : {}) };
  const text = entry.body;
  if (text.startsWith("{") && text.endsWith("}") && utf8Length(text) <= REPORT_BUDGET) {
    const inner = text.slice(1, -1);
    const fields = JSON.stringify(added).slice(1, -1);
    return `{${inner}${inner.trim() === "" ? "" : ","}${fields}}`;
  }
  const body = shrinkReport(JSON.parse(text) as Record<string, unknown>, REPORT_BUDGET);
  return JSON.stringify({ ...body, ...added });
}

/** What the sender needs from the loop. */
export interface OutboxOptions {
  store: Store;
  bounds: OutboxBounds;
  log: Log;
  /** How long to wait before trying again after a failed delivery (ms). */
  retryMs?: number;
  /** How long one delivery may wait for the broker's acknowledgement (ms). */
  ackTimeoutMs?: number;
}

/** Keeps reports in the store and delivers them in order while the link is up. */
export class OutboxSender {
  readonly #o: Required<OutboxOptions>;
  #link: Uplink | undefined;
  #node: string | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #retry: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #lastProblem = "";

  constructor(options: OutboxOptions) {
    this.#o = { retryMs: 5000, ackTimeoutMs: 10_000, ...options };
  }

  /** Keep a report's JSON text (first, before anything is sent), then try to deliver. */
  keep(text: string): void {
    const { dropped } = this.#o.store.outbox.push(text, this.#o.bounds);
    if (dropped > 0) {
      this.#o.log(
        `outbox: dropped ${dropped} old report(s) to stay within ` +
          `${this.#o.bounds.maxReports} reports / ${this.#o.bounds.maxAgeSeconds} s; ` +
          `the next report delivered says how many`,
        "warning",
      );
    }
    this.kick();
  }

  /** The link to deliver over (set once the node has an identity). */
  attach(link: Uplink, node: string): void {
    this.#link = link;
    this.#node = node;
  }

  /** Deliver what waits, when the link is up (safe to call at any time). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#drain().finally(() => {
      this.#running = undefined;
      if (this.#again && !this.#stopped) {
        this.#again = false;
        this.kick();
      }
    });
  }

  /** Stop delivering; waits for a delivery in flight (bounded by its timeout). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    await this.#running;
  }

  /** Wait until the outbox is empty or `ms` passed (used before exiting). */
  async settle(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && this.#o.store.outbox.size() > 0 && this.#up()) {
      this.kick();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  #up(): boolean {
    return this.#link?.state.phase === "up";
  }

  async #drain(): Promise<void> {
    const link = this.#link;
    const node = this.#node;
    if (!link || !node) return;
    const outbox = this.#o.store.outbox;
    let sent = 0;
    let duplicates = 0;
    while (!this.#stopped && this.#up()) {
      const entry = outbox.head(this.#o.bounds);
      if (!entry) break;
      const id = messageId(node, entry);
      try {
        const ack = await link.deliver("report", outgoing(entry, id), id, this.#o.ackTimeoutMs);
        if (ack.duplicate) duplicates++;
      } catch (error) {
        const problem = describeError(error);
        if (problem !== this.#lastProblem) {
          this.#o.log(
            `outbox: report ${id} not acknowledged (${problem}); ` +
              `${outbox.size()} kept, trying again`,
            "warning",
          );
          this.#lastProblem = problem;
        }
        clearTimeout(this.#retry);
        this.#retry = setTimeout(() => this.kick(), this.#o.retryMs);
        return;
      }
      outbox.remove(entry.seq);
      this.#lastProblem = "";
      sent++;
    }
    if (sent > 1 || duplicates > 0) {
      this.#o.log(
        `outbox: delivered ${sent} kept report(s)` +
          (duplicates > 0 ? ` (${duplicates} already held by the broker: counted once)` : ""),
      );
    }
  }
}
