import { hostCommand } from "./host.ts";
import { fail, type Step } from "./_step.ts";

/** What an apply must report (host-contract.md `apply --json`). */
export interface ApplyExpectation {
  exitCode?: number;
  outcome?: "converged" | "failed" | "refused";
  changed?: number;
  unchanged?: number;
  removed?: number;
  forgotten?: number;
  failed?: number;
  /** Text the report's `error` must contain. */
  errorIncludes?: string;
  /**
   * `apply --bundle --json FILE` (the trusted parse, actions allowed) instead of the
   * piped file: the host reads FILE itself, so it must lie in a managed root (e.g. /srv).
   */
  bundle?: boolean;
}

/**
 * Runs `nox-mesh-host apply --json -` on a machine with FILE (a path in the machine) on
 * its stdin, and checks its report. Piped, because the host's permission set lets it
 * read only what it manages (a declaration in /root is not), as a person would do.
 */
export function apply(machine: string, file: string, expect: ApplyExpectation): Step {
  const wants = Object.entries(expect).filter(([k]) => k !== "bundle").map(([k, v]) => `${k}=${v}`)
    .join(" ");
  return {
    title: `apply ${expect.bundle ? "--bundle " : ""}${file} on ${machine} (expect ${wants})`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const r = await m.exec([
        "/bin/sh",
        "-c",
        expect.bundle ? 'exec "$1" apply --bundle --json "$2"' : 'exec "$1" apply --json - < "$2"',
        "lab-apply",
        hostCommand(m),
        file,
      ]);
      const exitCode = expect.exitCode ??
        (expect.outcome === "refused" ? 2 : expect.outcome === "failed" ? 1 : 0);
      let report: {
        outcome?: string;
        counts?: Record<string, number>;
        results?: Array<{ id: string; outcome: string; detail?: string }>;
        error?: unknown;
      };
      try {
        report = JSON.parse(r.stdout);
      } catch {
        fail(
          "one JSON report on stdout",
          `exit ${r.code}, stdout ${r.stdout.slice(0, 400)}, ` +
            `stderr ${r.stderr.slice(0, 400)}`,
        );
      }
      const results = (report.results ?? []).map((x) => `${x.id}:${x.outcome}`).join(" ");
      const seen = `exit ${r.code}, outcome ${report.outcome}, counts ${
        JSON.stringify(report.counts)
      }, results [${results}]${r.stderr ? `, stderr ${r.stderr.trim().slice(0, 300)}` : ""}`;
      if (r.code !== exitCode) fail(`exit ${exitCode}`, seen);
      if (expect.outcome && report.outcome !== expect.outcome) {
        fail(`outcome ${expect.outcome}`, seen);
      }
      if (expect.errorIncludes !== undefined) {
        const error = JSON.stringify(report.error ?? null);
        if (!error.includes(expect.errorIncludes)) {
          fail(`an error mentioning ${JSON.stringify(expect.errorIncludes)}`, `error ${error}`);
        }
      }
      for (const key of ["changed", "unchanged", "removed", "forgotten", "failed"] as const) {
        const want = expect[key];
        if (want !== undefined && report.counts?.[key] !== want) fail(`${key}=${want}`, seen);
      }
    },
  };
}

/** What a file or directory must look like; `absent` asserts it does not exist. */
export interface FileExpectation {
  absent?: boolean;
  type?: "file" | "directory";
  content?: string;
  /** Octal, e.g. "0644". */
  mode?: string;
  owner?: string;
  group?: string;
}

/** Asserts the state of a path on a machine. */
export function assertFile(machine: string, path: string, expect: FileExpectation): Step {
  const wants = expect.absent ? "absent" : Object.keys(expect).join(", ");
  return {
    title: `assert ${path} on ${machine} (${wants})`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const st = await m.exec(["stat", "-c", "%F|%a|%U|%G", "--", path]);
      if (expect.absent) {
        if (st.code === 0) fail(`${path} absent`, `it exists (${st.stdout.trim()})`);
        return;
      }
      if (st.code !== 0) fail(`${path} to exist`, st.stderr.trim());
      const [kind, mode, owner, group] = st.stdout.trim().split("|");
      const type = kind === "directory" ? "directory" : kind.includes("regular") ? "file" : kind;
      if (expect.type && type !== expect.type) fail(`a ${expect.type}`, `a ${kind}`);
      if (expect.mode && parseInt(mode, 8) !== parseInt(expect.mode, 8)) {
        fail(`mode ${expect.mode}`, `mode 0${mode}`);
      }
      if (expect.owner && owner !== expect.owner) fail(`owner ${expect.owner}`, `owner ${owner}`);
      if (expect.group && group !== expect.group) fail(`group ${expect.group}`, `group ${group}`);
      if (expect.content !== undefined) {
        const content = await m.readFile(path);
        if (content !== expect.content) {
          fail(`content ${JSON.stringify(expect.content)}`, JSON.stringify(content.slice(0, 400)));
        }
      }
    },
  };
}

/** Asserts a service's state through the machine's own init (systemd or OpenRC). */
export function assertUnit(
  machine: string,
  name: string,
  expect: { running?: boolean; enabled?: boolean },
): Step {
  return {
    title: `assert service ${name} on ${machine} (${
      Object.entries(expect).map(([k, v]) => `${k}=${v}`).join(" ")
    })`,
    async run(ctx) {
      const m = ctx.machine(machine);
      const systemd = m.flavour === "systemd";
      if (expect.running !== undefined) {
        const r = systemd
          ? await m.exec(["systemctl", "is-active", "--quiet", name])
          : await m.exec(["rc-service", name, "status"]);
        const running = r.code === 0;
        if (running !== expect.running) {
          fail(
            expect.running ? "running" : "stopped",
            `${running ? "running" : "not running"} ` +
              `(exit ${r.code} ${r.stdout.trim()} ${r.stderr.trim()})`,
          );
        }
      }
      if (expect.enabled !== undefined) {
        const r = systemd
          ? await m.exec(["systemctl", "is-enabled", "--quiet", name])
          : await m.exec(["sh", "-c", 'rc-update show default | grep -qw -- "$1"', "sh", name]);
        const enabled = r.code === 0;
        if (enabled !== expect.enabled) {
          fail(expect.enabled ? "enabled" : "disabled", enabled ? "enabled" : "not enabled");
        }
      }
    },
  };
}

/** Asserts a package is installed (at `version`, if given) or absent: dpkg's, or pacman's. */
export function assertPackage(
  machine: string,
  name: string,
  expect: { version?: string; absent?: boolean } = {},
): Step {
  return {
    title: `assert package ${name}${expect.absent ? " absent" : ""}${
      expect.version ? ` ${expect.version}` : ""
    } on ${machine}`,
    async run(ctx) {
      const m = ctx.machine(machine);
      // The Arch-like machine's packages are pacman's; the others' (Debian) dpkg's.
      const apt = m.hostFrom !== "pacman";
      const r = await m.exec(
        apt
          ? ["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", name]
          : ["pacman", "-Q", name],
      );
      const installed = r.code === 0 && (!apt || r.stdout.startsWith("installed "));
      if (expect.absent) {
        if (installed) fail(`${name} not installed`, r.stdout.trim());
        return;
      }
      if (!installed) {
        fail(
          `${name} installed`,
          `${apt ? "dpkg-query" : "pacman -Q"}: ${(r.stderr || r.stdout).trim()}`,
        );
      }
      const version = r.stdout.trim().split(/\s+/)[1];
      if (expect.version && version !== expect.version) {
        fail(`${name} ${expect.version}`, `${name} ${version}`);
      }
    },
  };
}
