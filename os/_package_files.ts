/** Finding a package file of an exact version in directories (caches, kept copies). */
import { posix } from "node:path";

/** What a search found: the file, and the directories the permission set kept it out of. */
export interface FileSearch {
  file?: string;
  unreadable: string[];
}

/**
 * The first file (by directory order given, then by name) whose name matches
 * `pattern(name, version)`. Missing directories are skipped; directories this
 * build may not read are skipped and named.
 */
export async function findPackageFile(
  dirs: readonly string[],
  name: string,
  version: string,
  pattern: (name: string, version: string) => RegExp,
): Promise<FileSearch> {
  const wanted = pattern(name, version);
  const unreadable: string[] = [];
  for (const dir of dirs) {
    const names: string[] = [];
    try {
      for await (const entry of Deno.readDir(dir)) {
        if (entry.isFile && wanted.test(entry.name)) names.push(entry.name);
      }
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      if (error instanceof Deno.errors.NotCapable) {
        unreadable.push(dir);
        continue;
      }
      throw error;
    }
    names.sort();
    if (names.length > 0) return { file: posix.join(dir, names[0]), unreadable };
  }
  return { unreadable };
}

/** The sentence about where no package file was found. */
export function whereNot(dirs: readonly string[], search: FileSearch): string {
  const readable = dirs.filter((d) => !search.unreadable.includes(d));
  return [
    readable.length ? `no package file of it is in ${readable.join(", ")}` : "",
    search.unreadable.length
      ? `this build may not read ${search.unreadable.join(", ")} (add it to the permission set)`
      : "",
  ].filter(Boolean).join("; ");
}

/** Text made literal inside a regular expression. */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
