/**
 * nox-mesh-host: the agent that makes a machine match its declared state.
 * Run it for the command line; import it for the library.
 */
import { main } from "./src/cli/main.ts";
import type { CliIo } from "./src/cli/io.ts";
import { detectProfile, detectProviders, fileProviders } from "./os/mod.ts";
import { BUNDLE_PATH, OWN_PATHS } from "./packaging/program_own_paths.ts";

export { main } from "./src/cli/main.ts";
export { EXIT } from "./src/cli/io.ts";
export type { CliIo } from "./src/cli/io.ts";
export { applyDeclaration } from "./src/engine/apply.ts";
export { planDeclaration } from "./src/engine/plan.ts";
export { type Declaration, DeclarationRefused, type Problem } from "./src/declaration/envelope.ts";
export { parseDeclaration, parseTrustedDeclaration } from "./src/engine/parse.ts";
export type * from "./src/resources/mod.ts";
export { type HostConfig, loadConfig } from "./src/config.ts";
export {
  admit,
  apply,
  type ApplyReport,
  applyText,
  type Engine,
  openEngine,
  plan,
  type PlanEntry,
  planText,
} from "./src/engine/mod.ts";
export { Store } from "./src/store/store.ts";
export type * from "./src/providers.ts";
export { detectProfile, detectProviders, providersFor } from "./os/mod.ts";
export { type Capability, type CapabilityState, type Profile, profileText } from "./src/profile.ts";
export { PROGRAM, VERSION } from "./src/version.ts";

/** The real process's world: its streams, its signals, this machine's adapters. */
export function processIo(): CliIo {
  const encoder = new TextEncoder();
  const write = (stream: typeof Deno.stdout) => (text: string) => {
    const bytes = encoder.encode(text);
    let written = 0;
    while (written < bytes.length) written += stream.writeSync(bytes.subarray(written));
  };
  const aborter = new AbortController();
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    Deno.addSignalListener(signal, () => {
      // The first signal stops the apply between two steps; a second one insists.
      if (aborter.signal.aborted) Deno.exit(130);
      aborter.abort(signal);
    });
  }
  return {
    stdout: write(Deno.stdout),
    stderr: write(Deno.stderr),
    stdin: () => new Response(Deno.stdin.readable).bytes(),
    providers: (scope, config) =>
      scope === "files"
        ? Promise.resolve(fileProviders({ stateDir: config.stateDir }))
        : detectProviders({ packageManager: config.packageManager, stateDir: config.stateDir }),
    profile: () => detectProfile(),
    signal: aborter.signal,
    ownPaths: OWN_PATHS,
    bundlePath: BUNDLE_PATH,
  };
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args, processIo()));
}
