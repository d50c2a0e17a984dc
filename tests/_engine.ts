/** Shared by kind tests: a real store in a temp directory and the real engine. */
import { applyDeclaration } from "../src/engine/apply.ts";
import type { ApplyReport } from "../src/engine/types.ts";
import { parseTrustedDeclaration } from "../src/engine/parse.ts";
import type { Resource } from "../src/resources/mod.ts";
import type { Providers } from "../src/providers.ts";
import { Store } from "../src/store/store.ts";

const MANAGED_ROOTS = ["/etc", "/srv", "/tmp"];

/** An engine over a fresh store; dispose to close and delete it. */
export interface TestEngine extends AsyncDisposable {
  store: Store;
  /** Apply these resources (trusted parse: actions allowed) and return the report. */
  apply(resources: unknown[]): Promise<ApplyReport>;
}

/** Open a store in a temp directory and apply declarations with `providers`. */
export async function testEngine(
  providers: Providers,
  { rolledBackFrom }: { rolledBackFrom?: ReadonlySet<string> } = {},
): Promise<TestEngine> {
  const dir = await Deno.makeTempDir({ prefix: "noxad-store-" });
  const store = Store.open(dir);
  return {
    store,
    async apply(resources: unknown[]) {
      const declaration = await parseTrustedDeclaration(
        JSON.stringify({ version: 1, resources }),
        { managedRoots: MANAGED_ROOTS, own: { paths: [], services: ["nox-mesh-host"] } },
      );
      return applyDeclaration(
        { store, providers, config: { managedRoots: MANAGED_ROOTS }, rolledBackFrom },
        declaration,
        {
          source: "file",
          origin: "test",
        },
      );
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
