import { aarch64Missing } from "../lib/base.ts";
import {
  apply,
  assertFile,
  assertUnit,
  fail,
  run,
  type Scenario,
  type Step,
  waitFor,
} from "../lib/scenario.ts";
import { runtimePins } from "../../packaging/tarball/runtime.ts";
import { assertNoDeno, installFromReadme } from "./tarball_floor.ts";
import { assertLaunched, assertServiceSaid, CURRENT, STATE } from "./_ship.ts";

const M = "arm";
const DENO = (await runtimePins()).version;
/** Where the lab serves the aarch64 build's tarball, SHA256SUMS and its signature. */
const RELEASE = "file:///lab/tarball-aarch64";

const DIR = {
  type: "directory",
  id: "dir",
  path: "/srv/arm64",
  mode: "0750",
  owner: "root",
  group: "root",
};
const FILE = {
  type: "file",
  id: "file",
  path: "/srv/arm64/hello.txt",
  content: "applied on an aarch64 machine\n",
  mode: "0640",
  owner: "root",
  group: "root",
};
const CONF = {
  type: "file",
  id: "conf",
  path: "/etc/arm64-check.conf",
  content: "x = 1\n",
  mode: "0644",
  owner: "root",
  group: "root",
};
const DECLARATION = "/root/arm64-declaration.json";
const doc = (resources: unknown[]) => JSON.stringify({ version: 1, resources }) + "\n";

/** A step of its own timeout: each start of the emulated host takes seconds. */
function slow(step: Step, timeoutS = 600): Step {
  return { ...step, timeoutS };
}

/** `nox-mesh-host <command> --json` on the machine, one JSON object checked by `check`. */
function jsonOf(
  argv: string[],
  what: string,
  check: (answer: Record<string, unknown>) => string | undefined,
): Step {
  return slow({
    title: `run on ${M}: nox-mesh-host ${argv.join(" ")} (${what})`,
    async run(ctx) {
      const r = await ctx.machine(M).exec(["nox-mesh-host", ...argv], { timeoutMs: 300_000 });
      let answer: Record<string, unknown>;
      try {
        answer = JSON.parse(r.stdout);
      } catch {
        fail("one JSON object on stdout", `exit ${r.code}, ${r.stdout.slice(0, 300)} ${r.stderr}`);
      }
      const wrong = r.code === 0 ? check(answer) : `exit ${r.code}`;
      if (wrong) fail(what, `${wrong}: ${r.stdout.slice(0, 600)}`);
    },
  });
}

/**
 * An arm64 Debian machine under QEMU's user-mode emulation: binfmt_misc runs its every
 * program with Debian's qemu-aarch64 (its F flag: the interpreter was opened when it was
 * registered, so it works inside the machine's root). systemd boots as PID 1 in nspawn as on
 * the other systemd machines; nothing of this host's architecture is inside.
 */
export const scenario: Scenario = {
  name: "arm64-tarball",
  summary: "an arm64 Debian machine (mmdebstrap --arch=arm64), booted with systemd in nspawn " +
    "under QEMU's user-mode emulation (binfmt_misc), with no deno: the README's two lines " +
    "install the aarch64 tarball; `version --json` says aarch64 and the carried runtime, " +
    "`profile --json` says aarch64; files and directories applied (converged), applied again " +
    "(unchanged); the unit runs the launcher, whose host holds the machine to that declaration " +
    "and puts back a declared file a person removed. " +
    "Skipped when binfmt_misc has no qemu-aarch64 entry",
  skip: aarch64Missing,
  // Its arm64 image takes mmdebstrap about 6.5 min under emulation on a 2-core machine the
  // first time (CI's machines are fresh), for a scenario of about 70 s.
  optIn: "it builds an arm64 image under emulation once, about 6.5 min on 2 cores",
  machines: {
    [M]: {
      flavour: "systemd",
      arch: "aarch64",
      hostFrom: "tarball",
      deno: false,
      files: {
        [DECLARATION]: doc([DIR, FILE, CONF]),
        // The service's drift check every 10 s (default 600): it repairs within the scenario.
        "/etc/mesh-host/host.json": JSON.stringify({ driftIntervalSeconds: 10 }) + "\n",
      },
    },
  },
  steps: [
    run(M, ["uname", "-m"], { stdoutIncludes: "aarch64" }),
    run(M, ["sh", "-c", 'od -An -tu2 -j18 -N2 "$(command -v systemctl)"'], {
      stdoutIncludes: "183", // EM_AARCH64: the machine's own programs are arm64
    }),
    assertNoDeno(M, "before the install"),
    // The README's first line (curl | tar), then the host as a command, before its service.
    slow(installFromReadme(M, RELEASE)[0]),
    jsonOf(
      ["version", "--json"],
      "aarch64, bundled, the carried runtime",
      (v) =>
        v.version !== CURRENT
          ? `version ${v.version}`
          : v.arch !== "aarch64"
          ? `arch ${v.arch}`
          : v.form !== "bundled" || v.deno !== DENO
          ? `form ${v.form}, deno ${v.deno}`
          : undefined,
    ),
    jsonOf(
      ["profile", "--json"],
      "architecture aarch64",
      (p) => p.architecture === "aarch64" ? undefined : `architecture ${p.architecture}`,
    ),
    slow(apply(M, DECLARATION, { outcome: "converged", changed: 3, unchanged: 0 })),
    slow(apply(M, DECLARATION, { outcome: "converged", changed: 0, unchanged: 3 })),
    assertFile(M, "/srv/arm64", { type: "directory", mode: "0750" }),
    assertFile(M, "/srv/arm64/hello.txt", {
      content: "applied on an aarch64 machine\n",
      mode: "0640",
    }),
    // The README's second line: the unit, enabled and started; the launcher runs the host.
    slow(installFromReadme(M, RELEASE)[1]),
    assertUnit(M, "nox-mesh-host", { running: true, enabled: true }),
    slow(waitFor(assertFile(M, `${STATE}/known-good`, { content: `${CURRENT}\n` }), 300)),
    assertLaunched(M),
    // At its start the host holds the machine to the declaration in its store (the one
    // applied above): nothing to change.
    assertServiceSaid(M, "apply (start, file): converged: 0 changed, 3 unchanged, 0 removed", 1),
    // A person removes a declared file: the service's drift check puts it back.
    run(M, ["rm", "/srv/arm64/hello.txt"]),
    waitFor(
      assertFile(M, "/srv/arm64/hello.txt", {
        content: "applied on an aarch64 machine\n",
        mode: "0640",
      }),
      90,
    ),
    waitFor(assertServiceSaid(M, "converged: 1 changed, 2 unchanged, 0 removed, 0 failed", 1), 30),
    assertNoDeno(M, "on PATH after the install"),
  ],
};
