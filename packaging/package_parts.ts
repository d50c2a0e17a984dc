/**
 * What every package recipe shares: its error, the signers, the man pages, the bundled
 * program's files and the time its entries carry. make_package.ts packs Arch, Alpine and the
 * tarball and loads a distribution's own recipe (packaging/<id>/recipe.ts), which takes
 * these from here: a recipe never imports make_package.ts, which imports it.
 */
import { HostError } from "../src/errors.ts";
import type { BuildResult } from "./build.ts";

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;

/** A packaging step failed. */
export class PackageError extends HostError {
  constructor(what: string, hint: string) {
    super("packaging.package", what, { hint });
  }
}

/** Signs Arch packages and repository databases: a gpg home and the key to sign with. */
export interface GpgSigner {
  /** GNUPGHOME holding the secret key (an unprotected key, or an agent that has its passphrase). */
  gnupgHome?: string;
  /** Key id or fingerprint. */
  key: string;
}

/** Signs the tarball's SHA256SUMS with minisign. */
export interface MinisignSigner {
  /** The secret key file (made with `minisign -G -W`: no password). */
  secretKey: string;
  /** Its public key file, copied beside the tarball as minisign.pub. */
  publicKey: string;
}

/** The man pages the packages carry (sources packaging/man/<page>.scd, built by scdoc). */
export const MAN_PAGES = [
  "nox-mesh-host.8",
  "nox-mesh-host-launch.8",
  "host.json.5",
  "nox-mesh-host-declaration.5",
] as const;

/** The files of the bundled program (build.json's `bundle`), entry first. */
export function programFiles(b: BuildResult): string[] {
  if (b.form !== "bundled" || !b.bundle?.length) {
    throw new PackageError(`the build in ${b.dir} has no bundled program`, "build it bundled");
  }
  return b.bundle;
}

/** The time every entry of the tarball carries: SOURCE_DATE_EPOCH, else the commit's. */
export async function tarballTime(): Promise<number> {
  const fixed = Deno.env.get("SOURCE_DATE_EPOCH");
  if (fixed && /^[0-9]+$/.test(fixed)) return Number(fixed);
  const out = await new Deno.Command("git", {
    args: ["-C", repo(""), "show", "-s", "--format=%ct", "HEAD"],
    stdin: "null",
    stderr: "null",
  }).output().catch(() => undefined);
  const t = out?.success ? Number(new TextDecoder().decode(out.stdout).trim()) : NaN;
  return Number.isSafeInteger(t) ? t : 0;
}
