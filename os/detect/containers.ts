/**
 * The container runtime. present = its program is installed; running = its
 * daemon's socket exists (docker; podman has no daemon); working = it answered
 * `podman info` / `docker version` (docker: with a server part).
 */
import type { Capability } from "../../src/profile.ts";
import { exists, findProgram, type ProbeOptions, query, ran, whyNot } from "./_probe.ts";

/** The runtimes the container adapter drives, in order of preference. */
export const RUNTIMES: readonly string[] = ["podman", "docker"];

/** Detect one runtime. */
export async function detectRuntime(
  program: string,
  options: ProbeOptions = {},
): Promise<Capability> {
  if (!(await findProgram(program))) {
    return { state: "absent", evidence: [`${program} is not installed`] };
  }
  if (program === "podman") {
    const r = await query(["podman", "info", "--format", "json"], options);
    if (ran(r) && r.code === 0) {
      const info = parseJson(r.stdout) as { version?: { Version?: string } } | undefined;
      const version = info?.version?.Version;
      return {
        state: "working",
        provider: "podman",
        ...(version ? { version } : {}),
        evidence: ["podman answered `podman info`"],
      };
    }
    return {
      state: "present",
      provider: "podman",
      evidence: [`podman did not answer: ${whyNot(r)}`],
    };
  }
  const socket = await exists("/run/docker.sock") || await exists("/var/run/docker.sock");
  const r = await query([program, "version", "--format", "json"], options);
  const answer = ran(r)
    ? parseJson(r.stdout) as { Server?: { Version?: string } | null } | undefined
    : undefined;
  if (ran(r) && r.code === 0 && answer?.Server) {
    return {
      state: "working",
      provider: program,
      ...(answer.Server.Version ? { version: answer.Server.Version } : {}),
      evidence: [`${program} answered \`${program} version\` with its daemon's version`],
    };
  }
  return {
    state: socket ? "running" : "present",
    provider: program,
    evidence: [
      socket ? `${program}'s daemon socket exists` : `${program}'s daemon socket is absent`,
      `${program} did not answer: ${whyNot(r)}`,
    ],
  };
}

/** Detect the container runtime: the first working one, else the most advanced one found. */
export async function detectContainers(
  options: ProbeOptions & { runtimes?: readonly string[] } = {},
): Promise<Capability> {
  const order = ["working", "running", "present", "absent"];
  const found = [];
  for (const program of options.runtimes ?? RUNTIMES) {
    found.push(await detectRuntime(program, options));
  }
  const best = [...found].sort((a, b) => order.indexOf(a.state) - order.indexOf(b.state))[0];
  if (!best || best.state === "absent") {
    return { state: "absent", evidence: found.flatMap((c) => c.evidence) };
  }
  const others = found.filter((c) => c !== best && c.state !== "absent");
  return {
    ...best,
    evidence: [...best.evidence, ...others.map((c) => `also ${c.provider}: ${c.state}`)],
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
