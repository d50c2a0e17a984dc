/**
 * The engine: one road from bytes to a recorded report, taken by every
 * declaration (a file, the bundle, the link). `admit` parses once into the
 * value every later step uses; `apply` and `plan` take that value. The CLI and
 * the run loop both call admit, then apply.
 *
 * @example
 * ```ts
 * using engine = await openEngine({ providers: (scope) => detect(scope) });
 * const declaration = await admit(engine, text, { source: "file", origin: "site.json" });
 * const report = await apply(engine, declaration, { source: "file", origin: "site.json" });
 * ```
 */
import { type ConfigFlags, type HostConfig, loadConfig } from "../config.ts";
import type { Declaration } from "../declaration/envelope.ts";
import { readRolledBackFrom } from "../launcher_files.ts";
import { acquireApplyLock } from "../lock.ts";
import { HostError } from "../errors.ts";
import { HeldError, readHold } from "./hold.ts";
import type { Providers } from "../providers.ts";
import { KINDS } from "../resources/mod.ts";
import { Store } from "../store/store.ts";
import { applyDeclaration, makeCurrent as makeCurrentIn } from "./apply.ts";
import { planDeclaration } from "./plan.ts";
import type { ApplyOptions, ApplyReport, Engine, EngineContext, PlanEntry } from "./types.ts";

export type * from "./types.ts";
import { admit, type AdmitOptions } from "./admit.ts";
export { admit, type AdmitOptions } from "./admit.ts";
export { canonicalBody } from "./parse.ts";
export { HeldError } from "./hold.ts";

/** Which adapters a caller needs: the file system alone, or everything the machine has. */
export type ProviderScope = "files" | "all";

/** What opening an engine needs: the configuration's flags, and how to find the adapters. */
export interface EngineFlags extends ConfigFlags {
  providers: (scope: ProviderScope, config: HostConfig) => Promise<Providers>;
}

/** Open the engine: configuration, store (migrated), and the caller's way to detect providers. */
export async function openEngine(flags: EngineFlags): Promise<Engine> {
  const config = await loadConfig(flags);
  const store = Store.open(config.stateDir);
  let detected: Promise<Providers> | undefined;
  const engine: Engine = {
    config,
    store,
    providers: await flags.providers("files", config),
    detect() {
      detected ??= flags.providers("all", config).then((all) => (engine.providers = all));
      return detected;
    },
    redetect() {
      detected = flags.providers("all", config).then((all) => (engine.providers = all));
      return detected;
    },
    [Symbol.dispose]: () => store.close(),
  };
  return engine;
}

/** How to run one apply through the engine. */
export interface ApplyRun extends ApplyOptions {
  /** How long to wait for another apply to finish (default 30 s). */
  lockWaitMs?: number;
  /**
   * Apply only while the store's current declaration is still the one with this digest
   * (null: none) once the lock is held; otherwise {@link SupersededError}. For a caller
   * that re-applies what the store holds: what it read may have been replaced (another
   * apply, a rescue) while it waited for the lock.
   */
  expectCurrent?: string | null;
}

/** The store's current declaration changed while an apply waited for the lock. */
export class SupersededError extends HostError {
  constructor(expected: string | null, found: string | null) {
    super(
      "superseded",
      `the store's declaration changed while this apply waited (${expected ?? "none"} → ${
        found ?? "none"
      })`,
      { hint: "reconcile again from what the store holds now" },
    );
  }
}

/**
 * Apply an admitted declaration under the apply lock, and record it. Refused with
 * {@link HeldError} while the host is held (engine/hold.ts).
 */
export async function apply(
  engine: Engine,
  declaration: Declaration,
  options: ApplyRun,
): Promise<ApplyReport> {
  using _lock = await acquireApplyLock(engine.config.stateDir, { waitMs: options.lockWaitMs });
  // Both under the lock: a hold or a rescue that returned has no apply after it that
  // read the store before it.
  const hold = readHold(engine.store);
  if (hold) throw new HeldError(hold);
  if (options.expectCurrent !== undefined) {
    const found = engine.store.currentHead()?.digest ?? null;
    if (found !== options.expectCurrent) throw new SupersededError(options.expectCurrent, found);
  }
  await detectWhenNeeded(engine, declaration);
  try {
    return await applyDeclaration(await contextOf(engine), declaration, options);
  } finally {
    await endPass(engine);
  }
}

/** The pass ended: the file system ends what it started for it (its owners' processes). */
async function endPass(engine: Engine): Promise<void> {
  await engine.providers.fs.release?.();
}

/**
 * Make an admitted declaration the store's current one (the one the host holds the
 * machine to) without applying it: what a held host does with a declaration pushed to it
 * (the hold's end applies it). Applies nothing; `apply` makes current, then applies.
 */
export function makeCurrent(
  engine: Engine,
  declaration: Declaration,
  options: Pick<ApplyOptions, "source" | "origin">,
): void {
  makeCurrentIn(engine.store, declaration, options);
}

/** Plan an admitted declaration: what applying it would do; changes nothing. */
export async function plan(engine: Engine, declaration: Declaration): Promise<PlanEntry[]> {
  await detectWhenNeeded(engine, declaration);
  try {
    return await planDeclaration(await contextOf(engine), declaration);
  } finally {
    await endPass(engine);
  }
}

/** What the engine's steps work with: the open engine, and what the launcher knows. */
async function contextOf(engine: Engine): Promise<EngineContext> {
  const rolledBackFrom = await readRolledBackFrom(engine.config.stateDir);
  return {
    store: engine.store,
    providers: engine.providers,
    config: engine.config,
    rolledBackFrom,
    stateDir: engine.config.stateDir,
    redetect: () => engine.redetect(),
  };
}

/** Detect every adapter when the declaration, or what is managed, needs more than the file system. */
async function detectWhenNeeded(engine: Engine, declaration: Declaration): Promise<void> {
  const beyondFiles = (type: string) => (KINDS.get(type)?.needs ?? "unknown") !== "fs";
  const needs = declaration.resources.some((r) => beyondFiles(r.type)) ||
    [...engine.store.managedTypes()].some(beyondFiles);
  if (needs) await engine.detect();
}

/** Admit declaration text, then apply it: what `apply FILE` does. */
export async function applyText(
  engine: Engine,
  text: string | Uint8Array,
  options: ApplyRun,
): Promise<ApplyReport> {
  return await apply(engine, await admit(engine, text, options), options);
}

/** Admit declaration text, then plan it: what `plan FILE` does. */
export async function planText(
  engine: Engine,
  text: string | Uint8Array,
  options: AdmitOptions,
): Promise<PlanEntry[]> {
  return await plan(engine, await admit(engine, text, options));
}
