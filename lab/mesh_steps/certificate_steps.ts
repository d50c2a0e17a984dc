/**
 * Scenario steps for certificates that renew (scenario `certificates`): the stand-in
 * renews every server's certificate under the mesh's CA, rotates the CA with an overlap
 * and ends the rotation; the servers are restarted one at a time so that every node's
 * link is made again against what the servers present now. What each node trusts and
 * saw is read from its own `status --json` (its `tls` part), on the machine.
 */
import { fail, type Step } from "../lib/scenario.ts";
import { until } from "../lib/_process.ts";
import { clusterOf, hostStatus, PLAIN_HOST_LOG, startPlainHost } from "./fleet_steps.ts";
import { mesh } from "./link_steps.ts";
import type { StepContext } from "../lib/scenario.ts";

/** A node's `tls` and `link` as its status says them. */
interface Seen {
  tls: {
    broker: { url: string; issuer: string; notAfter: string; daysLeft: number } | null;
    trustSerial: number;
    cas: { subject: string; ends: string; daysLeft: number; usable: boolean }[];
  } | null;
  link: { state: string; lastError: { code: string; message: string } | null };
}

async function seen(ctx: StepContext, node: string): Promise<Seen> {
  return await hostStatus(ctx.machine(node)) as unknown as Seen;
}

/** What each node's link saw of the broker's certificate, kept between steps. */
const before = new Map<string, string>();

/** Note each node's broker certificate (its expiry, to tell a renewed one). */
export function noteCertificates(nodes: string[]): Step {
  return {
    title: `each of ${nodes.join(", ")} says when its broker's certificate expires (status)`,
    async run(ctx) {
      for (const node of nodes) {
        const s = await seen(ctx, node);
        const b = s.tls?.broker;
        if (!b || b.daysLeft < 1) {
          fail(`${node}'s status naming its broker's certificate`, JSON.stringify(s.tls));
        }
        before.set(node, b.notAfter);
      }
    },
  };
}

/** `mesh renew-cert`: every server's certificate issued again under the same CA, reloaded. */
export function renewCertificates(): Step {
  return {
    title: "the control plane renews every server's certificate under the same CA (a new key, " +
      "the same names) and reloads the servers",
    timeoutS: 120,
    async run(ctx) {
      const out = JSON.parse(await mesh(ctx, ["renew-cert"], 100_000)) as { renewed: string[] };
      if (out.renewed.length !== clusterOf(ctx.lab).servers.length) {
        fail("every server's certificate renewed", JSON.stringify(out));
      }
    },
  };
}

/**
 * Every server is restarted, one at a time, each once the nodes are up again: each node's
 * link is made anew against what the servers present now. Nothing is done on the nodes.
 */
export function restartServers(nodes: string[]): Step {
  return {
    title: "the servers restart one at a time; every node's link comes up again by itself",
    timeoutS: 400,
    async run(ctx) {
      for (const server of clusterOf(ctx.lab).servers) {
        await server.kill();
        await server.start();
        await allUp(ctx, nodes, `${server.name} restarted`);
      }
    },
  };
}

async function allUp(ctx: StepContext, nodes: string[], after: string): Promise<void> {
  await until(`every link up after ${after}`, 120_000, async () => {
    for (const node of nodes) {
      if ((await seen(ctx, node)).link.state !== "up") return undefined;
    }
    return true;
  }, 500);
}

/**
 * Every node's link is up on a certificate other than the one noted before (renewed,
 * or of the new CA: `issuer`), with nothing done on the node.
 */
export function assertNewCertificates(nodes: string[], issuer?: string): Step {
  return {
    title: `every node links on the servers' new certificates${
      issuer ? ` (issued by ${issuer})` : ""
    }`,
    timeoutS: 150,
    async run(ctx) {
      await until("every node on a new certificate", 120_000, async () => {
        for (const node of nodes) {
          const s = await seen(ctx, node);
          const b = s.tls?.broker;
          if (s.link.state !== "up" || !b || b.notAfter === before.get(node)) return undefined;
          if (issuer && b.issuer !== issuer) return undefined;
        }
        return true;
      }, 500).catch(async () => {
        const rows = await Promise.all(
          nodes.map(async (n) => `${n}: ${JSON.stringify(await seen(ctx, n))}`),
        );
        fail("every node on a new certificate", rows.join("; "));
      });
      for (const node of nodes) {
        const log = (await ctx.machine(node).exec(["cat", PLAIN_HOST_LOG])).stdout;
        if (/enrol again|link\.tls/.test(log)) {
          fail(
            `${node} never refusing a certificate`,
            log.split("\n").filter((l) => /TLS/.test(l)).slice(-3).join(" | "),
          );
        }
      }
    },
  };
}

/** `mesh rotate-ca --overlap S`: a new CA, trusted beside the old until S from now. */
export function rotateCa(overlapSeconds: number): Step {
  return {
    title: `the control plane rotates the mesh's CA with an overlap of ${overlapSeconds} s ` +
      "(a signed trust update with every node's last declaration)",
    timeoutS: 120,
    async run(ctx) {
      await mesh(ctx, ["rotate-ca", "--overlap", String(overlapSeconds)], 100_000);
    },
  };
}

/** `mesh withdraw-ca`: every server on the new CA's certificates, the old CA dropped. */
export function withdrawOldCa(): Step {
  return {
    title: "the rotation ends: every server gets a certificate of the new CA, the old CA is " +
      "dropped from the nodes' trust (a later signed update)",
    timeoutS: 150,
    async run(ctx) {
      await mesh(ctx, ["withdraw-ca"], 140_000);
    },
  };
}

/** Each node trusts the trust list `serial` (its status), with `cas` CAs. */
export function assertTrust(nodes: string[], serial: number, cas: number): Step {
  return {
    title: `${nodes.join(", ")} follow trust update ${serial} (${cas} CA${cas > 1 ? "s" : ""})`,
    timeoutS: 120,
    async run(ctx) {
      await until(`trust update ${serial} on ${nodes.join(", ")}`, 100_000, async () => {
        for (const node of nodes) {
          const t = (await seen(ctx, node)).tls;
          if (t?.trustSerial !== serial || t.cas.length !== cas) return undefined;
        }
        return true;
      }, 500).catch(async () => {
        const rows = await Promise.all(
          nodes.map(async (n) => `${n}: ${JSON.stringify((await seen(ctx, n)).tls)}`),
        );
        fail(`trust update ${serial} everywhere`, rows.join("; "));
      });
    },
  };
}

/**
 * `node`'s host, started after the rotation ended, cannot link and says why: the servers'
 * certificates come from a CA it never learnt of (away for the whole overlap).
 */
export function assertSaysWhyNot(node: string): Step {
  return {
    title: `${node}, away for the whole rotation, cannot link and says why (status, log)`,
    timeoutS: 120,
    async run(ctx) {
      const s = await until(`${node}'s link error`, 90_000, async () => {
        const now = await seen(ctx, node);
        return now.link.lastError ? now : undefined;
      }, 500);
      if (s.link.state === "up") fail(`${node} not linked`, "it linked");
      if (
        s.link.lastError?.code !== "link.tls-ca" ||
        !/issued by "CN=nox-mesh stand-in CA 1", a CA this node does not trust/.test(
          s.link.lastError.message,
        )
      ) {
        fail(`${node} naming the CA it does not trust`, JSON.stringify(s.link.lastError));
      }
      const log = (await ctx.machine(node).exec(["cat", PLAIN_HOST_LOG])).stdout;
      if (!/enrol again with a new token/.test(log)) {
        fail(`${node}'s log saying what to do`, log.split("\n").slice(-5).join(" | "));
      }
    },
  };
}

/** Every `nodes` link up (status). */
export function assertLinked(nodes: string[]): Step {
  return {
    title: `${nodes.join(", ")} linked`,
    timeoutS: 150,
    async run(ctx) {
      await allUp(ctx, nodes, "their start");
    },
  };
}

/** Starts the host on `node` without waiting for its link (it may not come up). */
export function startAway(node: string): Step {
  return {
    title: `${node}'s host starts (it was away)`,
    async run(ctx) {
      await startPlainHost(ctx.machine(node), 5);
    },
  };
}
