/**
 * One host process's working set: configuration, store and providers, plus
 * the single path every declaration takes (file, bundle or link) from text to
 * an apply report.
 */
import { applyDeclaration, type ApplyReport, planDeclaration, type PlanEntry } from "./apply.ts";
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

/** An open host: close it (or `using` it) when done. */
export interface Host extends Disposable {
  config: HostConfig;
  store: Store;
  providers: Providers;
}

/** Store meta key holding this node's id once it has one. */
export const NODE_ID_KEY = "node_id";

/** Open the host: configuration, store (migrated), and the providers the caller detected. */
export async function openHost(
  flags: ConfigFlags & { providers: () => Promise<Providers> },
): Promise<Host> {
  const config = await loadConfig(flags);
  const providers = await flags.providers();
  const store = Store.open(config.stateDir);
  return { config, store, providers, [Symbol.dispose]: () => store.close() };
}

/**
 * Parse declaration text for a source: the bundle gets the trusted parse, every
 * other source the safe one. A declaration addressed to another node is refused.
 */
export function parseFor(
  host: Host,
  text: string | Uint8Array,
  source: Source,
  origin: string,
): Declaration {
  const options = {
    managedRoots: host.config.managedRoots,
    own: host.config.own,
    limits: host.config.limits,
    origin,
  };
  const declaration = source === "bundle"
    ? parseTrustedDeclaration(text, options)
    : parseDeclaration(text, options);
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
  const declaration = parseFor(host, text, options.source, options.origin);
  using _lock = await acquireApplyLock(host.config.stateDir, { waitMs: options.lockWaitMs });
  return await applyDeclaration(host, declaration, options);
}

/** Parse declaration text and plan it; changes nothing. */
export function planText(
  host: Host,
  text: string | Uint8Array,
  source: Source,
  origin: string,
): Promise<PlanEntry[]> {
  return planDeclaration(host, parseFor(host, text, source, origin));
}
