/**
 * One host process's working set: configuration, store and providers, plus
 * the single path every declaration takes (file, bundle or link) from text to
 * an apply report.
 */
import {
  applyDeclaration,
  type ApplyReport,
  type EngineContext,
  planDeclaration,
  type PlanEntry,
} from "./apply.ts";
import { readRolledBackFrom } from "./launcher_files.ts";
import { type ConfigFlags, type HostConfig, loadConfig } from "./config.ts";
import {
  type Declaration,
  DeclarationRefused,
  parseDeclaration,
  parseTrustedDeclaration,
} from "./declaration/parse.ts";
import { acquireApplyLock } from "./lock.ts";
import type { Providers } from "./ports.ts";
import type { ResourceResult, Source } from "./store/store.ts";
import { Store } from "./store/store.ts";

/** Which adapters a caller needs: the file system alone, or everything the machine has. */
export type ProviderScope = "files" | "all";

/** An open host: close it (or `using` it) when done. */
export interface Host extends Disposable {
  config: HostConfig;
  store: Store;
  /** The adapters known so far: the file system at first, all of them after `detect()`. */
  providers: Providers;
  /**
   * Detect every adapter of this machine (once per process; asking the package
   * manager, the init and the container runtime takes a while, so a declaration
   * of files and directories never pays for it).
   */
  detect(): Promise<Providers>;
}

/** Store meta key holding this node's id once it has one. */
export const NODE_ID_KEY = "node_id";

/** Open the host: configuration, store (migrated), and the caller's way to detect providers. */
export async function openHost(
  flags: ConfigFlags & {
    providers: (scope: ProviderScope, config: HostConfig) => Promise<Providers>;
  },
): Promise<Host> {
  const config = await loadConfig(flags);
  const store = Store.open(config.stateDir);
  let detected: Promise<Providers> | undefined;
  const host: Host = {
    config,
    store,
    providers: await flags.providers("files", config),
    detect() {
      detected ??= flags.providers("all", config).then((all) => (host.providers = all));
      return detected;
    },
    [Symbol.dispose]: () => store.close(),
  };
  return host;
}

/** What the engine works with: the host, and what the launcher knows about its versions. */
async function engineFor(host: Host): Promise<EngineContext> {
  const rolledBackFrom = await readRolledBackFrom(host.config.stateDir);
  return {
    store: host.store,
    providers: host.providers,
    config: host.config,
    rolledBackFrom,
    stateDir: host.config.stateDir,
  };
}

/** Detect every adapter when the declaration, or what the host holds, needs more than files. */
async function detectWhenNeeded(host: Host, declaration: Declaration): Promise<void> {
  const filesOnly = (type: string) => type === "file" || type === "directory";
  const needs = declaration.resources.some((r) => !filesOnly(r.type)) ||
    [...host.store.heldTypes()].some((t) => !filesOnly(t));
  if (needs) await host.detect();
}

/**
 * Parse declaration text for a source: the bundle gets the trusted parse, every
 * other source the safe one. A declaration addressed to another node is refused.
 */
export async function parseFor(
  host: Host,
  text: string | Uint8Array,
  source: Source,
  origin: string,
): Promise<Declaration> {
  const options = {
    managedRoots: host.config.managedRoots,
    own: host.config.own,
    limits: host.config.limits,
    origin,
  };
  const declaration = source === "bundle"
    ? await parseTrustedDeclaration(text, options)
    : await parseDeclaration(text, options);
  const self = host.store.meta(NODE_ID_KEY);
  if (self !== undefined && declaration.node !== undefined && declaration.node !== self) {
    throw new DeclarationRefused(
      [{
        path: "node",
        message: `is addressed to "${declaration.node}", but this node is "${self}"`,
      }],
      origin,
    );
  }
  return declaration;
}

/** How to apply one declaration. */
export interface ApplyTextOptions {
  source: Source;
  origin: string;
  onResult?: (result: ResourceResult) => void;
  signal?: AbortSignal;
  /** How long to wait for another apply to finish (default 30 s). */
  lockWaitMs?: number;
}

/** Parse and apply declaration text under the apply lock. */
export async function applyText(
  host: Host,
  text: string | Uint8Array,
  options: ApplyTextOptions,
): Promise<ApplyReport> {
  const declaration = await parseFor(host, text, options.source, options.origin);
  using _lock = await acquireApplyLock(host.config.stateDir, { waitMs: options.lockWaitMs });
  await detectWhenNeeded(host, declaration);
  return await applyDeclaration(await engineFor(host), declaration, options);
}

/** Parse declaration text and plan it; changes nothing. */
export async function planText(
  host: Host,
  text: string | Uint8Array,
  source: Source,
  origin: string,
): Promise<PlanEntry[]> {
  const declaration = await parseFor(host, text, source, origin);
  await detectWhenNeeded(host, declaration);
  return await planDeclaration(await engineFor(host), declaration);
}
