/**
 * The node's identity: who it is and where its link goes, in the store's meta
 * table, plus its NKey seed in <state-dir>/node.nk (mode 0600). The seed never
 * leaves the machine and is never copied into the store; the store holds no
 * credential to anything (only the path of the seed file).
 */
import { posix } from "node:path";
import { fromSeed } from "@nats-io/nkeys";
import { META } from "../store/meta.ts";
import type { Store } from "../store/store.ts";
import { LinkError } from "./errors.ts";

/** The seed file's name inside the state directory. */
export const SEED_FILE = "node.nk";

/** Who this node is and where its link goes. */
export interface Identity {
  node: string;
  url: string;
  /** The broker's CA certificate (PEM). */
  ca: string;
  /** SHA-256 fingerprint of the broker's certificate, "AB:CD:…". */
  pin: string;
  seedFile: string;
  publicKey: string;
  enrolledAt: string;
  /**
   * The pinned signing public key ("O…"); empty for a node enrolled before
   * declarations were signed (then every pushed declaration is refused).
   */
  signer: string;
}

/** The identity in the store, or undefined when the node is not enrolled. */
export function readIdentity(store: Store): Identity | undefined {
  const node = store.meta(META.node);
  const url = store.meta(META.url);
  const ca = store.meta(META.ca);
  const pin = store.meta(META.pin);
  const seedFile = store.meta(META.seedFile);
  const publicKey = store.meta(META.publicKey);
  if (!node || !url || !ca || !pin || !seedFile || !publicKey) return undefined;
  return {
    node,
    url,
    ca,
    pin,
    seedFile,
    publicKey,
    enrolledAt: store.meta(META.enrolledAt) ?? "",
    signer: store.meta(META.signer) ?? "",
  };
}

/**
 * Record an identity; the node id goes last, so a half-written identity is no
 * identity. A different node id or signing key starts a fresh serial sequence.
 */
export function writeIdentity(store: Store, identity: Identity): void {
  if (store.meta(META.node) !== identity.node || store.meta(META.signer) !== identity.signer) {
    store.setMeta(META.serial, undefined);
    store.setMeta(META.digest, undefined);
  }
  store.setMeta(META.url, identity.url);
  store.setMeta(META.ca, identity.ca);
  store.setMeta(META.pin, identity.pin);
  store.setMeta(META.seedFile, identity.seedFile);
  store.setMeta(META.publicKey, identity.publicKey);
  store.setMeta(META.enrolledAt, identity.enrolledAt);
  store.setMeta(META.signer, identity.signer);
  store.setMeta(META.node, identity.node);
}

/** Where the seed lives for a state directory. */
export function seedPath(stateDir: string): string {
  return posix.join(stateDir, SEED_FILE);
}

/** Write a seed: a new file created 0600 beside it, then renamed over, then the directory synced. */
export async function writeSeed(path: string, seed: Uint8Array): Promise<void> {
  const temp = `${path}.new`;
  await Deno.remove(temp).catch(() => {});
  const file = await Deno.open(temp, { createNew: true, write: true, mode: 0o600 });
  try {
    await file.write(seed);
    await file.syncData();
  } finally {
    file.close();
  }
  await Deno.rename(temp, path);
}

/** Read the seed and check that it is private and is the key the store names. */
export async function readSeed(
  identity: Pick<Identity, "seedFile" | "publicKey">,
): Promise<Uint8Array> {
  const path = identity.seedFile;
  let seed: Uint8Array;
  try {
    const info = await Deno.stat(path);
    if (info.mode !== null && (info.mode & 0o077) !== 0) {
      throw new LinkError(
        "auth",
        "node",
        `the key file ${path} is readable by others (mode ${(info.mode & 0o777).toString(8)})`,
        { hint: `make it private: chmod 600 ${path}` },
      );
    }
    seed = new TextEncoder().encode((await Deno.readTextFile(path)).trim());
  } catch (error) {
    if (error instanceof LinkError) throw error;
    throw new LinkError(
      "auth",
      "node",
      `cannot read this node's key ${path}: ${(error as Error).message}`,
      {
        hint: "the key is made at enrolment; enrol again with a fresh token if it is lost",
        cause: error,
      },
    );
  }
  let publicKey: string;
  try {
    publicKey = fromSeed(seed).getPublicKey();
  } catch (error) {
    throw new LinkError("auth", "node", `the key file ${path} does not hold an NKey seed`, {
      hint: "enrol again with a fresh token",
      cause: error,
    });
  }
  if (publicKey !== identity.publicKey) {
    throw new LinkError(
      "auth",
      "node",
      `the key in ${path} (${publicKey}) is not the enrolled key ${identity.publicKey}`,
      { hint: "restore the key file, or enrol again with a fresh token" },
    );
  }
  return seed;
}
