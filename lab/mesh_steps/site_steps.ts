/**
 * Scenario steps for a site behind a leaf server (scenario site): the leaf comes
 * up in its own namespace between the lab switch and the site's switch, its
 * uplink is cut and restored, and a site machine is shown to have no route but
 * through it.
 */
import { join } from "node:path";
import type { Lab } from "../lib/lab.ts";
import type { NatsServer } from "../lib/cluster.ts";
import { SITE_PREFIX } from "../lib/net.ts";
import { run, until } from "../lib/_process.ts";
import { fail, type Step } from "../lib/scenario.ts";
import { addLeaf, operatorLines } from "../mesh/local_broker.ts";
import { publicKeys } from "../mesh/operator.ts";
import { readState } from "../mesh/state.ts";
import { clusterOf, fleetDeclaration } from "./fleet_steps.ts";
import { mesh } from "./link_steps.ts";
import type { RolloutRow } from "../mesh/fleet.ts";

/**
 * A site's leaf server comes up: its own namespace with an uplink on the lab switch
 * and a link on the site's switch (10.251.0.2); the mesh's operator trusted with its
 * accounts preloaded; the nodes' and the join account each bound over a leaf connection
 * to the cluster, logging in as users of signing keys scoped to the site (their creds
 * files made by the control plane, which records the leaf: `tokens --via NAME` name it,
 * and pushes the site's scope to every server first; no server reloads).
 */
export function siteLeafUp(): Step {
  return {
    title: "a site's leaf server comes up (its site's scoped users into the nodes' and " +
      "the join account, no JetStream)",
    timeoutS: 60,
    async run(ctx) {
      const cluster = clusterOf(ctx.lab);
      const dir = join(ctx.lab.dir, "mesh");
      const leaf = await cluster.startLeaf(
        await ctx.lab.site(),
        `${SITE_PREFIX}.2`,
        async (facts) => {
          const login = await addLeaf(dir, facts.name, {
            url: facts.url,
            pin: facts.pin,
            pidFile: facts.pidFile,
            logFile: facts.logFile,
          }, async () => void await mesh(ctx, ["accounts"]));
          const keys = publicKeys((await readState(dir)).operator);
          return {
            remotes: [
              { account: keys.nodes, credentials: login.nodes },
              { account: keys.join, credentials: login.join },
            ],
            extra: operatorLines(facts.configFile, dir, "memory"),
          };
        },
      );
      await until("the leaf's two connections to the cluster", 30_000, async () => {
        const leafz = await leaf.monitor("leafz").catch(() => undefined);
        return Number(leafz?.leafnodes ?? 0) >= 2 ? true : undefined;
      });
    },
  };
}

function leafOf(lab: Lab): NatsServer {
  const leaf = clusterOf(lab).leaves[0];
  if (!leaf) fail("a site's leaf server", "none (siteLeafUp first)");
  return leaf;
}

/** Pulls the leaf's uplink: its eth0 goes down inside its namespace. */
export function cutLeafUplink(): Step {
  return {
    title: "cut the leaf's uplink (ip link set eth0 down in its namespace)",
    async run(ctx) {
      const r = await run([
        "/usr/sbin/ip",
        "-n",
        leafOf(ctx.lab).netns,
        "link",
        "set",
        "eth0",
        "down",
      ], {
        check: false,
      });
      if (r.code !== 0) fail("the uplink down", r.stderr.trim());
    },
  };
}

/** Plugs the leaf's uplink back in (its address and route come back with the link). */
export function restoreLeafUplink(): Step {
  return {
    title: "restore the leaf's uplink",
    async run(ctx) {
      const leaf = leafOf(ctx.lab);
      const r = await run(["/usr/sbin/ip", "-n", leaf.netns, "link", "set", "eth0", "up"], {
        check: false,
      });
      if (r.code !== 0) fail("the uplink up", r.stderr.trim());
    },
  };
}

/** The leaf reports its connections to the cluster (`/leafz`), or none. */
export function assertLeafConnected(connected: boolean): Step {
  return {
    title: `assert the leaf ${connected ? "is" : "is not"} connected to the cluster`,
    async run(ctx) {
      const leafz = await leafOf(ctx.lab).monitor("leafz");
      const n = Number(leafz.leafnodes ?? 0);
      if ((n > 0) !== connected) fail(connected ? "a leaf connection" : "none", `${n}`);
    },
  };
}

/** A site machine has no route to any server of the cluster (only to its leaf). */
export function assertOnlyThroughLeaf(machine: string): Step {
  return {
    title: `assert ${machine} has no route to the cluster's servers, only to the leaf`,
    async run(ctx) {
      const m = ctx.machine(machine);
      for (const s of clusterOf(ctx.lab).servers) {
        const r = await m.exec(["ip", "route", "get", s.address]);
        if (r.code === 0) fail(`no route to ${s.address}`, r.stdout.trim());
      }
      const r = await m.exec(["ip", "route", "get", leafOf(ctx.lab).address]);
      if (r.code !== 0) fail(`a route to the leaf`, r.stderr.trim());
    },
  };
}

/**
 * The control plane puts a file into the mesh's object store and rolls serial
 * `serial` out to `nodes` naming it by digest (with /srv/fleet): each node, behind its
 * site's leaf, fetches it through the leaf (asked on its own subject, answered by the
 * control plane for exactly the objects its declaration names), applies and reports;
 * the file on each machine has the digest.
 */
export function rolloutContent(nodes: string[], serial: number): Step {
  return {
    title: `roll serial ${serial} out to ${nodes.join(", ")} with a 300 KiB file by digest ` +
      "(fetched through the leaf); each machine holds its bytes",
    timeoutS: 240,
    async run(ctx) {
      const bytes = new Uint8Array(300 * 1024 + 7).map((_, i) => (i * 31 + (i >> 10)) & 0xff);
      const dir = join(ctx.lab.dir, "mesh");
      const blob = join(dir, `site-content-${serial}`);
      await Deno.writeFile(blob, bytes);
      const sha256 = (await mesh(ctx, ["put", blob])).trim();
      if (!/^[0-9a-f]{64}$/.test(sha256)) fail("a SHA-256 from mesh put", sha256);
      const file = join(dir, `site-${serial}.json`);
      const fleet = JSON.parse(fleetDeclaration(serial));
      fleet.resources.push({
        type: "file",
        id: "blob",
        path: "/srv/fleet.bin",
        contentSha256: sha256,
        size: bytes.length,
        mode: "0644",
        owner: "root",
        group: "root",
      });
      await Deno.writeTextFile(file, JSON.stringify(fleet));
      const rows = JSON.parse(
        await mesh(
          ctx,
          ["rollout", file, "--serial", String(serial), "--timeout", "180", ...nodes],
          230_000,
        ),
      ) as RolloutRow[];
      const bad = rows.filter((r) => r.outcome !== "converged");
      if (bad.length) fail("every apply converged", JSON.stringify(bad));
      for (const node of nodes) {
        const r = await ctx.machine(node).exec(["sha256sum", "/srv/fleet.bin"]);
        const seen = r.stdout.trim().split(/\s+/)[0];
        if (seen !== sha256) {
          fail(`${node}: /srv/fleet.bin with sha256 ${sha256}`, seen || r.stderr);
        }
      }
    },
  };
}
