/**
 * nox-mesh-host: the agent that makes a machine match its declared state.
 * Run it for the command line (main.ts is the program the packages carry); import it for
 * the library, whose applies all go through the apply lock and a person's hold.
 */
import { program } from "./main.ts";

export { main } from "./src/cli/main.ts";
export { EXIT } from "./src/cli/io.ts";
export type { CliIo } from "./src/cli/io.ts";
export { type Declaration, DeclarationRefused, type Problem } from "./src/declaration/envelope.ts";
export type * from "./src/resources/mod.ts";
export { type HostConfig, loadConfig } from "./src/config.ts";
// The engine only through its mod.ts: every apply takes the apply lock and is refused while
// a person holds the host (tests/architecture_test.ts); the store only as the engine's type.
export {
  admit,
  apply,
  type ApplyReport,
  applyText,
  type Engine,
  HeldError,
  openEngine,
  plan,
  type PlanEntry,
  planText,
} from "./src/engine/mod.ts";
export type { Store } from "./src/store/store.ts";
export type * from "./src/providers.ts";
export { detectProfile, detectProviders, providersFor } from "./os/mod.ts";
export { type Capability, type CapabilityState, type Profile, profileText } from "./src/profile.ts";
export { PROGRAM, VERSION } from "./src/version.ts";
/** The real process's world (the program, main.ts, runs the command line with it). */
export { processIo } from "./main.ts";

if (import.meta.main) {
  Deno.exit(await program(Deno.args));
}
