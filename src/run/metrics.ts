/**
 * The node's state where monitoring already looks, without a listening surface: a
 * Prometheus text file for node_exporter's textfile collector (host.json
 * `metricsFile`, off unless set). The service rewrites it after every apply, every held
 * check and every heartbeat tick, atomically, through the file-system adapter (a new
 * file beside it, renamed over it; never written through a symlink), mode 0644 so the
 * exporter's own user can read it.
 */
import type { Hold } from "../engine/hold.ts";
import { readHold } from "../engine/hold.ts";
import { describeError } from "../errors.ts";
import type { Log } from "../log.ts";
import type { FileSystem } from "../providers.ts";
import { META } from "../store/meta.ts";
import type { ApplyRecord, Store } from "../store/store.ts";
import { runtimeVersion, VERSION } from "../version.ts";
import { readIdentity } from "../link/identity.ts";
import { type TlsExpiry, tlsExpiry } from "../link/trust.ts";

/** What the file says. */
export interface MetricsFacts {
  node: string | null;
  version: string;
  runtime: string;
  lastApply: ApplyRecord | null;
  /** The last serial accepted from the link. */
  serial: number | null;
  linkUp: boolean;
  hold: Hold | null;
  managedResources: number;
  /** When the link's TLS expires (null when the node is not enrolled). */
  tls?: TlsExpiry | null;
}

/**
 * The facts of `store` now, with the link's state and the broker's certificate it came
 * up with last (`certificate`).
 */
export function metricsFacts(
  store: Store,
  linkUp: boolean,
  certificate?: Parameters<typeof tlsExpiry>[1],
): MetricsFacts {
  const identity = readIdentity(store);
  const serial = store.lastLinkSerial()?.serial ?? null;
  return {
    node: store.meta(META.node) ?? null,
    version: VERSION,
    runtime: runtimeVersion(),
    // An apply still running has no outcome yet: the file says the last one that ended.
    lastApply: store.lastEndedApply(),
    serial,
    linkUp,
    hold: readHold(store),
    managedResources: store.managedCount(),
    tls: identity ? tlsExpiry(identity.trust, certificate) : null,
  };
}

/** A label value in the text format: backslash, double quote and line feed escaped. */
function label(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

const seconds = (iso: string) => (Date.parse(iso) / 1000).toFixed(3);

/** The outcomes an apply can end with (one series each, 1 for the last apply's). */
const OUTCOMES = ["converged", "failed", "interrupted", "running"] as const;
const RESULTS = ["changed", "unchanged", "removed", "forgotten", "failed"] as const;

/** The file's text (Prometheus text exposition format 0.0.4). */
// Long because: one block per metric, in the order the file lists them; each is a HELP, a TYPE and
// its lines.
export function metricsText(f: MetricsFacts): string {
  const lines: string[] = [];
  const metric = (name: string, help: string, samples: [string, number | string][]) => {
    lines.push(`# HELP nox_mesh_host_${name} ${help}`, `# TYPE nox_mesh_host_${name} gauge`);
    for (const [labels, value] of samples) lines.push(`nox_mesh_host_${name}${labels} ${value}`);
  };
  const node = f.node === null ? "" : `node="${label(f.node)}",`;
  metric("info", "The running host: its version and the Deno version it runs on.", [
    [`{${node}version="${label(f.version)}",runtime="${label(f.runtime)}"}`, 1],
  ]);
  metric("link_up", "1 while the link to the broker is up.", [["", f.linkUp ? 1 : 0]]);
  metric("hold", "1 while a person holds the host (nothing is applied).", [["", f.hold ? 1 : 0]]);
  if (f.hold) {
    metric("hold_info", "Who holds the host and why.", [
      [`{by="${label(f.hold.by)}",reason="${label(f.hold.reason)}"}`, 1],
    ]);
    metric("hold_since_timestamp_seconds", "When the hold was put.", [
      ["", seconds(f.hold.since)],
    ]);
  }
  metric("resources_held", "Resources the host holds.", [["", f.managedResources]]);
  if (f.tls?.broker) {
    const b = f.tls.broker;
    const labels = `{url="${label(b.url)}",issuer="${label(b.issuer)}"}`;
    metric(
      "broker_certificate_expiry_timestamp_seconds",
      "When the broker's certificate the link came up with last expires.",
      [[labels, seconds(b.notAfter)]],
    );
    metric(
      "broker_certificate_days_left",
      "Whole days until the broker's certificate the link came up with last expires.",
      [[labels, b.daysLeft]],
    );
  }
  if (f.tls && f.tls.cas.length > 0) {
    const labels = (c: TlsExpiry["cas"][number]) =>
      `{ca="${label(c.subject)}",fingerprint="${label(c.fingerprint)}"}`;
    metric(
      "trusted_ca_expiry_timestamp_seconds",
      "When each CA this node trusts the broker by stops being trusted (its expiry, or the end of a rotation's overlap).",
      f.tls.cas.map((c) => [labels(c), seconds(c.ends)]),
    );
    metric(
      "trusted_ca_days_left",
      "Whole days until each CA this node trusts the broker by stops being trusted.",
      f.tls.cas.map((c) => [labels(c), c.daysLeft]),
    );
  }
  if (f.serial !== null) {
    metric("serial", "The last serial accepted from the link.", [["", f.serial]]);
  }
  const last = f.lastApply;
  if (last) {
    metric(
      "last_apply_timestamp_seconds",
      "When the last apply ended (or started, while it runs).",
      [["", seconds(last.endedAt ?? last.startedAt)]],
    );
    metric(
      "last_apply_outcome",
      "The last apply's outcome: 1 for the one it ended with.",
      OUTCOMES.map((o) => [`{outcome="${o}"}`, last.outcome === o ? 1 : 0]),
    );
    metric(
      "last_apply_resources",
      "The last apply's resources by result.",
      RESULTS.map((r) => [`{result="${r}"}`, last.counts[r]]),
    );
    if (last.serial !== undefined) {
      metric("last_apply_serial", "The serial of the last apply's declaration.", [[
        "",
        last.serial,
      ]]);
    }
  }
  return lines.join("\n") + "\n";
}

/** The file, rewritten on demand; one write at a time, the latest facts win. */
export class MetricsFile {
  readonly #path: string;
  readonly #fs: () => FileSystem;
  readonly #log: Log;
  #writing: Promise<void> | undefined;
  #again: (() => MetricsFacts) | undefined;
  #failing = false;

  constructor(path: string, fs: () => FileSystem, log: Log) {
    this.#path = path;
    this.#fs = fs;
    this.#log = log;
  }

  get path(): string {
    return this.#path;
  }

  /** Write the facts `facts()` gives (now, or after the write under way). */
  update(facts: () => MetricsFacts): void {
    if (this.#writing) {
      this.#again = facts;
      return;
    }
    this.#writing = this.#write(facts()).finally(() => {
      this.#writing = undefined;
      const next = this.#again;
      this.#again = undefined;
      if (next) this.update(next);
    });
  }

  /** Wait for the write under way, if any. */
  async settled(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  async #write(facts: MetricsFacts): Promise<void> {
    const bytes = new TextEncoder().encode(metricsText(facts));
    try {
      // Root's, or, below a directory a user owns (node_exporter's textfile directory is
      // `prometheus`'s on Debian), that user's: the host writes there as that user.
      const fs = this.#fs();
      const owner = (await fs.actsAs?.(this.#path)) ?? { uid: 0, gid: 0 };
      try {
        await fs.writeFileAtomic(this.#path, bytes, { mode: 0o644, ...owner });
      } finally {
        await fs.release?.();
      }
      if (this.#failing) this.#log(`metrics: ${this.#path} written again`);
      this.#failing = false;
    } catch (error) {
      // Said once, not at every tick, until a write succeeds again.
      if (!this.#failing) {
        this.#log(
          `metrics: cannot write ${this.#path}: ${describeError(error)} ` +
            "(does its directory exist? host.json metricsFile)",
          "warning",
        );
      }
      this.#failing = true;
    }
  }
}
