/**
 * The container runtime. present = its program is installed; running = its
 * daemon's socket exists (docker; podman has no daemon); working = it answered
 * `podman info` / `docker version` (docker: with a server part).
 */
import type { Capability } from "../../src/profile.ts";
import {
  exists,
  installed,
  type ProbeOptions,
  query,
  ran,
  refused,
  type RunOrError,
  whyNot,
} from "./_probe.ts";

/** The runtimes the container adapter drives, in order of preference. */
export const RUNTIMES: readonly string[] = ["podman", "docker"];

/** Detect one runtime. */
export async function detectRuntime(
  program: string,
  options: ProbeOptions = {},
): Promise<Capability> {
  const r: RunOrError = program === "podman"
    ? await query(["podman", "info", "--format", "json"], options)
    : await query([program, "version", "--format", "json"], options);
  const there = await installed(program, r);
  if (there === false) return { state: "absent", evidence: [`${program} is not installed`] };
  if (there === undefined) {
    return { state: "absent", evidence: [`${program} is not part of this build`] };
  }
  const answer = ran(r) && r.code === 0 ? parseJson(r.stdout) : undefined;
  if (program === "podman") {
    const version = (answer as { version?: { Version?: string } } | undefined)?.version?.Version;
    return answer
      ? {
        state: "working",
        provider: "podman",
        ...(version ? { version } : {}),
        evidence: ["podman answered `podman info`"],
      }
      : {
        state: "present",
        provider: "podman",
        evidence: [
          refused(r)
            ? "podman is installed; this build does not run it"
            : `podman did not answer: ${whyNot(r)}`,
        ],
      };
  }
  const server = (answer as { Server?: { Version?: string } | null } | undefined)?.Server;
  if (server) {
    return {
      state: "working",
      provider: program,
      ...(server.Version ? { version: server.Version } : {}),
      evidence: [`${program} answered \`${program} version\` with its daemon's version`],
    };
  }
  const socket = await exists("/run/docker.sock") === true ||
    await exists("/var/run/docker.sock") === true;
  return {
    state: socket ? "running" : "present",
    provider: program,
    evidence: [
      socket ? `${program}'s daemon socket exists` : `no ${program} daemon socket found`,
      refused(r)
        ? `${program} is installed; this build does not run it`
        : `${program} did not answer: ${whyNot(r)}`,
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
