/**
 * The own paths and the bundle path the program carries; mod.ts hands them to the
 * core. Run from the checkout (`deno task host`) it is every OS's list and the
 * default bundle; `deno task build <os>` replaces this module, through an import
 * map, with a generated one stating that OS's list alone and where that OS's
 * installation puts substrate.lock (packaging/build.ts).
 */
import { ALL_OWN_PATHS } from "./own_paths_by_os.ts";

/** The host's own paths (patterns may hold `*` within a component). */
export const OWN_PATHS: readonly string[] = ALL_OWN_PATHS;

/** The bundle the installation ships; undefined: the configuration's default. */
export const BUNDLE_PATH: string | undefined = undefined;
