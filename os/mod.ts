/**
 * The adapters this machine has. The file system is always there; the others
 * are detected from the machine's profile as their adapters land.
 */
import type { Providers } from "../src/ports.ts";
import { posixFileSystem } from "./posix_fs.ts";

/** The providers for this machine. */
export function detectProviders(): Promise<Providers> {
  return Promise.resolve({ fs: posixFileSystem() });
}
