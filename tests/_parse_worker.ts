/**
 * A worker that parses one shape of tests/_declaration_shapes.ts and answers how it went:
 * the limits test runs it so that a parse that takes too long can be stopped (a worker can
 * be terminated mid-computation), the benchmark so that each parse starts cold, as the
 * host's does. The text is built before the clock starts.
 */
/// <reference lib="deno.worker" />
import process from "node:process";
import { DeclarationRefused } from "../src/declaration/envelope.ts";
import { parseDeclaration } from "../src/engine/parse.ts";
import { SHAPES } from "./_declaration_shapes.ts";

const OPTIONS = {
  managedRoots: ["/etc", "/srv", "/opt", "/var/lib", "/var/log", "/usr/local", "/home"],
  own: { paths: ["/var/lib/mesh-host", "/etc/mesh-host"], services: ["nox-mesh-host"] },
};

self.onmessage = async (e: MessageEvent<{ shape: number }>) => {
  const text = SHAPES[e.data.shape].text();
  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const [wall0, cpu0] = [performance.now(), cpu()];
  let outcome: string;
  try {
    const declaration = await parseDeclaration(text, OPTIONS);
    outcome = `accepted (${declaration.resources.length})`;
  } catch (error) {
    outcome = error instanceof DeclarationRefused
      ? "refused"
      : `crashed: ${error instanceof Error ? `${error.name}: ${error.message}` : error}`;
  }
  self.postMessage({
    wallMs: performance.now() - wall0,
    cpuMs: cpu() - cpu0,
    outcome,
    bytes: new TextEncoder().encode(text).length,
  });
};
