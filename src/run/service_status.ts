/**
 * What the run process says of itself: the status record `status` reads (run_status.ts)
 * and node_exporter's text file (metrics.ts), both rewritten on every uplink change,
 * piece of work and tick.
 */
import type { Engine } from "../engine/mod.ts";
import { describeError } from "../errors.ts";
import type { Log } from "../log.ts";
import { VERSION } from "../version.ts";
import { metricsFacts, MetricsFile } from "./metrics.ts";
import { type RunStatus, type ServicePhase, writeRunStatus } from "./run_status.ts";
import type { UplinkState } from "./uplink.ts";

/** What the record says that the loop knows. */
export type StatusFacts = Omit<RunStatus, "pid" | "version" | "startedAt" | "updatedAt" | "phase">;

/** The status record and the metrics file of one run process. */
export class ServiceStatus {
  readonly #host: Engine;
  readonly #log: Log;
  readonly #startedIso = new Date().toISOString();
  readonly #metrics: MetricsFile | undefined;
  phase: ServicePhase = "starting";

  constructor(host: Engine, log: Log) {
    this.#host = host;
    this.#log = log;
    const metricsFile = host.config.metricsFile;
    this.#metrics = metricsFile
      ? new MetricsFile(metricsFile, () => host.providers.fs, log)
      : undefined;
  }

  /** Rewrite the status record. */
  write(facts: StatusFacts): void {
    const status: RunStatus = {
      pid: Deno.pid,
      version: VERSION,
      startedAt: this.#startedIso,
      updatedAt: new Date().toISOString(),
      phase: this.phase,
      ...facts,
    };
    try {
      writeRunStatus(this.#host.store, status);
    } catch (error) {
      this.#log(`run: cannot write the status record: ${describeError(error)}`, "warning");
    }
  }

  /** Rewrite the metrics file (host.json metricsFile), when there is one. */
  writeMetrics(linkUp: boolean, uplink: UplinkState | null): void {
    this.#metrics?.update(() => metricsFacts(this.#host.store, linkUp, uplink?.certificate));
  }

  /** The last write of the metrics file ended. */
  async settled(): Promise<void> {
    await this.#metrics?.settled();
  }
}
