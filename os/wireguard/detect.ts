/**
 * The profile's `wireguard` capability: absent (no `wg`), present (wg installed,
 * but no interface could be made), working (a scratch interface was made and
 * deleted): provider "kernel" when `ip link add … type wireguard` worked, else
 * "userspace" when wireguard-go made one that `wg show` answered for.
 */
import type { Capability } from "../../src/profile.ts";
import {
  attempt,
  installed,
  type ProbeOptions,
  query,
  ran,
  type RunOrError,
  whyNot,
} from "../detect/_probe.ts";
import { createArgv } from "./mod.ts";

/** Options of {@link detectWireguard}. */
export interface WireguardProbeOptions extends ProbeOptions {
  /** An argv prefix that runs the probes elsewhere (a test's network namespace). */
  via?: readonly string[];
}

/** A fresh scratch interface name (15 characters at most). */
export function scratchName(prefix = "nmhp"): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return prefix + [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, 8);
}

const ok = (r: RunOrError) => ran(r) && r.code === 0;

/** Detect WireGuard by making (and deleting) a scratch interface. */
export async function detectWireguard(options: WireguardProbeOptions = {}): Promise<Capability> {
  const wg = await query(["wg", "--version"], options);
  const there = await installed("wg", wg);
  if (there !== true) {
    return {
      state: "absent",
      evidence: [there === false ? "wg (wireguard-tools) is not installed" : whyNot(wg)],
    };
  }
  const version = ok(wg) ? /v([0-9][0-9.]*)/.exec((wg as { stdout: string }).stdout)?.[1] : "";
  const evidence: string[] = [];
  const name = scratchName();
  const kernel = await attempt(createArgv("kernel", name), options);
  if (ok(kernel)) {
    await attempt(["ip", "link", "del", "dev", name], options);
    return {
      state: "working",
      provider: "kernel",
      ...(version ? { version } : {}),
      evidence: [`the kernel made (and deleted) a scratch WireGuard interface ${name}`],
    };
  }
  evidence.push(`the kernel made no WireGuard interface: ${whyNot(kernel)}`);
  const user = await attempt(createArgv("userspace", name), options);
  if (ok(user)) {
    const answered = await attempt(["wg", "show", name, "listen-port"], options);
    await attempt(["ip", "link", "del", "dev", name], options);
    if (ok(answered)) {
      return {
        state: "working",
        provider: "userspace",
        ...(version ? { version } : {}),
        evidence: [
          ...evidence,
          `wireguard-go made (and deleted) a scratch interface ${name} that wg answered for`,
        ],
      };
    }
    evidence.push(`wg did not answer for wireguard-go's ${name}: ${whyNot(answered)}`);
  } else evidence.push(`wireguard-go made no interface: ${whyNot(user)}`);
  return { state: "present", evidence: ["wg is installed", ...evidence] };
}
