/**
 * The init system, asked first: working = systemd answered a query of its
 * state (other than "offline"), or OpenRC answered its runlevel (past
 * "sysinit", i.e. it booted). running = booted with it (/run/systemd/system,
 * as sd_booted(3) checks; /run/openrc/softlevel) but it did not answer.
 * present = installed, not this machine's init.
 */
import type { Capability } from "../../src/profile.ts";
import { exists, installed, onDisk, type ProbeOptions, query, ran, whyNot } from "./_probe.ts";

/** Detect the init system. */
// Long because: the probes of each init system in order (systemd, OpenRC, others), each noting why
// it found none.
export async function detectInit(options: ProbeOptions = {}): Promise<Capability> {
  const sd = await query(
    ["systemctl", "show", "--property=Version", "--property=SystemState"],
    options,
  );
  const props = ran(sd) && sd.code === 0 ? keyValues(sd.stdout) : new Map<string, string>();
  const systemState = props.get("SystemState");
  if (systemState && systemState !== "offline") {
    return {
      state: "working",
      provider: "systemd",
      ...(props.get("Version") ? { version: props.get("Version") } : {}),
      evidence: [`systemd answered: system state "${systemState}"`],
    };
  }
  const rc = await query(["rc-status", "--runlevel"], options);
  const runlevel = ran(rc) && rc.code === 0 ? rc.stdout.trim() : "";
  if (runlevel && runlevel !== "sysinit") {
    return {
      state: "working",
      provider: "openrc",
      evidence: [`OpenRC answered: runlevel "${runlevel}"`],
    };
  }

  // A query this build may not run is not part of this build (another OS's init): no evidence.
  const evidence: string[] = [];
  if (await exists("/run/systemd/system") === true) {
    return {
      state: "running",
      provider: "systemd",
      evidence: ["booted with systemd (/run/systemd/system)", `but: ${whyNot(sd)}`, ...evidence],
    };
  }
  if (await exists("/run/openrc/softlevel") === true) {
    return {
      state: "running",
      provider: "openrc",
      evidence: ["OpenRC booted (/run/openrc/softlevel)", `but: ${whyNot(rc)}`, ...evidence],
    };
  }
  const systemdThere = await installed("systemctl", sd);
  const openrcThere = (await installed("rc-status", rc)) || (await onDisk("openrc")) || undefined;
  const found = [systemdThere && "systemd", openrcThere && "openrc"].filter(Boolean) as string[];
  if (found.length === 0) {
    const unknown = systemdThere === undefined || openrcThere === undefined;
    return {
      state: "absent",
      evidence: [
        unknown
          ? "no init answered, and this build could not look further"
          : "neither systemd nor OpenRC is installed",
        ...evidence,
      ],
    };
  }
  return {
    state: "present",
    provider: found[0],
    evidence: [
      `${found.join(" and ")} installed, but not running as this machine's init` +
      (runlevel === "sysinit" ? ' (OpenRC reports runlevel "sysinit": not booted)' : ""),
      ...evidence,
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
