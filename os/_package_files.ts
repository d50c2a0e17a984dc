/** Finding a package file of an exact version in directories (caches, kept copies). */
import { posix } from "node:path";

/**
 * The first file (by directory order given, then by name) whose name matches
 * `pattern(name, version)`; `undefined` when none does. Missing directories are skipped.
 */
export async function findPackageFile(
  dirs: readonly string[],
  name: string,
  version: string,
  pattern: (name: string, version: string) => RegExp,
): Promise<string | undefined> {
  const wanted = pattern(name, version);
  for (const dir of dirs) {
    const names: string[] = [];
    try {
      for await (const entry of Deno.readDir(dir)) {
        if (entry.isFile && wanted.test(entry.name)) names.push(entry.name);
      }
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      throw error;
    }
    names.sort();
    if (names.length > 0) return posix.join(dir, names[0]);
  }
  return undefined;
}
