/**
 * The init system. running = it is this machine's init (systemd: /run/systemd/system
 * exists, as sd_booted(3) checks; OpenRC: /run/openrc/softlevel exists, written
 * when OpenRC booted); working = it answered a query.
 */
import type { Capability } from "../../src/profile.ts";
import { exists, findProgram, type ProbeOptions, query, ran, whyNot } from "./_probe.ts";

/** Detect the init system. */
export async function detectInit(options: ProbeOptions = {}): Promise<Capability> {
  const systemctl = await findProgram("systemctl");
  const openrc = await findProgram("openrc") ?? await findProgram("rc-service");

  if (await exists("/run/systemd/system")) {
    const r = await query(
      ["systemctl", "show", "--property=Version", "--property=SystemState"],
      options,
    );
    const props = ran(r) && r.code === 0 ? keyValues(r.stdout) : new Map<string, string>();
    const systemState = props.get("SystemState");
    if (systemState && systemState !== "offline") {
      return {
        state: "working",
        provider: "systemd",
        ...(props.get("Version") ? { version: props.get("Version") } : {}),
        evidence: [`systemd answered: system state "${systemState}"`],
      };
    }
    return {
      state: "running",
      provider: "systemd",
      evidence: [
        "/run/systemd/system exists (booted with systemd)",
        `but it did not answer: ${ran(r) && r.code === 0 ? "system state offline" : whyNot(r)}`,
      ],
    };
  }

  if (await exists("/run/openrc/softlevel")) {
    const r = await query(["rc-status", "--runlevel"], options);
    if (ran(r) && r.code === 0 && r.stdout.trim()) {
      return {
        state: "working",
        provider: "openrc",
        evidence: [`OpenRC answered: runlevel "${r.stdout.trim()}"`],
      };
    }
    return {
      state: "running",
      provider: "openrc",
      evidence: ["/run/openrc/softlevel exists (OpenRC booted)", `but: ${whyNot(r)}`],
    };
  }

  const found = [systemctl && "systemd", openrc && "openrc"].filter(Boolean) as string[];
  if (found.length === 0) {
    return { state: "absent", evidence: ["neither systemd nor OpenRC is installed"] };
  }
  return {
    state: "present",
    provider: found[0],
    evidence: [
      `${found.join(" and ")} installed, but not running as this machine's init ` +
      "(no /run/systemd/system, no /run/openrc/softlevel)",
    ],
    details: { installed: found },
  };
}

function keyValues(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of text.split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) map.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  return map;
}
