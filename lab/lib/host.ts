import { join } from "node:path";
import { bundle, CHECKOUT } from "./bundle.ts";
import { LabError } from "./errors.ts";
import { type Machine, MACHINE_DENO } from "./machine.ts";

/** Where the lab installs the host inside a machine. */
export const HOST_IN_MACHINE = {
  bundle: "/usr/local/lib/nox-mesh-host/nox-mesh-host.js",
  command: "/usr/local/bin/nox-mesh-host",
} as const;

/**
 * THE permission flags the host runs with in the lab: the development flags of the
 * `host` task in deno.json (host-contract.md), until packaging/ provides the per-OS
 * permission set. This is the only place the lab knows them.
 */
export async function hostFlags(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(join(CHECKOUT, "deno.json")));
  const task: unknown = config?.tasks?.host;
  const line = typeof task === "string" ? task : (task as { command?: string })?.command;
  const words = typeof line === "string" ? line.trim().split(/\s+/) : [];
  const runAt = words.indexOf("run");
  const entryAt = words.findIndex((w) => /(^|\/)mod\.ts$/.test(w));
  if (words[0] !== "deno" || runAt !== 1 || entryAt < runAt) {
    throw new LabError(
      "usage",
      `deno.json has no "host" task of the form "deno run <flags> mod.ts" (found ${
        JSON.stringify(line ?? null)
      }); the lab runs the host with exactly those flags`,
    );
  }
  const flags = words.slice(runAt + 1, entryAt).map((w) => w.replace(/^(['"])(.*)\1$/, "$2"));
  if (flags.some((f) => f === "-A" || f === "--allow-all")) {
    throw new LabError("usage", "the host task must not use -A/--allow-all (DESIGN.md §3)");
  }
  return flags;
}

/** Bundles the host from this checkout into `output` (deno bundle mod.ts). */
export function bundleHost(output: string): Promise<void> {
  return bundle("mod.ts", output);
}

/**
 * Installs a host bundle into a machine: the bundle file plus a command
 * (/usr/local/bin/nox-mesh-host) that runs it on the machine's deno with {@link hostFlags}.
 */
export async function installHost(machine: Machine, bundlePath: string): Promise<void> {
  const flags = await hostFlags();
  await machine.copyIn(bundlePath, HOST_IN_MACHINE.bundle, "0644");
  const quoted = [MACHINE_DENO, "run", ...flags, HOST_IN_MACHINE.bundle].map(shellQuote);
  await machine.writeFile(
    HOST_IN_MACHINE.command,
    `#!/bin/sh\n# nox-mesh-host, installed by the lab (bundled form, development flags)\n` +
      `exec ${quoted.join(" ")} "$@"\n`,
    "0755",
  );
  if (machine.flavour === "systemd") {
    // The Arch-like flavour is Debian with pacman: pacman is not the OS's own
    // package manager there, so the host uses it only when told to.
    await machine.writeFile(ARCH_LIKE_CONFIG.path, ARCH_LIKE_CONFIG.text, "0644");
  }
}

/** The host configuration of the lab's Arch-like (systemd + pacman) machines. */
export const ARCH_LIKE_CONFIG = {
  path: "/etc/mesh-host/host.json",
  text: JSON.stringify({ packageManager: "pacman" }) + "\n",
} as const;

function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./=:,+-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
