/**
 * Inventory upward (DESIGN.md §9, §19): identity, profile, managed resources and
 * the overlay public key go to the control plane on the first link of a
 * process (so right after enrolment), whenever their digest changes, and once a
 * day. Sent as a request the broker's stream acknowledges; only an acknowledged
 * inventory counts as sent (its digest and time are kept in the store).
 */
import { describeError } from "../errors.ts";
import type { Identity } from "../link/identity.ts";
import type { Uplink } from "./uplink.ts";
import {
  type InventoryMessage,
  inventoryMessage,
  type InventoryProfile,
  inventoryProfile,
  managedSummary,
} from "../link/messages.ts";
import type { Log } from "../log.ts";
import { readOverlayKey } from "../overlay_key.ts";
import type { Profile } from "../profile.ts";
import { META } from "../store/meta.ts";
import type { Store } from "../store/store.ts";

/** Sent again, unchanged, after this long. */
export const INVENTORY_EVERY_MS = 24 * 3600 * 1000;

/**
 * After applies that changed the machine, the profile is detected again at most
 * once in this long. Detection runs some forty programs (podman, nft, wg, ip …:
 * 0.3–0.7 s, most of a core); a burst of pushes or drift repairs detects once at
 * once, then once more when the interval ends, never once per apply.
 */
export const DETECT_AT_MOST_EVERY_MS = 60 * 1000;

/** What the inventory needs from the loop. */
export interface InventoryOptions {
  store: Store;
  stateDir: string;
  /** Detects the profile (the command line passes the OS's detection); absent: none sent. */
  profile?: () => Promise<Profile>;
  log: Log;
  /** Detect again after a change at most this often (default {@link DETECT_AT_MOST_EVERY_MS}). */
  detectAtMostEveryMs?: number;
}

/** The inventory of one process. */
export class InventoryReporter {
  readonly #o: InventoryOptions;
  #link: Uplink | undefined;
  #identity: Identity | undefined;
  #profile: InventoryProfile | null | undefined;
  #busy: Promise<void> | undefined;
  #again: { detect: boolean; force: boolean } | undefined;
  #sentThisProcess = false;
  #lastProblem = "";
  /** When the profile was last detected (performance.now()). */
  #detectedAt = -Infinity;
  /** The detection a change asked for within the interval, at the interval's end. */
  #detectLater: ReturnType<typeof setTimeout> | undefined;

  constructor(options: InventoryOptions) {
    this.#o = options;
  }

  /** The link and identity to send with. */
  attach(link: Uplink, identity: Identity): void {
    this.#link = link;
    this.#identity = identity;
  }

  /** The link came up: the first time in this process the inventory goes out in any case. */
  linked(): void {
    this.#check({ detect: this.#profile === undefined, force: !this.#sentThisProcess });
  }

  /**
   * An apply changed the machine: what it holds goes upward now; the profile is
   * detected again now when the last detection is older than the interval, else
   * once when the interval ends. Sent when anything differs.
   */
  changed(): void {
    const every = this.#o.detectAtMostEveryMs ?? DETECT_AT_MOST_EVERY_MS;
    const wait = this.#detectedAt + every - performance.now();
    if (wait <= 0) {
      this.#check({ detect: true, force: false });
      return;
    }
    this.#check({ detect: false, force: false });
    this.#detectLater ??= setTimeout(() => {
      this.#detectLater = undefined;
      this.#check({ detect: true, force: false });
    }, wait);
  }

  /** The heartbeat tick: sends when a day passed since the last acknowledged inventory. */
  tick(): void {
    const at = Date.parse(this.#o.store.meta(META.inventorySentAt) ?? "");
    if (Number.isNaN(at) || Date.now() - at >= INVENTORY_EVERY_MS) {
      if (!this.#busy && this.#link?.state.phase === "up") {
        this.#check({ detect: true, force: true });
      }
    }
  }

  /** Wait for an inventory in flight; a detection waiting for its interval is dropped (stopping). */
  async settled(): Promise<void> {
    clearTimeout(this.#detectLater);
    this.#detectLater = undefined;
    while (this.#busy) await this.#busy;
  }

  #check(want: { detect: boolean; force: boolean }): void {
    if (this.#busy) {
      this.#again = {
        detect: want.detect || (this.#again?.detect ?? false),
        force: want.force || (this.#again?.force ?? false),
      };
      return;
    }
    this.#busy = this.#send(want)
      .catch((error) => {
        // Said once until it changes: the daily check would repeat it every tick.
        const problem = `inventory: not sent: ${describeError(error)}`;
        if (problem !== this.#lastProblem) this.#o.log(problem, "warning");
        this.#lastProblem = problem;
      })
      .finally(() => {
        this.#busy = undefined;
        const again = this.#again;
        this.#again = undefined;
        if (again) this.#check(again);
      });
  }

  /** Build the inventory now (detecting the profile when asked or never done). */
  async build(detect: boolean): Promise<InventoryMessage | undefined> {
    const identity = this.#identity;
    if (!identity) return undefined;
    if (detect || this.#profile === undefined) {
      this.#detectedAt = performance.now();
      try {
        this.#profile = this.#o.profile ? inventoryProfile(await this.#o.profile()) : null;
      } catch (error) {
        this.#o.log(`inventory: cannot detect the profile: ${describeError(error)}`, "warning");
        this.#profile ??= null;
      }
    }
    let overlayKey: string | null = null;
    try {
      overlayKey = (await readOverlayKey(this.#o.stateDir))?.publicKey ?? null;
    } catch (error) {
      this.#o.log(`inventory: ${describeError(error)}`, "warning");
    }
    return inventoryMessage(identity, {
      profile: this.#profile ?? null,
      held: managedSummary(this.#o.store).list,
      overlayKey,
    });
  }

  async #send(want: { detect: boolean; force: boolean }): Promise<void> {
    const link = this.#link;
    if (!link || link.state.phase !== "up") return;
    const message = await this.build(want.detect);
    if (!message) return;
    if (!want.force && message.digest === this.#o.store.meta(META.inventoryDigest)) return;
    const body = JSON.stringify(message);
    const id = `${message.node}.inventory.${Date.now()}`;
    await link.deliver("inventory", body, id);
    this.#sentThisProcess = true;
    this.#lastProblem = "";
    this.#o.store.setMeta(META.inventoryDigest, message.digest);
    this.#o.store.setMeta(META.inventorySentAt, message.at);
  }
}
