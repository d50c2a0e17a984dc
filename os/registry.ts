/** The shape of a build's adapter list (os/adapters.ts, packaging/<os>/adapters.ts). */
import type { ContainerRuntime, PackageManager, ServiceManager } from "../src/providers.ts";

/** What every adapter factory is given. */
export interface AdapterEnv {
  /** Extra environment for the programs the adapter runs. */
  env?: Record<string, string>;
}

/** The package managers, service managers and container runtimes a build carries, by name. */
export interface AdapterRegistry {
  /** `stateDir`: the host's state directory (apk keeps the host's own package files there). */
  packages: Partial<
    Record<"pacman" | "apk", (options: AdapterEnv & { stateDir?: string }) => PackageManager>
  >;
  services: Partial<Record<"systemd" | "openrc", (options: AdapterEnv) => ServiceManager>>;
  /**
   * The host's own package when the installation is its own package manager (the tarball:
   * os/tarball-self); absent from builds whose package manager installs the host.
   */
  self?: (options: AdapterEnv & { stateDir?: string }) => PackageManager;
  containers: Partial<
    Record<
      "podman" | "docker",
      (options: AdapterEnv & { program: "podman" | "docker"; envDir: string }) => ContainerRuntime
    >
  >;
}
