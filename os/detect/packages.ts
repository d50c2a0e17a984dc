/**
 * The package manager. present = its program is installed; working = it
 * answered a query of its package database. The managers are the distributions'
 * (os/distros/); others (rpm, xbps …) are named in the evidence only; they are never run.
 */
import type { Capability, OsInfo } from "../../src/profile.ts";
import { type Distribution, DISTRIBUTIONS } from "../distros/mod.ts";
import { installed, onDisk, type ProbeOptions, query, ran, refused, whyNot } from "./_probe.ts";

/** A manager: its name, its database query, and the OS ids it is native to. */
export interface Manager {
  name: string;
  list: readonly string[];
  emptyExit: number;
  native: string[];
}

/** The distributions' managers, once each, native to every distribution that uses it. */
export function managersOf(distros: readonly Distribution[]): Manager[] {
  return distros.reduce<Manager[]>((managers, d) => {
    const known = managers.find((m) => m.name === d.packages.name);
    if (known) known.native.push(...d.osIds);
    else {
      const { name, query, emptyExit } = d.packages;
      managers.push({ name, list: query, emptyExit, native: [...d.osIds] });
    }
    return managers;
  }, []);
}

const MANAGERS: readonly Manager[] = managersOf(DISTRIBUTIONS);

/** Package managers no distribution here has (named in the evidence when installed). */
const OTHERS = ["dpkg", "rpm", "xbps-install", "emerge", "zypper"]
  .filter((name) => !MANAGERS.some((m) => m.list[0].startsWith(name)));

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
    const there = await installed(manager.list[0], r);
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
    const names = MANAGERS.map((m) => m.name);
    const none = names.length === 2
      ? `neither ${names[0]} nor ${names[1]} is installed`
      : `none of ${names.slice(0, -1).join(", ")} or ${names.at(-1)} is installed`;
    return { state: "absent", evidence: [none, ...notes] };
  }
  return { ...best, evidence: [...best.evidence, ...notes] };
}
