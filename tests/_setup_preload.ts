/**
 * Preloaded by `deno task test` and `deno task lab` (deno.json): every program the test or
 * lab process starts must be one lab/setup.sh installs (tests/_setup_programs.ts).
 */
import { checkEveryStart } from "./_setup_programs.ts";

checkEveryStart();
