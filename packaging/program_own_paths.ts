/**
 * The own paths the program carries; mod.ts hands them to the core. Run from the
 * checkout (`deno task host`) it is every OS's list; `deno task build <os>`
 * replaces this module, through an import map, with a generated one stating that
 * OS's list alone (packaging/build.ts).
 */
import { ALL_OWN_PATHS } from "./own_paths_by_os.ts";

/** The host's own paths (patterns may hold `*` within a component). */
export const OWN_PATHS: readonly string[] = ALL_OWN_PATHS;
