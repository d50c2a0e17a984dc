import type { Flavour, MachineArch } from "./base.ts";
import type { HostFrom, PlacedFile } from "./machine.ts";
import { LabError } from "./errors.ts";
import { fail, shown, type Step } from "./_step.ts";
import { sleep } from "./_process.ts";

/** A machine a scenario raises. */
export interface ScenarioMachine {
  flavour: Flavour;
  /** Install the host from its real package (lab/lib/host.ts) before the first step. */
  host?: boolean;
  /** Files placed before the machine boots: path → text, {content, mode} or {symlink}. */
  files?: Record<string, PlacedFile>;
  /** systemd: boot so that podman can run containers inside (see MachineSpec.containers). */
  containers?: boolean;
  /** How the host comes onto it (see MachineSpec.hostFrom). */
  hostFrom?: HostFrom;
  /** false: a root with no glibc, busybox-static and musl only (see MachineSpec.glibc). */
  glibc?: boolean;
  /** false: no deno anywhere on the machine (see MachineSpec.deno). */
  deno?: boolean;
  /** On the site's network, behind its leaf server (see MachineSpec.site). */
  site?: boolean;
  /** "aarch64": an arm64 machine under QEMU's user-mode emulation (see MachineSpec.arch). */
  arch?: MachineArch;
}

/** A scenario: machines, what is placed on them, then named steps. */
export interface Scenario {
  name: string;
  summary: string;
  machines: Record<string, ScenarioMachine>;
  /** Start the lab broker before the first step. */
  broker?: boolean;
  /**
   * Why this scenario cannot run on this host (a missing facility, said with what to do),
   * or undefined when it can; asked before anything is raised. A skipped scenario is
   * listed as skipped with its reason, and does not fail the run.
   */
  skip?: () => Promise<string | undefined>;
  /**
   * Why this scenario runs only when named (or with --all): what it costs. A run of every
   * scenario lists it as skipped with this reason and the command that runs it.
   */
  optIn?: string;
  steps: Step[];
}

/** Formats a value as JSON text for a placed file. */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2) + "\n";
}

/** Runs argv on a machine; expects exit 0 (or `code`) and, if given, text in stdout. */
export function run(
  machine: string,
  argv: string[],
  expect: { code?: number; stdoutIncludes?: string } = {},
): Step {
  return {
    title: `run on ${machine}: ${argv.join(" ")}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(argv);
      const code = expect.code ?? 0;
      if (r.code !== code) fail(`exit ${code}`, `exit ${r.code}, stderr ${shown(r.stderr)}`);
      if (expect.stdoutIncludes !== undefined && !r.stdout.includes(expect.stdoutIncludes)) {
        fail(`stdout containing ${JSON.stringify(expect.stdoutIncludes)}`, shown(r.stdout));
      }
    },
  };
}

/** Runs argv on a machine and expects it to fail (any non-zero exit, or exactly `code`). */
export function assertFails(
  machine: string,
  argv: string[],
  expect: { code?: number; stderrIncludes?: string } = {},
): Step {
  return {
    title: `assert fails on ${machine}: ${argv.join(" ")}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(argv);
      if (r.code === 0) fail("a failure", `exit 0, stdout ${shown(r.stdout)}`);
      if (expect.code !== undefined && r.code !== expect.code) {
        fail(`exit ${expect.code}`, `exit ${r.code}, stderr ${shown(r.stderr)}`);
      }
      if (expect.stderrIncludes && !(r.stderr + r.stdout).includes(expect.stderrIncludes)) {
        fail(`output containing ${JSON.stringify(expect.stderrIncludes)}`, shown(r.stderr));
      }
    },
  };
}

/** Writes a file on a machine (a step, for changes in the middle of a scenario). */
export function writeFile(machine: string, path: string, content: string, mode = "0644"): Step {
  return {
    title: `write ${path} on ${machine}`,
    run: (ctx) => ctx.machine(machine).writeFile(path, content, mode),
  };
}

/** Cuts a machine's link to the lab switch. */
export function cutLink(machine: string): Step {
  return {
    title: `cut the link of ${machine}`,
    run: (ctx) => ctx.lab.cutLink(ctx.machine(machine)),
  };
}

/** Restores a machine's link. */
export function restoreLink(machine: string): Step {
  return {
    title: `restore the link of ${machine}`,
    run: (ctx) => ctx.lab.restoreLink(ctx.machine(machine)),
  };
}

/** Retries `step` until it passes or `timeoutS` runs out; fails with its last error. */
export function waitFor(step: Step, timeoutS: number, intervalMs = 250): Step {
  return {
    title: `wait ≤ ${timeoutS} s for: ${step.title}`,
    timeoutS: timeoutS + 30,
    async run(ctx) {
      const deadline = Date.now() + timeoutS * 1000;
      for (;;) {
        try {
          return await step.run(ctx);
        } catch (error) {
          if (Date.now() > deadline) {
            throw new LabError(
              "assertion-failed",
              `not within ${timeoutS} s: ${error instanceof Error ? error.message : error}`,
            );
          }
        }
        await sleep(intervalMs);
      }
    },
  };
}

/** Asserts a machine reaches (or cannot reach) the lab broker with a TLS NATS client. */
export function assertBroker(machine: string, reachable: boolean): Step {
  return {
    title: `assert ${machine} ${reachable ? "reaches" : "cannot reach"} the broker`,
    async run(ctx) {
      const verdict = await ctx.lab.probeBroker(ctx.machine(machine));
      if (verdict.ok !== reachable) {
        fail(
          reachable ? "a NATS round trip over TLS" : "no connection",
          verdict.ok ? "a working connection" : `failure: ${verdict.error}`,
        );
      }
    },
  };
}

export { fail, type Step, type StepContext } from "./_step.ts";
export { apply, assertFile, assertPackage, assertUnit } from "./_assertions.ts";
