// Shared bits of the overlay, firewall and conntrack scenarios.
import { hostCommand } from "../lib/host.ts";
import { fail, shown, type Step, type StepContext } from "../lib/_step.ts";
import { hostUnit } from "../mesh_steps/link_steps.ts";

/** The link scenarios' unit, with a short drift interval so a reconcile comes soon. */
export function driftUnitFiles(driftSeconds = 10): Record<string, string> {
  const unit = hostUnit().replace(
    /^(ExecStart=.* run) /m,
    `$1 --drift-interval ${driftSeconds} `,
  );
  if (!unit.includes(`--drift-interval ${driftSeconds}`)) throw new Error("no ExecStart to extend");
  return { "/etc/systemd/system/nox-mesh-host.service": unit };
}

/** Runs argv on a machine; its stdout must match `pattern` (a wait step retries it). */
export function assertOutput(
  machine: string,
  argv: string[],
  pattern: RegExp,
  title?: string,
): Step {
  return {
    title: title ?? `assert on ${machine}: ${argv.join(" ")} prints ${pattern}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(argv);
      if (r.code !== 0) fail("exit 0", `exit ${r.code}, stderr ${shown(r.stderr)}`);
      if (!pattern.test(r.stdout)) fail(`output matching ${pattern}`, shown(r.stdout));
    },
  };
}

/** Runs argv on a machine; it must fail (a wait step retries it). */
export function assertNotOutput(machine: string, argv: string[], title: string): Step {
  return {
    title,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(argv);
      if (r.code === 0) fail("a failure", `exit 0, stdout ${shown(r.stdout)}`);
    },
  };
}

/** `plan` of a placed declaration file on a machine; its output must match `pattern`. */
export function assertPlan(machine: string, file: string, pattern: RegExp): Step {
  return {
    title: `plan ${file} on ${machine} says ${pattern}`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const r = await m.exec([
        "/bin/sh",
        "-c",
        'exec "$1" plan - < "$2"',
        "lab-plan",
        hostCommand(m),
        file,
      ]);
      if (!pattern.test(r.stdout + r.stderr)) {
        fail(`plan output matching ${pattern}`, `exit ${r.code}: ${shown(r.stdout + r.stderr)}`);
      }
    },
  };
}

/** Starts a TCP listener (busybox nc as a persistent server, under systemd) on a machine's port. */
export function listen(machine: string, port: number): Step {
  return {
    title: `listen on TCP ${port} on ${machine}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec([
        "systemd-run",
        `--unit=lab-listen-${port}`,
        "--property=Restart=always",
        "--property=RestartSec=200ms",
        "/bin/busybox",
        "nc",
        "-ll",
        "-p",
        String(port),
        "-e",
        "/bin/echo",
        "open",
      ]);
      if (r.code !== 0) fail("the listener to start", `exit ${r.code}: ${shown(r.stderr)}`);
    },
  };
}

/** A machine's lab address. */
export function addressOf(ctx: StepContext, machine: string): string {
  const address = ctx.machine(machine).address;
  if (!address) fail(`${machine} to have a lab address`, "none");
  return address;
}

/** A TCP connection from `machine` to target:port is answered ("open") or not, as `expect` says. */
export function assertConnect(
  machine: string,
  target: string,
  port: number,
  expect: boolean,
): Step {
  return {
    title: `assert ${machine} -> ${target}:${port} is ${expect ? "answered" : "refused (dropped)"}`,
    async run(ctx) {
      const host = addressOf(ctx, target);
      const r = await ctx.machine(machine).exec([
        "/bin/busybox",
        "timeout",
        "5",
        "/bin/busybox",
        "nc",
        "-w",
        "3",
        host,
        String(port),
      ]);
      const answered = r.stdout.includes("open");
      if (answered !== expect) {
        fail(expect ? "an answer" : "no answer", `exit ${r.code}, stdout ${shown(r.stdout)}`);
      }
    },
  };
}
