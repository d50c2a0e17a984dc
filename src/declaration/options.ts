/**
 * What the parse is told about this host (src/engine/parse.ts `ParseOptions`): the managed
 * roots, the host's own files and services, what host.json permits. The configuration
 * (src/config.ts) makes them and the kinds' rules read them: a module below both the
 * envelope and the kinds.
 */
import type { Limits } from "./limits.ts";

/** What belongs to the host itself and so may never be declared. */
export interface OwnResources {
  /**
   * Files and directories (and everything below them) the host never manages,
   * nor any directory above them; a component may hold `*` (any characters
   * within it). Per OS from packaging/own_paths_by_os.ts, plus the configured ones.
   */
  paths: readonly string[];
  /** Service names (with or without ".service"); every unit of these names is refused. */
  services: readonly string[];
}

/**
 * What this machine's configuration (host.json `permit`) lets the safe parse accept although
 * it refuses it by default: kernel settings that run programs, turn a protection off or
 * lower a hardening setting, services that stop or isolate the node, groups that confer root
 * and existing system accounts to adopt (src/resources/sysctl.ts, service.ts, user.ts). The
 * trusted parse (the bundle) accepts them all.
 */
export interface Permit {
  /** Setting names, in their dotted form ("kernel.core_pattern"). */
  sysctls: readonly string[];
  /** Service names (every unit of the name, as for the host's own service). */
  services: readonly string[];
  /** Groups that confer root or read secrets, which a user may then be given ("docker"). */
  groups: readonly string[];
  /** System accounts (below the machine's UID_MIN) that a user resource may then adopt. */
  users: readonly string[];
}

/** What the parse needs to know about this host. */
export interface ParseOptions {
  /** Roots the host may manage; a path outside every one of them is refused. */
  managedRoots: readonly string[];
  /** The host's own files and services. */
  own: OwnResources;
  /** What this machine permits that the safe parse refuses by default (none when absent). */
  permit?: Permit;
  limits?: Partial<Limits>;
  /** Where the text came from, for messages: a file name, "the link", "the bundle". */
  origin?: string;
}
