/**
 * The lab's signing keys, made once and cached in the lab cache (like the base images):
 * - a gpg key (ed25519, no passphrase) that signs the lab's pacman packages and
 *   repository database, as an Arch packager's key does; the systemd machines' pacman
 *   keyring trusts it (lab/lib/base.ts, through pacman-key);
 * - a minisign key pair (no password) that signs the tarball's SHA256SUMS.
 * Signing happens in a temporary copy of the gpg home, whose agent is stopped afterwards:
 * nothing keeps running, and concurrent labs never share an agent.
 */
import { join } from "node:path";
import { CACHE_DIR } from "./cache_dir.ts";
import { LabError } from "./errors.ts";
import { exists, run } from "./_process.ts";
import type { GpgSigner, MinisignSigner } from "../../packaging/package_parts.ts";

/** The lab's keys, as files in the cache. */
export interface LabKeys {
  /** The gpg home holding the secret key (never used directly: see {@link withLabGpg}). */
  gnupgHome: string;
  /** The gpg key's fingerprint (40 hex digits). */
  fingerprint: string;
  /** The gpg public key, armored (what pacman-key --add takes). */
  gpgPublic: string;
  /** minisign's secret and public key files. */
  minisignSecret: string;
  minisignPublic: string;
}

const KEY_DIR = "keys-v1";
const GPG_BATCH = `%no-protection
Key-Type: eddsa
Key-Curve: ed25519
Key-Usage: sign
Name-Real: nox-mesh-host lab packager
Name-Email: lab@nox-mesh-host.invalid
Expire-Date: 0
%commit
`;

let made: Promise<LabKeys> | undefined;

/** The lab's keys, generated on first use (under a lock) and cached. */
export function labKeys(log: (line: string) => void = () => {}): Promise<LabKeys> {
  made ??= makeKeys(log);
  made.catch(() => made = undefined);
  return made;
}

async function makeKeys(log: (line: string) => void): Promise<LabKeys> {
  const dir = join(CACHE_DIR, KEY_DIR);
  const keys = {
    gnupgHome: join(dir, "gnupg"),
    gpgPublic: join(dir, "lab-packager.asc"),
    minisignSecret: join(dir, "minisign.key"),
    minisignPublic: join(dir, "minisign.pub"),
  };
  const ready = join(dir, "ready");
  if (!(await exists(ready))) {
    await Deno.mkdir(CACHE_DIR, { recursive: true });
    const lock = await Deno.open(join(CACHE_DIR, `${KEY_DIR}.lock`), {
      create: true,
      write: true,
    });
    try {
      await lock.lock(true);
      if (!(await exists(ready))) {
        log(`making the lab's signing keys (gpg, minisign) once in ${dir}`);
        await Deno.remove(dir, { recursive: true }).catch(() => {});
        await Deno.mkdir(keys.gnupgHome, { recursive: true, mode: 0o700 });
        await Deno.writeTextFile(join(dir, "batch"), GPG_BATCH);
        try {
          await run([
            "gpg",
            "--batch",
            "--homedir",
            keys.gnupgHome,
            "--generate-key",
            join(dir, "batch"),
          ], {
            what: "gpg --generate-key (the lab packager key)",
          });
          const fingerprint = await fingerprintOf(keys.gnupgHome);
          const pub = await run([
            "gpg",
            "--homedir",
            keys.gnupgHome,
            "--armor",
            "--export",
            fingerprint,
          ], {
            what: "gpg --export",
          });
          await Deno.writeTextFile(keys.gpgPublic, pub.stdout);
          await Deno.writeTextFile(join(dir, "fingerprint"), `${fingerprint}\n`);
        } finally {
          // Listing secret keys starts an agent too: stop it after the last gpg call.
          await stopAgent(keys.gnupgHome);
        }
        await run(
          ["minisign", "-G", "-W", "-p", keys.minisignPublic, "-s", keys.minisignSecret],
          { what: "minisign -G (the lab release key)" },
        );
        await Deno.rename(join(dir, "fingerprint"), ready);
      }
    } finally {
      lock.close();
    }
  }
  const fingerprint = (await Deno.readTextFile(ready)).trim();
  if (!/^[0-9A-F]{40}$/.test(fingerprint)) {
    throw new LabError("base-build-failed", `${ready} holds no fingerprint; remove ${dir}`);
  }
  return { ...keys, fingerprint };
}

async function fingerprintOf(home: string): Promise<string> {
  const r = await run(["gpg", "--homedir", home, "--with-colons", "--list-secret-keys"], {
    what: "gpg --list-secret-keys",
  });
  const fpr = r.stdout.split("\n").find((l) => l.startsWith("fpr:"))?.split(":")[9];
  if (!fpr) throw new LabError("command-failed", `gpg listed no key in ${home}`);
  return fpr;
}

async function stopAgent(home: string): Promise<void> {
  await run(["gpgconf", "--homedir", home, "--kill", "all"], { check: false, what: "gpgconf" });
}

/**
 * Runs `fn` with a gpg signer on a temporary copy of the lab key's home, then stops
 * that copy's agent and removes it.
 */
export async function withLabGpg<T>(
  keys: LabKeys,
  fn: (signer: GpgSigner) => Promise<T>,
): Promise<T> {
  const home = await Deno.makeTempDir({ prefix: "noxgpg-" });
  try {
    await run(["cp", "-a", `${keys.gnupgHome}/.`, home], { what: "copy the lab gpg home" });
    await Deno.chmod(home, 0o700);
    return await fn({ gnupgHome: home, key: keys.fingerprint });
  } finally {
    await stopAgent(home);
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}

/** The minisign signer of the lab's tarball. */
export function labMinisign(keys: LabKeys): MinisignSigner {
  return { secretKey: keys.minisignSecret, publicKey: keys.minisignPublic };
}
