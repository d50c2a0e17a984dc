/**
 * The stand-in control plane's staged host rollout (lab/mesh/rollout.ts, issue 24):
 * the declarations it makes, how it reads a heartbeat, and real hosts (source form,
 * heartbeat every second) on a real broker: a rollout goes batch by batch, each batch
 * declared only once the one before heartbeats the new version; a canary whose apply
 * fails, or that goes silent, stops it and the other nodes are never declared it.
 * The rollback by a launcher is the lab's `staged-rollout` scenario.
 */
import assert from "node:assert/strict";
import {
  batchesOf,
  judge,
  rolloutHost,
  runningVersionOf,
  withHostVersion,
} from "../lab/mesh/rollout.ts";
import { VERSION } from "../src/version.ts";
import { runHost, type Scratch, scratch } from "./_helpers.ts";
import { fileResource, type HostProcess, type Mesh, spawnHost, startMesh } from "./_mesh.ts";

Deno.test("batches: the canary first, then the batch size; a version's running form drops its build", () => {
  const nodes = ["a", "b", "c", "d", "e", "f"];
  assert.deepEqual(batchesOf(nodes, 1, 2), [["a"], ["b", "c"], ["d", "e"], ["f"]]);
  assert.deepEqual(batchesOf(nodes, 2, 4), [["a", "b"], ["c", "d", "e", "f"]]);
  assert.deepEqual(batchesOf(["a"], 3, 1), [["a"]]);
  assert.throws(() => batchesOf(nodes, 0, 1), /at least 1/);
  assert.equal(runningVersionOf("0.2.0-1"), "0.2.0");
  assert.equal(runningVersionOf("0.2.0-r3"), "0.2.0");
  assert.equal(runningVersionOf("0.1.0.1"), "0.1.0.1");
});

Deno.test("a node's declaration gets the host's package at the new version; the rest is kept", () => {
  const file = fileResource("f", "/srv/f", "x\n");
  const had = {
    version: 1,
    node: "n1",
    serial: 7,
    resources: [file, { type: "package", id: "self", name: "nox-mesh-host", version: "0.1.0-1" }],
  };
  assert.deepEqual(withHostVersion(had, { version: "0.2.0-1", upgrade: "full" }), {
    version: 1,
    node: "n1",
    resources: [file, {
      type: "package",
      id: "self",
      name: "nox-mesh-host",
      version: "0.2.0-1",
      upgrade: "full",
    }],
  });
  const sha = "a".repeat(64);
  assert.deepEqual(
    withHostVersion({ version: 1, resources: [file] }, {
      version: "0.2.0",
      contentSha256: sha,
      size: 9,
    }).resources,
    [file, {
      type: "package",
      id: "host",
      name: "nox-mesh-host",
      version: "0.2.0",
      contentSha256: sha,
      size: 9,
    }],
  );
  assert.deepEqual(withHostVersion(undefined, { version: "0.2.0" }), {
    version: 1,
    resources: [{ type: "package", id: "host", name: "nox-mesh-host", version: "0.2.0" }],
  });
});

Deno.test("a heartbeat is read as upgraded, rolled back, failed or not yet", () => {
  const at = "2030-01-01T00:10:00.000Z";
  const beat = (version: string, uptimeS: number, last: [number, string] | null, serial = 5) => ({
    version,
    at,
    uptimeS,
    serial,
    last: last && { serial: last[0], outcome: last[1], at: "2030-01-01T00:09:59.000Z" },
  });
  // The new version, having taken the rollout's serial.
  assert.equal(judge(beat("0.2.0", 5, [5, "converged"]), "0.2.0", 5, true), "upgraded");
  // The old process, which has the declaration but has not restarted yet.
  assert.equal(judge(beat("0.1.0", 3600, [5, "converged"]), "0.2.0", 5, false), "waiting");
  assert.equal(judge(beat("0.1.0", 3600, [4, "converged"], 4), "0.2.0", 5, false), "waiting");
  // Started again since the serial was applied, and still the old version: rolled back
  // (its first heartbeat still shows the apply that staged the new one, or its own that
  // refused it again).
  assert.equal(judge(beat("0.1.0", 1, [5, "converged"]), "0.2.0", 5, true), "rolled-back");
  assert.equal(judge(beat("0.1.0", 20, [5, "failed"]), "0.2.0", 5, true), "rolled-back");
  // The old process failed the apply (the package is not there): failed.
  assert.equal(judge(beat("0.1.0", 3600, [5, "failed"]), "0.2.0", 5, false), "failed");
  // Started again while the apply was cut short: it applies it again.
  assert.equal(judge(beat("0.1.0", 1, [5, "interrupted"]), "0.2.0", 5, true), "waiting");
  assert.equal(judge(undefined, "0.2.0", 5, false), "waiting");
});

async function fleet(mesh: Mesh, nodes: string[]): Promise<{
  machines: Scratch[];
  hosts: HostProcess[];
  [Symbol.asyncDispose](): Promise<void>;
}> {
  const machines: Scratch[] = [];
  const hosts: HostProcess[] = [];
  for (const node of nodes) {
    const s = await scratch();
    machines.push(s);
    const run = await runHost(["enrol", "--token", "-"], {
      env: s.env,
      stdin: await mesh.control.mintToken(node),
    });
    assert.equal(run.code, 0, run.stderr);
    hosts.push(await spawnHost(["run", "--heartbeat-interval", "1"], s.env));
  }
  for (const [i, node] of nodes.entries()) {
    await hosts[i].waitLog(/link: up to /);
    await mesh.control.declare(node, {
      version: 1,
      resources: [fileResource("f", `${machines[i].root}/f`, `${node}\n`)],
    });
    await mesh.control.waitReport(node, (r) => r.kind === "apply" && r.serial === 1);
  }
  return {
    machines,
    hosts,
    async [Symbol.asyncDispose]() {
      for (const h of hosts) await h[Symbol.asyncDispose]();
      for (const s of machines) await s[Symbol.asyncDispose]();
    },
  };
}

Deno.test("a staged rollout goes batch by batch, each declared once the one before heartbeats the version", async () => {
  await using mesh = await startMesh();
  const nodes = ["r1", "r2", "r3"];
  await using f = await fleet(mesh, nodes);
  const logged: string[] = [];
  // The version these hosts run: each batch is done when its node heartbeats it with the
  // rollout's serial (their apply of the package fails: no package manager here).
  const result = await rolloutHost(
    mesh.control,
    nodes,
    { version: `${VERSION}-1`, canary: 1, batch: 1, silenceMs: 30_000, pollMs: 200 },
    (line) => logged.push(line),
  );
  assert.equal(result.outcome, "completed", JSON.stringify(result));
  assert.equal(result.running, VERSION);
  assert.deepEqual(result.batches.map((b) => [b.name, b.nodes]), [
    ["canary", ["r1"]],
    ["batch 2", ["r2"]],
    ["batch 3", ["r3"]],
  ]);
  for (const [i, batch] of result.batches.entries()) {
    assert.equal(batch.outcome, "upgraded");
    const node = batch.nodes[0];
    assert.equal(batch.serials[node], 2);
    assert.equal(batch.nodeState[node].version, VERSION);
    // Published only after the batch before had heartbeat the version.
    const before = result.batches[i - 1];
    if (before) {
      assert.ok(
        Date.parse(batch.publishedAt) >= Date.parse(before.nodeState[before.nodes[0]].upgradedAt!),
        `${batch.name} published before ${before.name} was done`,
      );
    }
    // Its declaration: what it held, and the host's package at the version.
    const last = JSON.parse((await mesh.control.lastDeclaration(node))!.body);
    assert.deepEqual(last.resources, [
      fileResource("f", `${f.machines[i].root}/f`, `${node}\n`),
      { type: "package", id: "host", name: "nox-mesh-host", version: `${VERSION}-1` },
    ]);
  }
  assert.match(logged.join("\n"), /canary: declared nox-mesh-host .* to r1/);
});

Deno.test("a canary whose apply fails, or that is silent, stops the rollout: the other nodes are never declared it", async () => {
  await using mesh = await startMesh();
  const nodes = ["s1", "s2", "s3"];
  await using f = await fleet(mesh, nodes);
  const serialOf = async (node: string) =>
    JSON.parse((await mesh.control.lastDeclaration(node))!.body).serial;

  // A version none of them runs, which their apply cannot install: stopped at the canary.
  const failed = await rolloutHost(mesh.control, nodes, {
    version: "99.0.0-1",
    canary: 1,
    batch: 2,
    silenceMs: 30_000,
    pollMs: 200,
  });
  assert.equal(failed.outcome, "stopped");
  assert.deepEqual(failed.batches.map((b) => [b.name, b.outcome]), [["canary", "stopped"]]);
  assert.deepEqual(failed.stoppedBy.map((s) => [s.node, s.why]), [["s1", "failed"]]);
  // Why, from the node's report: the resource that failed and its error (no package
  // provider where the machine has none the build carries; on a Debian machine, apt's
  // own answer that no repository offers that version).
  assert.match(
    failed.stoppedBy[0].detail,
    /^its apply of serial 2 failed: package host: (no provider on this machine for package resources|apt: no configured repository offers nox-mesh-host=99\.0\.0-1)\b.*; it runs \S+$/,
  );
  assert.deepEqual(failed.untouched, ["s2", "s3"]);
  assert.deepEqual([await serialOf("s2"), await serialOf("s3")], [1, 1]);

  // A canary whose host has stopped: silent, and the rollout stops.
  assert.equal(await f.hosts[1].stop(), 0);
  const silent = await rolloutHost(mesh.control, ["s2", "s3"], {
    version: `${VERSION}-1`,
    canary: 1,
    silenceMs: 3000,
    pollMs: 200,
  });
  assert.equal(silent.outcome, "stopped");
  assert.deepEqual(silent.stoppedBy.map((s) => [s.node, s.why]), [["s2", "silent"]]);
  assert.match(silent.stoppedBy[0].detail, /no heartbeat for \d+ s \(last .*, running /);
  assert.deepEqual(silent.untouched, ["s3"]);
  assert.equal(await serialOf("s3"), 1);
});
