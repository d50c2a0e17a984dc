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
import type { BrokerEntry } from "./token.ts";
import { isTrustProblem, parseTrustList, type TrustList } from "./trust.ts";

/** The seed file's name inside the state directory. */
export const SEED_FILE = "node.nk";

/** Who this node is and where its link goes. */
export interface Identity {
  node: string;
  /**
   * The cluster's servers; a node enrolled with a version 3 token keeps each one's pin
   * (that certificate stays accepted, a renewed one must chain to the CA and name it).
   */
  brokers: BrokerEntry[];
  /** The token's CA certificate (PEM): the trust list's start. */
  ca: string;
  /**
   * What a broker's certificate must chain to: the token's CA (serial 0), or the last
   * signed trust update the node took (trust.ts).
   */
  trust: TrustList;
  seedFile: string;
  publicKey: string;
  enrolledAt: string;
  /**
   * The pinned signing public key ("O…"); empty for a node enrolled before
   * declarations were signed (then every pushed declaration is refused).
   */
  signer: string;
}

/**
 * The identity in the store, or undefined when the node is not enrolled. An
 * identity written before token version 3 (one `link_url` and `link_pin`) reads
 * as a list of one broker.
 */
export function readIdentity(store: Store): Identity | undefined {
  const node = store.meta(META.node);
  const brokers = readBrokers(store);
  const ca = store.meta(META.ca);
  const seedFile = store.meta(META.seedFile);
  const publicKey = store.meta(META.publicKey);
  if (!node || !brokers || !ca || !seedFile || !publicKey) return undefined;
  return {
    node,
    brokers,
    ca,
    trust: readTrust(store) ?? { serial: 0, cas: [{ pem: ca }] },
    seedFile,
    publicKey,
    enrolledAt: store.meta(META.enrolledAt) ?? "",
    signer: store.meta(META.signer) ?? "",
  };
}

/**
 * Record an identity; the node id goes last, so a half-written identity is no
 * identity. The serials accepted so far stay: they are kept per signing key and
 * node (the store's `link_serials`), so a node enrolled again under a name it
 * had before still refuses what that key signed for that name before.
 */
export function writeIdentity(store: Store, identity: Identity): void {
  store.setMeta(META.signerRotated, undefined);
  store.setMeta(META.trust, identity.trust.serial > 0 ? JSON.stringify(identity.trust) : undefined);
  store.setMeta(META.brokers, JSON.stringify(identity.brokers));
  store.setMeta(META.url, undefined);
  store.setMeta(META.pin, undefined);
  store.setMeta(META.ca, identity.ca);
  store.setMeta(META.seedFile, identity.seedFile);
  store.setMeta(META.publicKey, identity.publicKey);
  store.setMeta(META.enrolledAt, identity.enrolledAt);
  store.setMeta(META.signer, identity.signer);
  store.setMeta(META.node, identity.node);
}

/** The last trust update this node took, or undefined (it trusts the token's CA). */
export function readTrust(store: Store): TrustList | undefined {
  const text = store.meta(META.trust);
  if (text === undefined) return undefined;
  const list = parseTrustList(text);
  return isTrustProblem(list) ? undefined : list;
}

/** Record a trust update taken (synced: an older one must never come back after a power cut). */
export function writeTrust(store: Store, list: TrustList): void {
  store.setMetaDurably({ [META.trust]: JSON.stringify(list) });
}

/** The brokers the store names (the list, or the single broker of an older identity). */
function readBrokers(store: Store): BrokerEntry[] | undefined {
  const text = store.meta(META.brokers);
  if (text !== undefined) {
    try {
      const list = JSON.parse(text);
      if (
        Array.isArray(list) && list.length > 0 &&
        list.every((b) =>
          typeof b?.url === "string" && (b.pin === undefined || typeof b.pin === "string")
        )
      ) return list.map((b) => (b.pin === undefined ? { url: b.url } : { url: b.url, pin: b.pin }));
    } catch { /* unreadable: no identity */ }
    return undefined;
  }
  const url = store.meta(META.url);
  const pin = store.meta(META.pin);
  return url && pin ? [{ url, pin }] : undefined;
}

/** The brokers as one line for people: "tls://a:4222, tls://b:4222". */
export function brokerList(identity: Pick<Identity, "brokers">): string {
  return identity.brokers.map((b) => b.url).join(", ");
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
