/**
 * Scenario steps of a staged host rollout (scenario `staged-rollout`,
 * lab/mesh/rollout.ts): the tarball of a host build into the object store, the
 * control plane's `rollout-host` over light nodes, and what the nodes then run.
 */
import { join } from "node:path";
import { run } from "../lib/_process.ts";
import { CHECKOUT } from "../lib/bundle.ts";
import { HOST_VERSIONS, type HostBuild, hostTarball } from "../lib/host_builds.ts";
import { fail, type Step } from "../lib/scenario.ts";
import { meshArgs, putContent } from "./link_steps.ts";
import { PLAIN_HOST_LOG } from "./fleet_steps.ts";
import type { HostRolloutResult } from "../mesh/rollout.ts";

/** The tarballs put into the object store: digest and size, by build. */
const tarballs: Partial<Record<HostBuild, { sha256: string; size: number }>> = {};

/** The digest and size of a build's tarball put by putHostTarball (a step fails without it). */
export function putTarball(which: HostBuild): { sha256: string; size: number } {
  const tarball = tarballs[which];
  if (!tarball) fail(`the ${which} tarball put first`, "none");
  return tarball;
}

/** The last rollout's result, for the steps that look at it. */
let last: HostRolloutResult | undefined;

/** The control plane puts a build's tarball into the mesh's object store. */
export function putHostTarball(which: HostBuild): Step {
  return {
    title: `the control plane puts the tarball of ${HOST_VERSIONS[which]} (${which} build) ` +
      "into the mesh's object store",
    timeoutS: 600,
    async run(ctx) {
      const bytes = await Deno.readFile(await hostTarball(ctx.lab.log, which));
      await putContent(`the ${which} tarball`, () => bytes, (sha256) => {
        tarballs[which] = { sha256, size: bytes.length };
      }).run(ctx);
    },
  };
}

/**
 * `deno task mesh rollout-host` of a build's version (by its tarball's digest) over
 * `nodes`, the first `canary`, then `batch` at a time; `expect` is whether it completes
 * or stops (exit 1, naming the nodes).
 */
export function rolloutHostBuild(
  nodes: string[],
  which: HostBuild,
  { canary, batch, silenceS = 120, expect }: {
    canary: number;
    batch: number;
    silenceS?: number;
    expect: "completed" | "stopped";
  },
): Step {
  return {
    title: `the control plane rolls ${
      HOST_VERSIONS[which]
    } (${which} build) out to ${nodes.length} nodes: a canary of ${canary}, then ${batch} at a time; it ${
      expect === "completed" ? "completes" : "stops"
    }`,
    timeoutS: 900,
    async run(ctx) {
      const tarball = putTarball(which);
      const args = [
        "rollout-host",
        "--version",
        HOST_VERSIONS[which],
        "--sha256",
        tarball.sha256,
        "--size",
        String(tarball.size),
        "--canary",
        String(canary),
        "--batch",
        String(batch),
        "--silence",
        String(silenceS),
        "--timeout",
        "600",
        ...nodes,
      ];
      const r = await run(["/usr/bin/nsenter", ...meshArgs(ctx, args)], {
        cwd: CHECKOUT,
        timeoutMs: 880_000,
        check: false,
      });
      for (const line of r.stderr.split("\n").filter((l) => l.startsWith("rollout: "))) {
        ctx.lab.log(line);
      }
      try {
        last = JSON.parse(r.stdout) as HostRolloutResult;
      } catch {
        fail("the rollout's result (JSON)", `exit ${r.code}: ${r.stderr.trim().slice(-800)}`);
      }
      await Deno.writeTextFile(
        join(ctx.lab.dir, "mesh", `rollout-${which}.json`),
        JSON.stringify(last, null, 2),
      );
      const code = expect === "completed" ? 0 : 1;
      if (last.outcome !== expect || r.code !== code) {
        fail(
          `the rollout ${expect} (exit ${code})`,
          `${last.outcome}, exit ${r.code}: ${r.stderr.trim().slice(-800)}`,
        );
      }
    },
  };
}

/** The last rollout went in these batches (node names), each with `outcome`. */
export function assertBatches(
  expected: string[][],
  outcomes: ("upgraded" | "stopped")[],
): Step {
  return {
    title: `assert the rollout went in batches ${
      expected.map((b) => `[${b.join(", ")}]`).join(" ")
    }`,
    run() {
      if (!last) return fail("a rollout first", "none");
      const got = last.batches.map((b) => b.nodes);
      if (JSON.stringify(got) !== JSON.stringify(expected)) {
        fail(`batches ${JSON.stringify(expected)}`, JSON.stringify(got));
      }
      const said = last.batches.map((b) => b.outcome);
      if (JSON.stringify(said) !== JSON.stringify(outcomes)) {
        fail(`outcomes ${outcomes.join(", ")}`, said.join(", "));
      }
      // Each batch was declared only once the one before had every node on the version.
      for (const [i, b] of last.batches.entries()) {
        const before = last.batches[i - 1];
        if (!before) continue;
        const done = Math.max(
          ...before.nodes.map((n) => Date.parse(before.nodeState[n].upgradedAt ?? "")),
        );
        if (!(Date.parse(b.publishedAt) >= done)) {
          fail(`${b.name} declared after ${before.name} was done`, `${b.publishedAt} < ${done}`);
        }
      }
      return Promise.resolve();
    },
  };
}

/** The last rollout was stopped by exactly these nodes, for this reason, and left `untouched`. */
export function assertStoppedBy(nodes: string[], why: string, untouched: string[]): Step {
  return {
    title: `assert the rollout was stopped by ${nodes.join(", ")} (${why}); ${
      untouched.join(", ")
    } never declared it`,
    run() {
      if (!last) return fail("a rollout first", "none");
      const got = last.stoppedBy.map((s) => `${s.node}:${s.why}`).sort();
      const wanted = nodes.map((n) => `${n}:${why}`).sort();
      if (JSON.stringify(got) !== JSON.stringify(wanted)) {
        fail(`stopped by ${wanted.join(", ")}`, JSON.stringify(last.stoppedBy));
      }
      if (JSON.stringify(last.untouched) !== JSON.stringify(untouched)) {
        fail(`untouched ${untouched.join(", ")}`, last.untouched.join(", "));
      }
      return Promise.resolve();
    },
  };
}

/** `node`'s host log (light node) says `text` exactly `times` times (at least once: `min`). */
export function assertHostLogSays(
  node: string,
  text: string,
  times: number | { min: number },
): Step {
  return {
    title: `assert ${node}'s host log says "${text}" ${
      typeof times === "number" ? `${times} time(s)` : `at least ${times.min} time(s)`
    }`,
    async run(ctx) {
      const log = (await ctx.machine(node).exec(["cat", PLAIN_HOST_LOG])).stdout;
      const n = log.split(text).length - 1;
      const ok = typeof times === "number" ? n === times : n >= times.min;
      if (!ok) fail(`"${text}" ${JSON.stringify(times)}`, `${n} time(s)`);
    },
  };
}
