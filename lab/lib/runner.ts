import { join } from "node:path";
import type { Flavour } from "./base.ts";
import { LabError } from "./errors.ts";
import { Lab } from "./lab.ts";
import type { Machine } from "./machine.ts";
import type { Scenario, StepContext } from "./scenario.ts";

/** How many machines install the host at the same moment. */
const INSTALLS_AT_ONCE = 8;

/** A machine's flavour, and its architecture when emulated (figures grouped by it). */
export type MachineKind = Flavour | `${Flavour}-aarch64`;

/** What one scenario run measured and how it ended. */
export interface ScenarioResult {
  name: string;
  ok: boolean;
  ms: number;
  /** Why it did not run (Scenario.skip); ok is true then. */
  skipped?: string;
  /** "step N "title": what was expected vs seen". */
  failure?: string;
  /** Where the machines' logs were kept (on failure). */
  logsDir?: string;
  raises: Array<{ machine: string; flavour: MachineKind; ms: number }>;
  /** Memory of each machine at the end of its scenario (idle): working set and all charged. */
  /** Memory of each machine: idle (just booted, nothing installed) and at the scenario's end. */
  memory: Array<
    {
      machine: string;
      flavour: MachineKind;
      when: "idle" | "end";
      workingSet: number;
      usage: number;
    }
  >;
}

/** Options of {@link runScenario}. */
export interface RunOptions {
  prefix?: string;
  keep?: boolean;
  /** Where failed runs keep logs (default <checkout>/.lab/logs). */
  logsRoot: string;
  out: (line: string) => void;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Raises a scenario's lab, runs its steps, keeps logs on failure, tears everything down. */
export async function runScenario(s: Scenario, options: RunOptions): Promise<ScenarioResult> {
  const { out } = options;
  const started = Date.now();
  const result: ScenarioResult = { name: s.name, ok: false, ms: 0, raises: [], memory: [] };
  out(`▶ ${s.name}: ${s.summary}`);
  const skipped = await s.skip?.();
  if (skipped !== undefined) {
    out(`– ${s.name} SKIPPED: ${skipped}\n`);
    return { ...result, ok: true, skipped };
  }
  let lab: Lab | undefined;
  let where = "start the lab";
  try {
    lab = await Lab.start({
      prefix: options.prefix,
      keep: options.keep,
      log: (l) => out(`  · ${l}`),
    });
    const theLab = lab;
    if (s.broker) {
      where = "start the broker";
      await lab.broker();
      out(`  broker up at ${lab.runningBroker?.url}`);
    }
    where = "raise the machines";
    await Promise.all(
      Object.entries(s.machines).map(async ([name, spec]) => {
        const m = await theLab.raise({
          name,
          flavour: spec.flavour,
          files: spec.files,
          containers: spec.containers,
          hostFrom: spec.hostFrom,
          deno: spec.deno,
          glibc: spec.glibc,
          site: spec.site,
          arch: spec.arch,
        });
        // An emulated machine's figures are its own kind (they would skew the targets).
        const kind: MachineKind = spec.arch === "aarch64"
          ? `${spec.flavour}-aarch64`
          : spec.flavour;
        result.raises.push({ machine: name, flavour: kind, ms: m.raiseMs });
        out(`  raised ${name} (${kind}) in ${seconds(m.raiseMs)}`);
        const idle = await m.memory();
        if (idle) {
          result.memory.push({ machine: name, flavour: kind, when: "idle", ...idle });
        }
      }),
    );
    where = "install the host";
    // At most INSTALLS_AT_ONCE at a time: each checks and unpacks a tarball of about 100 MB,
    // and a fleet of 200 doing it at once starves every one past its timeout.
    const hosts = Object.entries(s.machines).filter(([, spec]) => spec.host).map(([n]) => n);
    await Promise.all(
      Array.from({ length: Math.min(INSTALLS_AT_ONCE, hosts.length) }, async () => {
        for (let name = hosts.shift(); name !== undefined; name = hosts.shift()) {
          await theLab.installHost(theLab.machines.get(name)!);
        }
      }),
    );
    const ctx: StepContext = {
      lab,
      machine(name: string): Machine {
        const m = theLab.machines.get(name);
        if (!m) throw new LabError("usage", `scenario ${s.name} has no machine "${name}"`);
        return m;
      },
    };
    for (const [i, step] of s.steps.entries()) {
      where = `step ${i + 1} "${step.title}"`;
      const t = Date.now();
      await withTimeout(step.run(ctx), (step.timeoutS ?? 120) * 1000, step.title);
      out(`  [${i + 1}/${s.steps.length}] ${step.title} … ok ${seconds(Date.now() - t)}`);
    }
    for (const m of lab.machines.values()) {
      const mem = await m.memory();
      const kind = result.raises.find((r) => r.machine === m.name)?.flavour ?? m.flavour;
      if (mem) result.memory.push({ machine: m.name, flavour: kind, when: "end", ...mem });
    }
    result.ok = true;
  } catch (error) {
    const message = lab?.stopping
      ? "interrupted"
      : error instanceof Error
      ? error.message
      : String(error);
    result.failure = `${where}: ${message}`;
    out(`  ✗ ${s.name}, ${where}:\n${indent(message)}`);
    // An interrupted lab is already being torn down: its machines have nothing to tell.
    if (lab && !lab.stopping) result.logsDir = await keepLogs(lab, s.name, options.logsRoot);
    if (result.logsDir) out(`  logs kept in ${result.logsDir}`);
  } finally {
    try {
      await lab?.stop();
    } catch (error) {
      result.ok = false;
      result.failure ??= `teardown: ${error instanceof Error ? error.message : error}`;
    }
  }
  result.ms = Date.now() - started;
  out(`${result.ok ? "✔" : "✘"} ${s.name} ${seconds(result.ms)}\n`);
  return result;
}

async function keepLogs(lab: Lab, scenario: string, root: string): Promise<string | undefined> {
  const dir = join(root, `${scenario}-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  try {
    for (const m of lab.machines.values()) await m.collectLogs(join(dir, m.name));
    const broker = lab.runningBroker;
    if (broker) {
      await Deno.mkdir(dir, { recursive: true });
      await Deno.writeTextFile(join(dir, "broker-nats.log"), await broker.logText());
    }
    const cluster = lab.runningCluster;
    for (const s of [...cluster?.servers ?? [], ...cluster?.leaves ?? []]) {
      await Deno.mkdir(dir, { recursive: true });
      await Deno.writeTextFile(join(dir, `${s.name}-nats.log`), await s.logText());
    }
    return (await Deno.stat(dir).catch(() => undefined)) ? dir : undefined;
  } catch {
    return undefined;
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new LabError("timeout", `"${what}" did not finish within ${ms / 1000} s`)),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function indent(text: string): string {
  return text.split("\n").map((l) => `    ${l}`).join("\n");
}

/** The summary table and the performance figures the issue asks for. */
export function formatSummary(results: ScenarioResult[], totalMs: number): string {
  const width = Math.max(8, ...results.map((r) => r.name.length));
  const lines = [
    `${"scenario".padEnd(width)}  result  duration`,
    ...results.map((r) =>
      `${r.name.padEnd(width)}  ${(r.skipped ? "skip" : r.ok ? "pass" : "FAIL").padEnd(6)}  ${
        seconds(r.ms).padStart(8)
      }${r.skipped ? `  (${r.skipped})` : ""}`
    ),
    "",
    `total ${seconds(totalMs)} (target for a warm run of the first three: < 60 s)`,
  ];
  const systemd = results.flatMap((r) => r.raises).filter((x) => x.flavour === "systemd")
    .map((x) => x.ms).sort((a, b) => a - b);
  if (systemd.length) {
    lines.push(
      `systemd machine raise: median ${seconds(systemd[Math.floor(systemd.length / 2)])}, ` +
        `max ${seconds(systemd.at(-1)!)} over ${systemd.length} (target < 2 s)`,
    );
  }
  const groups = new Map<string, Array<{ workingSet: number; usage: number }>>();
  for (const m of results.flatMap((r) => r.memory)) {
    const key = `${m.when} ${m.flavour}`;
    groups.set(key, [...(groups.get(key) ?? []), m]);
  }
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  for (const [key, list] of [...groups].sort(([a], [b]) => (a < b ? 1 : -1))) {
    const [when, flavour] = key.split(" ");
    const what = when === "idle"
      ? `idle ${flavour} machine memory (booted, nothing installed; cgroup, max of ${list.length})`
      : `${flavour} machine memory at the end of its scenario (the host and its work included; max of ${list.length})`;
    lines.push(
      `${what}: working set ${mib(Math.max(...list.map((x) => x.workingSet)))}, with page cache ` +
        `${mib(Math.max(...list.map((x) => x.usage)))}${
          when === "idle" && !flavour.endsWith("-aarch64") ? " (target < 40 MB)" : ""
        }`,
    );
  }
  return lines.join("\n");
}
