/** Each OS's own paths (packaging/<os>/own_paths.ts), and their union for a program built for none. */
import type { TargetOs } from "./permissions.ts";
import { OWN_PATHS as arch } from "./arch/own_paths.ts";
import { OWN_PATHS as alpine } from "./alpine/own_paths.ts";
import { OWN_PATHS as tarball } from "./tarball/own_paths.ts";

/** The own paths of each target OS. */
export const OWN_PATHS_BY_OS: Readonly<Record<TargetOs, readonly string[]>> = {
  arch,
  alpine,
  tarball,
};

/** Every OS's own paths at once: what `deno task host` (built for no one OS) refuses. */
export const ALL_OWN_PATHS: readonly string[] = [...new Set([...arch, ...alpine, ...tarball])];
