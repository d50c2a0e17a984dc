/**
 * `deno task package <os> [--pkgrel N] [--form F] [--version V] [--sign KEY] [--minisign-key FILE]`:
 * builds the host (packaging/build.ts) and packs it with the launcher, the init files, the
 * licence, the man pages (scdoc, at package time) and the shell completions:
 * - arch: makepkg (as `nobody`) into dist/arch/repo/, a local pacman repository; with
 *   --sign KEY the package and the database are signed with that gpg key;
 * - tarball: dist/tarball/nox-mesh-host-<version>-<arch>.tar.gz (unpacked with
 *   `tar -xz -C /usr/local`; reproducible) + SHA256SUMS; with --minisign-key FILE also
 *   SHA256SUMS.minisig;
 * - alpine: stages dist/alpine/apkbuild/ for abuild (no apk/abuild here; abuild signs).
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { HostError } from "../src/errors.ts";
import { build, BUILD_ARCHES, type BuildResult } from "./build.ts";
import type { RuntimeArch } from "./tarball/runtime.ts";
import { TARGET_OSES, type TargetOs } from "./permissions.ts";
import { SHELLS } from "../src/cli/completions.ts";
import { IMAGE_FILE } from "./image.ts";
import { tarballConfd, tarballInitd, tarballUnit } from "./tarball/init_files.ts";
import { TARBALL_LAYOUT } from "../os/tarball_layout.ts";

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;

/** A packaging step failed. */
export class PackageError extends HostError {
  constructor(what: string, hint: string) {
    super("packaging.package", what, { hint });
  }
}

async function run(cmd: string, args: string[], env?: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdin: "null" }).output();
  const d = new TextDecoder();
  if (!out.success) {
    throw new PackageError(
      `${cmd} ${args.join(" ")} failed (exit ${out.code}):\n${d.decode(out.stdout)}${
        d.decode(out.stderr)
      }`,
      "read the output above",
    );
  }
  return d.decode(out.stdout);
}

/**
 * Build the PKGBUILD in `buildDir` with makepkg as the unprivileged user nobody
 * (makepkg refuses root), putting the package into `destDir`. `env` adds
 * makepkg settings (e.g. PKGEXT); `args` are makepkg's own options.
 */
export async function makepkgAsNobody(
  buildDir: string,
  destDir: string,
  { env = {}, args = [] }: { env?: Record<string, string>; args?: string[] } = {},
): Promise<void> {
  await run("chown", ["-R", "nobody:nogroup", buildDir, destDir]);
  await run("setpriv", [
    "--reuid=nobody",
    "--regid=nogroup",
    "--clear-groups",
    "--",
    "env",
    `HOME=${buildDir}`,
    `PKGDEST=${destDir}`,
    ...Object.entries(env).map(([name, value]) => `${name}=${value}`),
    "sh",
    "-c",
    'cd "$1" && shift && exec makepkg --force --nocolor "$@"',
    "makepkg",
    buildDir,
    ...args,
  ]);
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

function gpgEnv(signer: GpgSigner): Record<string, string> | undefined {
  return signer.gnupgHome ? { GNUPGHOME: signer.gnupgHome } : undefined;
}

/** Writes FILE.sig, a detached binary signature, as makepkg --sign does. */
export async function signFile(file: string, signer: GpgSigner): Promise<void> {
  await run("gpg", [
    "--batch",
    "--yes",
    "--no-armor",
    "--local-user",
    signer.key,
    "--output",
    `${file}.sig`,
    "--detach-sign",
    file,
  ], gpgEnv(signer));
}

/** repo-add: adds package files to a database; with a signer, signs the database too. */
export async function repoAdd(
  db: string,
  files: readonly string[],
  signer?: GpgSigner,
): Promise<void> {
  const sign = signer ? ["--sign", "--key", signer.key] : [];
  await run("repo-add", ["-q", ...sign, db, ...files], signer ? gpgEnv(signer) : undefined);
}

/** The man pages the packages carry (sources packaging/man/<page>.scd, built by scdoc). */
export const MAN_PAGES = [
  "nox-mesh-host.8",
  "nox-mesh-host-launch.8",
  "host.json.5",
  "nox-mesh-host-declaration.5",
] as const;

/** The files every package carries beside the host: licence, man sources, completions. */
function docFiles(b: BuildResult): Record<string, string> {
  const files: Record<string, string> = { LICENSE: repo("LICENSE") };
  for (const shell of SHELLS) {
    files[`nox-mesh-host.${shell}`] = join(b.dir, "completions", `nox-mesh-host.${shell}`);
  }
  for (const page of MAN_PAGES) files[`${page}.scd`] = repo(`packaging/man/${page}.scd`);
  return files;
}

async function digest(path: string, algorithm: "SHA-256" | "SHA-512"): Promise<string> {
  const hash = await crypto.subtle.digest(algorithm, await Deno.readFile(path));
  return Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Copies the built host and the launcher/init files named in `files` into `stage`. */
async function stage(b: BuildResult, dir: string, files: Record<string, string>): Promise<void> {
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  for (const [name, from] of Object.entries(files)) {
    await Deno.copyFile(from.startsWith("/") ? from : join(b.dir, from), join(dir, name));
  }
}

/**
 * The host files of a build: the program, plus the bundle in the bundled form (its parts
 * in one archive, PROGRAM_ARCHIVE, which makepkg and abuild unpack into the source
 * directory: their names are digests, which a recipe cannot list), and the runtime with
 * its licence where the build carries one (the tarball, Arch).
 */
async function hostFiles(b: BuildResult): Promise<Record<string, string>> {
  const files: Record<string, string> = { "nox-mesh-host": "nox-mesh-host" };
  if (b.form === "bundled") files[PROGRAM_ARCHIVE] = await programArchive(b);
  if (b.form === "bundled" && b.runtime) {
    files["deno"] = "deno";
    files["deno.LICENSE"] = "deno.LICENSE";
  }
  return files;
}

/** The bundled program's parts, for the recipes: unpacked to nox-mesh-host-js/ (`*.js`). */
export const PROGRAM_ARCHIVE = "nox-mesh-host-js.tar";

/** The files of the bundled program (build.json's `bundle`), entry first. */
export function programFiles(b: BuildResult): string[] {
  if (b.form !== "bundled" || !b.bundle?.length) {
    throw new PackageError(`the build in ${b.dir} has no bundled program`, "build it bundled");
  }
  return b.bundle;
}

/**
 * Writes PROGRAM_ARCHIVE beside the build: the bundle's files under nox-mesh-host-js/,
 * owner 0:0, mode 0644, the tarball's time (the same build gives the same bytes, and so
 * the same sha512sums). Returns its path.
 */
async function programArchive(b: BuildResult): Promise<string> {
  const top = join(b.dir, "nox-mesh-host-js");
  await Deno.remove(top, { recursive: true }).catch(() => {});
  await Deno.mkdir(top);
  const names = programFiles(b);
  for (const name of names) {
    await Deno.copyFile(join(b.dir, name), join(top, name));
    await Deno.chmod(join(top, name), 0o644);
  }
  const archive = join(b.dir, PROGRAM_ARCHIVE);
  await run("tar", [
    "--create",
    "--file",
    archive,
    ...await reproducibleTar(),
    "-C",
    b.dir,
    "--",
    "nox-mesh-host-js",
    ...names.map((n) => `nox-mesh-host-js/${n}`),
  ]);
  await Deno.remove(top, { recursive: true });
  return archive;
}

/**
 * makepkg (as nobody) into `<dir>/repo`, then repo-add; returns the package file. With a
 * signer the package gets its detached signature (FILE.sig) and the database is signed.
 */
export async function packageArch(
  b: BuildResult,
  pkgrel = 1,
  { sign }: { sign?: GpgSigner } = {},
): Promise<string> {
  const dir = join(b.dir, "makepkg");
  if (b.form === "bundled" && !b.runtime) {
    throw new PackageError(
      `the bundled build in ${b.dir} carries no Deno runtime`,
      "build it with packaging/build.ts for os arch",
    );
  }
  await stage(b, dir, {
    ...await hostFiles(b),
    ...docFiles(b),
    "substrate.lock": "substrate.lock",
    "pause-image.oci": `images/${IMAGE_FILE}`,
    "nox-mesh-host-launch": repo("launcher/nox-mesh-host-launch"),
    "launch-pacman.sh": repo("launcher/pkg/pacman.sh"),
    "nox-mesh-host.service": repo("packaging/arch/nox-mesh-host.service"),
  });
  const pkgbuild = (await Deno.readTextFile(repo("packaging/arch/PKGBUILD")))
    .replace(/^_form=.*$/m, `_form=${b.form}`)
    .replace(/^pkgver=.*$/m, `pkgver=${b.version}`)
    .replace(/^pkgrel=.*$/m, `pkgrel=${pkgrel}`);
  await Deno.writeTextFile(join(dir, "PKGBUILD"), pkgbuild);
  const dest = join(b.dir, "repo");
  await Deno.mkdir(dest, { recursive: true });
  // CARCH: the architecture the package is for (its name says it), whatever this machine is.
  await makepkgAsNobody(dir, dest, { args: ["--nodeps"], env: { CARCH: b.arch } });
  const prefix = `nox-mesh-host-${b.version}-${pkgrel}-${b.arch}.`;
  const file = [...Deno.readDirSync(dest)].map((e) => e.name)
    .find((n) => n.startsWith(prefix) && /\.pkg\.tar(\.\w+)?$/.test(n));
  if (!file) {
    throw new PackageError(`makepkg made no ${prefix}* in ${dest}`, "read makepkg's output");
  }
  if (sign) await signFile(join(dest, file), sign);
  await repoAdd(join(dest, "nox-mesh-host.db.tar.gz"), [join(dest, file)], sign);
  await Deno.remove(dir, { recursive: true });
  return join(dest, file);
}

/**
 * What the tarball holds: its entry (relative to TARBALL_PREFIX, os/tarball_layout.ts) →
 * [source, mode]. Files only, no directory entries, so unpacking never changes
 * /usr/local/bin or any other directory it lands in (tar creates a missing one).
 */
export async function tarballEntries(b: BuildResult): Promise<Record<string, [string, number]>> {
  const init = (file: string) => Deno.readTextFile(repo(file));
  const dir = join(b.dir, "init");
  await Deno.mkdir(dir, { recursive: true });
  const derived: Record<string, string> = {
    "nox-mesh-host.service": tarballUnit(await init("packaging/arch/nox-mesh-host.service")),
    "nox-mesh-host.initd": tarballInitd(await init("packaging/alpine/nox-mesh-host.initd")),
    "nox-mesh-host.confd": tarballConfd(await init("packaging/alpine/nox-mesh-host.confd")),
  };
  for (const [name, text] of Object.entries(derived)) {
    await Deno.writeTextFile(join(dir, name), text);
  }
  // What the installed version is, for the host's own package adapter (os/tarball-self).
  await Deno.writeTextFile(join(dir, "VERSION"), `${b.version}\n`);
  // Each path lies in the layout os/tarball-self accepts (os/tarball_layout.ts).
  const { binFiles: [program, launcher, installInit], libDir: lib, shareDir: share } =
    TARBALL_LAYOUT;
  const entries: Record<string, [string, number]> = {
    [`bin/${program}`]: [join(b.dir, "nox-mesh-host"), 0o755],
    [`bin/${launcher}`]: [repo("launcher/nox-mesh-host-launch"), 0o755],
    [`bin/${installInit}`]: [repo("packaging/tarball/nox-mesh-host-install-init"), 0o755],
    [TARBALL_LAYOUT.versionFile]: [join(dir, "VERSION"), 0o644],
    [`${TARBALL_LAYOUT.initDir}/nox-mesh-host.service`]: [
      join(dir, "nox-mesh-host.service"),
      0o644,
    ],
    [`${TARBALL_LAYOUT.initDir}/nox-mesh-host.initd`]: [join(dir, "nox-mesh-host.initd"), 0o755],
    [`${TARBALL_LAYOUT.initDir}/nox-mesh-host.confd`]: [join(dir, "nox-mesh-host.confd"), 0o644],
    // The launcher's tarball path (launcher/pkg/), which it sources.
    [`${TARBALL_LAYOUT.launchDir}/tarball.sh`]: [repo("launcher/pkg/tarball.sh"), 0o644],
    [`${share}/substrate.lock`]: [join(b.dir, "substrate.lock"), 0o644],
    [`${share}/LICENSE`]: [repo("LICENSE"), 0o644],
  };
  if (b.form === "bundled") {
    if (!b.runtime) {
      throw new PackageError(
        `the bundled build in ${b.dir} carries no Deno runtime`,
        "build it with packaging/build.ts for os tarball",
      );
    }
    for (const name of programFiles(b)) entries[`${lib}/${name}`] = [join(b.dir, name), 0o644];
    entries[`${lib}/deno`] = [join(b.dir, "deno"), 0o755];
    entries[`${lib}/deno.LICENSE`] = [join(b.dir, "deno.LICENSE"), 0o644];
    // The glibc loader and libraries that start it (packaging/tarball/runtime.ts), with
    // their licences and SOURCES.
    if (!b.glibc) {
      throw new PackageError(
        `the bundled build in ${b.dir} carries no glibc loader for its runtime`,
        "build it with packaging/build.ts for os tarball",
      );
    }
    for (const name of b.glibc.files) {
      entries[`${lib}/glibc/${name}`] = [
        join(b.dir, "glibc", name),
        name === b.glibc.loader ? 0o755 : 0o644,
      ];
    }
  }
  return entries;
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

/**
 * The tarball `tar -xz -C /usr/local` unpacks (tarballEntries), and its SHA256SUMS; returns
 * the tarball. Reproducible: the same build gives the same bytes (entries sorted, owner
 * 0:0, modes and times fixed, gzip without name or time). The tarball goes into `into`
 * (default the build's directory), where SHA256SUMS then covers every tarball of this
 * version (one per architecture when they share a release directory). With a minisign
 * signer, SHA256SUMS.minisig (and minisign.pub) lie beside them.
 */
export async function packageTarball(
  b: BuildResult,
  arch: string = b.arch,
  { minisign, into = b.dir }: { minisign?: MinisignSigner; into?: string } = {},
): Promise<string> {
  const dir = join(b.dir, "tar");
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  const entries = await tarballEntries(b);
  const names = Object.keys(entries).sort();
  for (const name of names) {
    const [from, mode] = entries[name];
    await Deno.mkdir(join(dir, name, ".."), { recursive: true });
    await Deno.copyFile(from, join(dir, name));
    await Deno.chmod(join(dir, name), mode);
  }
  const name = `nox-mesh-host-${b.version}-${arch}.tar.gz`;
  await Deno.mkdir(into, { recursive: true });
  const tarball = join(into, name);
  const tar = join(b.dir, `${name}.tar`);
  await run("tar", [
    "--create",
    "--file",
    tar,
    ...await reproducibleTar(),
    "-C",
    dir,
    "--",
    ...names,
  ]);
  const gzip = await new Deno.Command("sh", {
    args: ["-c", 'gzip -n -c -- "$1" > "$2"', "gzip", tar, tarball],
    stdin: "null",
  }).output();
  if (!gzip.success) {
    throw new PackageError(`gzip ${tar} failed: ${new TextDecoder().decode(gzip.stderr)}`, "");
  }
  await Deno.remove(tar);
  const prefix = `nox-mesh-host-${b.version}-`;
  const released = [...Deno.readDirSync(into)].map((e) => e.name)
    .filter((n) => n.startsWith(prefix) && n.endsWith(".tar.gz")).sort();
  const sums: string[] = [];
  for (const file of released) sums.push(`${await digest(join(into, file), "SHA-256")}  ${file}`);
  await Deno.writeTextFile(join(into, "SHA256SUMS"), sums.join("\n") + "\n");
  if (minisign) {
    await Deno.remove(join(into, "SHA256SUMS.minisig")).catch(() => {});
    const arches = released.map((n) => n.slice(prefix.length, -".tar.gz".length)).join(" ");
    await run("minisign", [
      "-S",
      "-s",
      minisign.secretKey,
      "-m",
      join(into, "SHA256SUMS"),
      "-t",
      `nox-mesh-host ${b.version} ${arches}`,
    ]);
    await Deno.copyFile(minisign.publicKey, join(into, "minisign.pub"));
  }
  await Deno.remove(dir, { recursive: true });
  return tarball;
}

/** Alpine's architectures, each with its runtime among the APKBUILD's sources. */
export const ALPINE_ARCHES: readonly RuntimeArch[] = ["x86_64", "aarch64"];

/**
 * Writes `nox-mesh-host-runtime-<arch>.tar` beside the build: under `runtime-<arch>/` the
 * program (the shim naming that architecture's loader), `deno`, `deno.LICENSE` and `glibc/`,
 * owner 0:0, the tarball's time. Returns its path.
 */
async function runtimeArchive(b: BuildResult): Promise<string> {
  if (!b.runtime || !b.glibc) {
    throw new PackageError(
      `the Alpine build in ${b.dir} carries no runtime with its glibc loader`,
      "build it with packaging/build.ts for os alpine",
    );
  }
  const top = `runtime-${b.arch}`;
  const work = join(b.dir, top);
  await Deno.remove(work, { recursive: true }).catch(() => {});
  await Deno.mkdir(join(work, "glibc"), { recursive: true });
  const files: [string, number][] = [
    ["nox-mesh-host", 0o755],
    ["deno", 0o755],
    ["deno.LICENSE", 0o644],
    ...b.glibc.files.map((f): [string, number] => [
      `glibc/${f}`,
      f === b.glibc!.loader ? 0o755 : 0o644,
    ]),
  ];
  for (const [name, mode] of files) {
    await Deno.copyFile(join(b.dir, name), join(work, name));
    await Deno.chmod(join(work, name), mode);
  }
  const archive = join(b.dir, `nox-mesh-host-${top}.tar`);
  await run("tar", [
    "--create",
    "--file",
    archive,
    ...await reproducibleTar(),
    "-C",
    b.dir,
    "--",
    top,
    `${top}/glibc`,
    ...files.map(([name]) => `${top}/${name}`),
  ]);
  await Deno.remove(work, { recursive: true });
  return archive;
}

/**
 * Stages the APKBUILD and its sources (with sha512sums filled in) for abuild on Alpine:
 * the bundle and the documentation of the first build, and the runtime of each build (one
 * per architecture of ALPINE_ARCHES: the APKBUILD installs the one of the architecture it
 * is built on).
 */
export async function stageAlpine(builds: readonly BuildResult[]): Promise<string> {
  const b = builds[0];
  const missing = ALPINE_ARCHES.filter((a) => !builds.some((x) => x.arch === a));
  if (!b || missing.length > 0) {
    throw new PackageError(
      `the Alpine package carries the runtime of ${ALPINE_ARCHES.join(" and ")}; no build for ` +
        missing.join(", "),
      "build alpine for every architecture (deno task package alpine)",
    );
  }
  const dir = join(b.dir, "apkbuild");
  const runtimes: Record<string, string> = {};
  for (const arch of ALPINE_ARCHES) {
    const built = builds.find((x) => x.arch === arch)!;
    runtimes[`nox-mesh-host-runtime-${arch}.tar`] = await runtimeArchive(built);
  }
  const sources: Record<string, string> = {
    ...runtimes,
    [PROGRAM_ARCHIVE]: await programArchive(b),
    "nox-mesh-host-launch": repo("launcher/nox-mesh-host-launch"),
    "launch-apk.sh": repo("launcher/pkg/apk.sh"),
    "nox-mesh-host.initd": repo("packaging/alpine/nox-mesh-host.initd"),
    "nox-mesh-host.confd": repo("packaging/alpine/nox-mesh-host.confd"),
    "substrate.lock": "substrate.lock",
    "pause-image.oci": `images/${IMAGE_FILE}`,
    ...docFiles(b),
  };
  await stage(b, dir, sources);
  const sums: string[] = [];
  for (const name of Object.keys(sources)) {
    sums.push(`${await digest(join(dir, name), "SHA-512")}  ${name}`);
  }
  const recipe = await Deno.readTextFile(repo("packaging/alpine/APKBUILD"));
  if (/^depends=".*\bdeno\b/m.test(recipe)) {
    throw new PackageError(
      "packaging/alpine/APKBUILD depends on a deno: the package carries its own runtime (the " +
        "Deno it is tested on, packaging/tarball/runtime.json), and a distribution's deno " +
        "would only add a second one",
      'write depends="" there',
    );
  }
  const apkbuild = recipe
    .replace(/^pkgver=.*$/m, `pkgver=${b.version}`)
    .replace(/^sha512sums=".*"$/ms, `sha512sums="\n${sums.join("\n")}\n"`);
  await Deno.writeTextFile(join(dir, "APKBUILD"), apkbuild);
  return dir;
}

/**
 * The command (`deno task package`). Not awaited at the top: a distribution's own packaging
 * (packaging/<os>/recipe.ts, imported when it is asked for) imports this module's helpers,
 * which must have finished loading first.
 */
async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      pkgrel: { type: "string", default: "1" },
      form: { type: "string", default: "auto" },
      version: { type: "string" },
      sign: { type: "string" },
      "minisign-key": { type: "string" },
      arch: { type: "string", default: "all" },
    },
  });
  const os = positionals[0] as TargetOs;
  const wanted = values.arch === "all" ? BUILD_ARCHES : [values.arch as RuntimeArch];
  if (!TARGET_OSES.includes(os) || !wanted.every((a) => BUILD_ARCHES.includes(a))) {
    console.error(
      `usage: deno task package ${TARGET_OSES.join("|")} [--arch all|${
        BUILD_ARCHES.join("|")
      }] [--pkgrel N] [--form auto|compiled|bundled] ` +
        "[--version V] [--sign GPGKEY] [--minisign-key FILE]",
    );
    Deno.exit(64);
  }
  // This machine's architecture first: its build goes to dist/<os>/ (which a build empties),
  // another's to dist/<os>-<arch>/; the tarballs of all of them and one SHA256SUMS go to
  // dist/tarball/. Alpine's package carries every architecture's runtime: built for each,
  // staged once.
  const arches = (os === "alpine" ? ALPINE_ARCHES : [...wanted])
    .toSorted((a, b) => Number(b === Deno.build.arch) - Number(a === Deno.build.arch));
  const release = repo("dist/tarball");
  const alpine: BuildResult[] = [];
  // A distribution added since packages itself: packaging/<os>/recipe.ts, its packageFor.
  const own: BuildResult[] = [];
  const sign = values.sign ? { key: values.sign } : undefined;
  const key = values["minisign-key"];
  const minisign = key ? { secretKey: key, publicKey: key.replace(/\.key$/, ".pub") } : undefined;
  try {
    for (const arch of arches) {
      const b = await build({
        os,
        arch,
        form: values.form as "auto" | "compiled" | "bundled",
        version: values.version,
        ...(arch === Deno.build.arch ? {} : { out: repo(`dist/${os}-${arch}`) }),
      });
      if (os === "arch") {
        console.log(`built ${await packageArch(b, Number(values.pkgrel), { sign })}`);
      } else if (os === "tarball") {
        const tarball = await packageTarball(b, undefined, { minisign, into: release });
        const mib = ((await Deno.stat(tarball)).size / 2 ** 20).toFixed(1);
        console.log(
          `built ${tarball} (${mib} MiB, ${b.form}${
            b.runtime ? ` with Deno ${b.runtime}` : ""
          }) and SHA256SUMS${minisign ? " (signed)" : ""}`,
        );
      } else if (os === "alpine") alpine.push(b);
      else own.push(b);
    }
    if (os === "alpine") {
      console.log(
        `staged ${await stageAlpine(alpine)}: run abuild there on Alpine (no apk/abuild here; ` +
          `${ALPINE_ARCHES.join(", ")}: each package carries its architecture's runtime)`,
      );
    }
    if (own.length > 0) {
      const { packageFor } = await import(`./${os}/recipe.ts`);
      const revision = Number(values.pkgrel);
      for (const line of await packageFor(own, { sign, revision })) console.log(line);
    }
  } catch (e) {
    if (!(e instanceof HostError)) throw e;
    console.error(e.message);
    Deno.exit(1);
  }
}

if (import.meta.main) main();

/** GNU tar's flags for an archive the same for the same files: owners, order, times. */
async function reproducibleTar(): Promise<string[]> {
  return [
    "--format=gnu",
    "--no-recursion",
    "--owner=0",
    "--group=0",
    "--numeric-owner",
    `--mtime=@${await tarballTime()}`,
  ];
}
