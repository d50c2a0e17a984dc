/**
 * The providers' one package manager where the installation is its own package manager
 * for the host (the tarball's os/tarball-self): kept apart from that adapter so that
 * builds without it carry none of its code.
 */
import { HostError } from "../src/errors.ts";
import type { PackageManager } from "../src/providers.ts";
import { PROGRAM } from "../src/version.ts";

/** A package other than the host's own where the build carries no manager for it: refused. */
export function notOwn(name: string): never {
  throw new HostError(
    "package.no-manager",
    `package "${name}": this machine's package manager is not one this build carries; the ` +
      `tarball installs only ${PROGRAM} itself`,
    { hint: "install it by other means, or run a build of the host for this OS" },
  );
}

/**
 * One package manager for the providers: the host's own package from `self`, every other
 * package from the machine's own manager (`native`, when the build carries it).
 */
export function withOwnPackage(self: PackageManager, native?: PackageManager): PackageManager {
  const pick = (name: string) => name === PROGRAM ? self : native ?? notOwn(name);
  return {
    name: native ? `${native.name}+${self.name}` : self.name,
    installed: async (name) => await pick(name).installed(name),
    install: async (name, version, file) => await pick(name).install(name, version, file),
    ...(native?.refresh ? { refresh: native.refresh } : {}),
    upgradeAll: () => native ? native.upgradeAll() : self.upgradeAll(),
    // Asked only for the host's own versions (the launcher's rolled-back-from list).
    upstreamVersion: (version) => self.upstreamVersion(version),
  };
}
