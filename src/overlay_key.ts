/**
 * This node's WireGuard key pair (DESIGN.md §17): made on the node with Web
 * Crypto's X25519, the private key written once to <state-dir>/wireguard.key
 * (mode 0600, created on a descriptor that refuses an existing name, so never
 * through a symlink), never put in a declaration, a report or the store. Only
 * the public key leaves this module: the inventory shows it for the control
 * plane, and the overlay kind hands the file's path to the WireGuard tool.
 */
import { posix } from "./posix_path.ts";
import { HostError } from "./errors.ts";

/** The key file's name inside the state directory. */
export const OVERLAY_KEY_FILE = "wireguard.key";

/** Where the key lives, and its public half. */
export interface OverlayKey {
  path: string;
  /** base64 of the 32-byte X25519 public key (as `wg pubkey` prints it). */
  publicKey: string;
}

/** The key file cannot be made or used. */
export class OverlayKeyError extends HostError {}

// PKCS#8 wrapping of a raw X25519 private key (RFC 8410): 16 bytes, then the 32-byte key.
const PKCS8_X25519 = new Uint8Array([
  0x30,
  0x2e,
  0x02,
  0x01,
  0x00,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x6e,
  0x04,
  0x22,
  0x04,
  0x20,
]);

const KEY_TEXT = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

function toBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** Whether text is a WireGuard key: base64 of exactly 32 bytes. */
export function isWireguardKey(text: string): boolean {
  return KEY_TEXT.test(text);
}

/** The public key of a base64 private key (X25519, as `wg pubkey`). */
export async function publicKeyOf(privateKey: string): Promise<string> {
  const raw = fromBase64(privateKey);
  const key = await crypto.subtle.importKey(
    "pkcs8",
    new Uint8Array([...PKCS8_X25519, ...raw]),
    { name: "X25519" },
    true,
    ["deriveBits"],
  );
  const jwk = await crypto.subtle.exportKey("jwk", key);
  const x = (jwk.x ?? "").replace(/-/g, "+").replace(/_/g, "/");
  return toBase64(fromBase64(x + "=".repeat((4 - x.length % 4) % 4)));
}

/** The key file's path for a state directory. */
export function overlayKeyPath(stateDir: string): string {
  return posix.join(stateDir, OVERLAY_KEY_FILE);
}

/**
 * Read this node's key, checking the file is a regular file (not a link),
 * private (no access for group or others) and holds a key. `undefined` when
 * there is no key yet.
 */
export async function readOverlayKey(stateDir: string): Promise<OverlayKey | undefined> {
  const path = overlayKeyPath(stateDir);
  const refused = (why: string) =>
    new OverlayKeyError("overlay.key", `the WireGuard key file ${path} ${why}`, {
      hint: `remove it (the host then makes a new key, and the control plane must learn the ` +
        `new public key from the inventory)`,
    });
  let before: Deno.FileInfo;
  try {
    before = await Deno.lstat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
  if (!before.isFile) throw refused("is not a regular file (a link or something else)");
  const file = await Deno.open(path, { read: true });
  let text: string;
  try {
    const info = await file.stat();
    if (info.ino !== before.ino || info.dev !== before.dev) throw refused("changed while opened");
    if (info.mode !== null && (info.mode & 0o077) !== 0) {
      throw refused(`is readable by others (mode ${(info.mode & 0o777).toString(8)})`);
    }
    if (info.size > 1024) throw refused("is too large to hold a key");
    const buffer = new Uint8Array(info.size);
    let read = 0;
    while (read < buffer.length) {
      const n = await file.read(buffer.subarray(read));
      if (n === null) break;
      read += n;
    }
    text = new TextDecoder().decode(buffer.subarray(0, read)).trim();
  } finally {
    file.close();
  }
  if (!isWireguardKey(text)) throw refused("does not hold a WireGuard key (base64 of 32 bytes)");
  return { path, publicKey: await publicKeyOf(text) };
}

/**
 * This node's key, made now when there is none: 32 random bytes from Web
 * Crypto's X25519, written to a file created exclusively with mode 0600.
 *
 * @example
 * ```ts
 * const { publicKey } = await ensureOverlayKey("/var/lib/mesh-host");
 * ```
 */
export async function ensureOverlayKey(stateDir: string): Promise<OverlayKey> {
  const existing = await readOverlayKey(stateDir);
  if (existing) return existing;
  const pair = await crypto.subtle.generateKey({ name: "X25519" }, true, ["deriveBits"]);
  const pkcs8 = new Uint8Array(
    await crypto.subtle.exportKey("pkcs8", (pair as CryptoKeyPair).privateKey),
  );
  const privateKey = toBase64(pkcs8.slice(PKCS8_X25519.length));
  const path = overlayKeyPath(stateDir);
  let file: Deno.FsFile;
  try {
    // createNew = O_CREAT|O_EXCL: an existing name (a file, or a symlink planted
    // by someone) fails instead of being followed or overwritten.
    file = await Deno.open(path, { createNew: true, write: true, mode: 0o600 });
  } catch (error) {
    if (error instanceof Deno.errors.AlreadyExists) {
      const raced = await readOverlayKey(stateDir);
      if (raced) return raced;
    }
    throw new OverlayKeyError("overlay.key", `cannot create the WireGuard key file ${path}`, {
      hint: "check that the state directory exists and belongs to the host",
      cause: error,
    });
  }
  try {
    await file.write(new TextEncoder().encode(privateKey + "\n"));
    await file.syncData();
  } finally {
    file.close();
  }
  return { path, publicKey: await publicKeyOf(privateKey) };
}
