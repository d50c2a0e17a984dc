/**
 * The account tools (the `accounts` capability): shadow's, working when `useradd -D`
 * printed its defaults (a query: it changes nothing without other options); else
 * busybox's, working when its `adduser --help` answered as busybox. shadow first: on
 * Alpine, its `shadow` package adds what busybox lacks (usermod).
 */
import type { Capability } from "../../src/profile.ts";
import { installed, type ProbeOptions, query, ran, whyNot } from "./_probe.ts";

/** Detect which account tools this machine has. */
export async function detectAccounts(options: ProbeOptions = {}): Promise<Capability> {
  const evidence: string[] = [];
  const shadow = await query(["useradd", "-D"], options);
  if (ran(shadow) && shadow.code === 0 && /^HOME=/m.test(shadow.stdout)) {
    return {
      state: "working",
      provider: "shadow",
      evidence: ["shadow's useradd answered with its defaults (useradd -D)"],
    };
  }
  const hasShadow = await installed("useradd", shadow);
  if (hasShadow) evidence.push(`useradd is installed but did not answer: ${whyNot(shadow)}`);
  const busybox = await query(["adduser", "--help"], options);
  if (ran(busybox) && /BusyBox/.test(busybox.stdout + busybox.stderr)) {
    return {
      state: "working",
      provider: "busybox",
      evidence: [...evidence, "busybox's adduser answered (adduser --help)"],
    };
  }
  const hasAdduser = await installed("adduser", busybox);
  if (hasAdduser && ran(busybox)) evidence.push("adduser is installed but is not busybox's");
  if (hasShadow || hasAdduser) return { state: "present", evidence };
  return {
    state: "absent",
    evidence: [...evidence, "neither shadow's useradd nor busybox's adduser is installed"],
  };
}
