/** What a command may touch outside itself: output streams and the providers factory. */
import type { Providers } from "../providers.ts";
import type { Profile } from "../profile.ts";
import type { ProviderScope } from "../engine/mod.ts";
import type { HostConfig } from "../config.ts";

/** The command line's world, passed in so tests can run commands in-process. */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Read all of standard input (for `apply -`). */
  stdin(): Promise<Uint8Array>;
  /** The adapters of this machine: the file system alone, or everything detected. */
  providers(scope: ProviderScope, config: HostConfig): Promise<Providers>;
  /** Detect this machine's profile (R7). */
  profile?(): Promise<Profile>;
  /** Aborted on SIGTERM/SIGINT. */
  signal?: AbortSignal;
  /**
   * The installation's own paths, which no declaration may name (the entry point
   * passes the list its build carries: packaging/own_paths_by_os.ts).
   */
  ownPaths?: readonly string[];
  /**
   * The installation's bundle (where its package put substrate.lock), when it is not
   * the default /usr/share/nox-mesh-host/substrate.lock (the tarball's lies in /usr/local).
   */
  bundlePath?: string;
}

/** Exit codes (documented in nox-mesh-host(8), EXIT STATUS). */
export const EXIT = {
  ok: 0,
  failed: 1,
  refused: 2,
  usage: 64,
  noInput: 66,
  unavailable: 69,
  software: 70,
  busy: 75,
  config: 78,
  /** `run` asks the launcher for a restart that is not a failure (memory ceiling, enrolled again). */
  restart: 10,
} as const;
