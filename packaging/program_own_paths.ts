/**
 * The own paths, the bundle path and the program path the program carries; main.ts hands
 * them to the core and to the file system. Run from the checkout (`deno task host`) it is
 * every OS's list, the default bundle and no program path (the file system then runs the
 * checkout's development shim, packaging/dev/nox-mesh-host); `deno task build <os>`
 * replaces this module, through an import map, with a generated one stating that OS's
 * list alone, where that OS's installation puts substrate.lock, and its program (the
 * permission file's `binary`) (packaging/build.ts).
 */
import { ALL_OWN_PATHS } from "./own_paths_by_os.ts";

/** The host's own paths (patterns may hold `*` within a component). */
export const OWN_PATHS: readonly string[] = ALL_OWN_PATHS;

/** The bundle the installation ships; undefined: the configuration's default. */
export const BUNDLE_PATH: string | undefined = undefined;

/** The host's own program as installed (the permission file's `binary`); undefined: a checkout. */
export const SELF_PROGRAM: string | undefined = undefined;
