/**
 * The package manager. present = its program is installed; working = it
 * answered a query of its package database. Managers this host has no adapter
 * for (dpkg, rpm …) are named in the evidence only; they are never run.
 */
import type { Capability, OsInfo } from "../../src/profile.ts";
import { installed, onDisk, type ProbeOptions, query, ran, refused, whyNot } from "./_probe.ts";

/** Managers with an adapter: the program, its database query, and the OS ids it is native to. */
const MANAGERS = [
  { name: "pacman", list: ["pacman", "-Q"], native: ["arch"], emptyExit: 1 },
  { name: "apk", list: ["apk", "info"], native: ["alpine"], emptyExit: 0 },
] as const;

const OTHERS = ["dpkg", "rpm", "xbps-install", "emerge", "zypper"];

/** Whether a package manager is the OS's own (by os-release ID / ID_LIKE). */
export function isNative(manager: string, os: OsInfo): boolean {
  const ids = MANAGERS.find((m) => m.name === manager)?.native ?? [];
  return ids.some((id) => os.id === id || os.like.includes(id));
}

/** Detect the package manager (the adapters' ones, preferring the OS's own). */
export async function detectPackages(os: OsInfo, options: ProbeOptions = {}): Promise<Capability> {
  const found: Capability[] = [];
  const notes: string[] = [];
  for (const manager of MANAGERS) {
    const r = await query(manager.list, options);
    const there = await installed(manager.name, r);
    if (there === false) continue;
    if (there === undefined) continue; // not this build's manager, and not visible on disk
    const lines = ran(r) ? r.stdout.split("\n").filter((l) => l.trim()).length : 0;
    const answered = ran(r) &&
      (r.code === 0 || (r.code === manager.emptyExit && lines === 0 && !/error/i.test(r.stderr)));
    const native = isNative(manager.name, os);
    found.push({
      state: answered ? "working" : "present",
      provider: manager.name,
      evidence: [
        answered
          ? `${manager.name} answered a query of its database (${lines} packages installed)`
          : refused(r)
          ? `${manager.name} is installed; this build does not run it`
          : `${manager.name} is installed but did not answer: ${whyNot(r)}`,
        native
          ? `${manager.name} is ${os.id}'s own package manager`
          : `${manager.name} is not ${os.id}'s own package manager`,
      ],
      details: { native, packages: lines },
    });
  }
  const others: string[] = [];
  for (const name of OTHERS) if (await onDisk(name)) others.push(name);
  if (others.length) {
    notes.push(`also installed, without an adapter in this host: ${others.join(", ")}`);
  }
  const rank = (c: Capability) =>
    (c.state === "working" ? 2 : 0) + (c.details?.native === true ? 1 : 0);
  const best = found.sort((a, b) => rank(b) - rank(a))[0];
  if (!best) {
    return { state: "absent", evidence: ["neither pacman nor apk is installed", ...notes] };
  }
  return { ...best, evidence: [...best.evidence, ...notes] };
}
