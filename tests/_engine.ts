/** Shared by kind tests: a real store in a temp directory and the real engine. */
import { applyDeclaration } from "../src/engine/apply.ts";
import { planDeclaration } from "../src/engine/plan.ts";
import type { ApplyReport, PlanEntry } from "../src/engine/types.ts";
import { parseDeclaration, parseTrustedDeclaration } from "../src/engine/parse.ts";
import type { Permit } from "../src/declaration/options.ts";
import type { Resource } from "../src/resources/mod.ts";
import type { Providers } from "../src/providers.ts";
import { Store } from "../src/store/store.ts";

const MANAGED_ROOTS = ["/etc", "/srv", "/tmp"];

/** An engine over a fresh store; dispose to close and delete it. */
export interface TestEngine extends AsyncDisposable {
  store: Store;
  /** The state directory (beside the store; the overlay's key lives there). */
  stateDir: string;
  /**
   * Apply these resources (the trusted parse, the bundle's: actions allowed; the safe one,
   * the link's, with `trusted: false`) and return the report.
   */
  apply(resources: unknown[]): Promise<ApplyReport>;
  /** Plan these resources (changes nothing). */
  plan(resources: unknown[]): Promise<PlanEntry[]>;
}

/** Open a store in a temp directory and apply declarations with `providers`. */
export async function testEngine(
  providers: Providers,
  { rolledBackFrom, trusted = true, permit }: {
    rolledBackFrom?: ReadonlySet<string>;
    trusted?: boolean;
    /** host.json's permit (the safe parse's and the checks'). */
    permit?: Permit;
  } = {},
): Promise<TestEngine> {
  const dir = await Deno.makeTempDir({ prefix: "noxad-store-" });
  const store = Store.open(dir);
  const parse = (resources: unknown[]) =>
    (trusted ? parseTrustedDeclaration : parseDeclaration)(
      JSON.stringify({ version: 1, resources }),
      {
        managedRoots: MANAGED_ROOTS,
        own: { paths: [], services: ["nox-mesh-host"] },
        ...(permit ? { permit } : {}),
      },
    );
  const ctx = {
    store,
    providers,
    config: { managedRoots: MANAGED_ROOTS, ...(permit ? { permit } : {}) },
    rolledBackFrom,
    stateDir: dir,
  };
  return {
    store,
    stateDir: dir,
    async apply(resources: unknown[]) {
      try {
        return await applyDeclaration(ctx, await parse(resources), {
          source: "file",
          origin: "test",
        });
      } finally {
        await providers.fs.release?.();
      }
    },
    async plan(resources: unknown[]) {
      try {
        return await planDeclaration(ctx, await parse(resources));
      } finally {
        await providers.fs.release?.();
      }
    },
    async [Symbol.asyncDispose]() {
      store.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** The outcome of each resource, as "id:outcome". */
export function outcomes(report: ApplyReport): string[] {
  return report.results.map((r) => `${r.id}:${r.outcome}`);
}

/** A resource, typed loosely for test declarations. */
export type TestResource = Partial<Resource> & { type: string; id: string };
