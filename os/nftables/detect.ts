/**
 * The profile's `nftables` capability: absent (no `nft`), present (installed,
 * but the kernel took no table), working (a scratch table was made and
 * deleted).
 */
import type { Capability } from "../../src/profile.ts";
import { attempt, installed, type ProbeOptions, query, ran, whyNot } from "../detect/_probe.ts";

/** Options of {@link detectNftables}. */
export interface NftablesProbeOptions extends ProbeOptions {
  /** An argv prefix that runs the probes elsewhere (a test's network namespace). */
  via?: readonly string[];
}

/** Detect nftables by making (and deleting) a scratch table. */
export async function detectNftables(options: NftablesProbeOptions = {}): Promise<Capability> {
  const v = await query(["nft", "--version"], options);
  const there = await installed("nft", v);
  if (there !== true) {
    return {
      state: "absent",
      evidence: [there === false ? "nft (nftables) is not installed" : whyNot(v)],
    };
  }
  const version = ran(v) && v.code === 0 ? /v([0-9][0-9.]*)/.exec(v.stdout)?.[1] : undefined;
  const name = `nmh_probe_${crypto.randomUUID().slice(0, 8)}`;
  const made = await attempt(["nft", "add", "table", "inet", name], options);
  if (ran(made) && made.code === 0) {
    const gone = await attempt(["nft", "delete", "table", "inet", name], options);
    if (ran(gone) && gone.code === 0) {
      return {
        state: "working",
        provider: "nftables",
        ...(version ? { version } : {}),
        evidence: [`the kernel took (and dropped) a scratch table inet ${name}`],
      };
    }
  }
  return {
    state: "present",
    provider: "nftables",
    ...(version ? { version } : {}),
    evidence: [`nft is installed; the kernel took no scratch table: ${whyNot(made)}`],
  };
}
