/**
 * A host enrolled in-process for the run loop's tests that need no broker (with
 * tests/_memory_uplink.ts): an identity in the store and a signing key pinned, and the
 * small things those tests share.
 */
import { posix } from "node:path";
import { openEngine } from "../src/engine/mod.ts";
import { type Identity, writeIdentity } from "../src/link/identity.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { makeCa } from "../lab/lib/certs.ts";
import type { scratch } from "./_helpers.ts";

/** A host enrolled as `node` (an identity in the store, the key `signer` pinned), on `s`. */
export async function enrolled(
  s: Awaited<ReturnType<typeof scratch>>,
  node: string,
  signer: string,
) {
  const host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: posixFileSystem() }),
  });
  const ca = await makeCa(posix.join(s.dir, "ca.pem"), posix.join(s.dir, "ca.key"), {
    name: "memory mesh CA",
  });
  const identity: Identity = {
    node,
    brokers: [{ url: "tls://127.0.0.1:4222" }],
    ca,
    trust: { serial: 0, cas: [{ pem: ca }] },
    seedFile: posix.join(s.stateDir, "node.nk"),
    jwtFile: "",
    publicKey: "UMEMORYNODE",
    enrolledAt: new Date().toISOString(),
    signer,
  };
  writeIdentity(host.store, identity);
  return host;
}

/** Wait (up to 60 s) until `probe` says something. */
export async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A file resource at `path`, root's, 0644. */
export const fileAt = (id: string, path: string, content: string) => ({
  type: "file",
  id,
  path,
  content,
  mode: "0644",
  owner: "root",
  group: "root",
});
