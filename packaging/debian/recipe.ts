/**
 * `deno task package debian`: the .deb of each build (dpkg-deb) and a signed apt repository
 * holding them. The package carries what the Arch package carries, and, like the Alpine
 * package and the tarball, the glibc loader and libraries that start its runtime, so the
 * runtime never depends on the machine's C library (Debian 12, an older Ubuntu: the same
 * bytes run). It depends on nothing and runs no maintainer script: nothing is started or
 * enabled at install (as on Arch, a person runs `systemctl enable --now nox-mesh-host`),
 * and an upgrade by apt while the host runs is the host's self-upgrade (it sees its bundle
 * replaced, finishes, exits 0, and its launcher starts the new one).
 */
import { join } from "node:path";
import type { BuildResult } from "../build.ts";
import {
  type GpgSigner,
  MAN_PAGES,
  PackageError,
  programFiles,
  tarballTime,
} from "../package_parts.ts";
import { SHELLS } from "../../src/cli/completions.ts";
import { IMAGE_FILE } from "../image.ts";
import type { RuntimeArch } from "../tarball/runtime.ts";

const repo = (p: string): string => new URL(`../../${p}`, import.meta.url).pathname;

/** The package's name. */
export const PACKAGE = "nox-mesh-host";

/** Debian's name of each build architecture. */
export const DEB_ARCH: Readonly<Record<RuntimeArch, string>> = {
  x86_64: "amd64",
  aarch64: "arm64",
};

/** The suite and component of the repository (`deb … URL stable main`). */
export const SUITE = "stable";
export const COMPONENT = "main";

/** Where each completion goes on Debian (its bash-completion, zsh and fish packages' places). */
const COMPLETIONS: Readonly<Record<string, string>> = {
  bash: "usr/share/bash-completion/completions/nox-mesh-host",
  zsh: "usr/share/zsh/vendor-completions/_nox-mesh-host",
  fish: "usr/share/fish/vendor_completions.d/nox-mesh-host.fish",
};

async function run(cmd: string, args: string[], env?: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdin: "null" }).output().catch((e) => {
    throw new PackageError(`cannot run ${cmd}: ${e.message}`, `install ${cmd} (sh lab/setup.sh)`);
  });
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

/** The Debian version of a build: the host's version, a dash, the package revision. */
export function debVersion(b: Pick<BuildResult, "version">, revision = 1): string {
  return `${b.version}-${revision}`;
}

/** The file name of a build's package. */
export function debFileName(b: { version: string; arch: RuntimeArch }, revision = 1): string {
  return `${PACKAGE}_${debVersion(b, revision)}_${DEB_ARCH[b.arch]}.deb`;
}

/**
 * The package's systemd unit: the Arch package's (packaging/arch/nox-mesh-host.service),
 * with the launcher's package kind apt. The text it replaces must be there, or the build
 * fails rather than ship a unit for another package manager.
 */
export function debianUnit(archUnit: string): string {
  const kind = "Environment=NOX_MESH_HOST_PKG=pacman";
  const head = "# Starts the launcher at boot.";
  if (!archUnit.includes(kind) || !archUnit.startsWith(head)) {
    throw new PackageError(
      `packaging/arch/nox-mesh-host.service no longer holds "${head}" and "${kind}"`,
      "update packaging/debian/recipe.ts debianUnit to the changed unit",
    );
  }
  return archUnit.replace(kind, "Environment=NOX_MESH_HOST_PKG=apt").replace(
    head,
    "# nox-mesh-host for Debian and Ubuntu (packaging/debian/recipe.ts made this from\n" +
      "# packaging/arch/nox-mesh-host.service). Starts the launcher at boot.",
  );
}

/** The control file (DEBIAN/control). */
export function controlFile(b: BuildResult, revision: number, installedKiB: number): string {
  return [
    `Package: ${PACKAGE}`,
    `Version: ${debVersion(b, revision)}`,
    `Architecture: ${DEB_ARCH[b.arch]}`,
    "Maintainer: nox-mesh-host packagers <packages@example.invalid>",
    `Installed-Size: ${installedKiB}`,
    // It carries its runtime and the glibc loader that starts it: it depends on nothing.
    "Suggests: wireguard-tools, wireguard-go, nftables, podman",
    "Section: admin",
    "Priority: optional",
    "Homepage: https://example.invalid/nox-mesh-host",
    "Description: mesh node host that makes this machine match its declared state",
    " The agent that runs as root on every machine of a mesh and is the only thing",
    " that changes it: it holds one outbound link to a NATS broker, takes signed",
    " declarations of files, packages, services, containers, accounts, mounts,",
    " overlay, firewall and kernel settings, applies them, reads back what it did,",
    " records it and reports upward; disconnected, it holds the machine to its store.",
    " .",
    " The package carries the Deno runtime the host is tested on, with the glibc",
    " loader that starts it; a launcher restarts the host and rolls it back once.",
    "",
  ].join("\n");
}

/** A licence text as a DEP-5 paragraph body (each line indented, an empty one as " ."). */
function dep5Text(text: string): string {
  return text.trimEnd().split("\n").map((l) => (l.trim() === "" ? " ." : ` ${l}`)).join("\n");
}

/**
 * The machine-readable copyright file (DEP-5): the host (Apache-2.0), the runtime (Deno's
 * MIT licence, as it carries it) and, in the bundled form, the glibc files (Debian's own
 * copyright files of libc6 and libgcc-s1 lie beside them, with their sources).
 */
export function copyrightFile(b: BuildResult, denoLicence?: string): string {
  const parts = [
    "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/",
    `Upstream-Name: ${PACKAGE}`,
    "Source: https://example.invalid/nox-mesh-host",
    "",
    "Files: *",
    "Copyright: the nox-mesh-host authors",
    "License: Apache-2.0",
    " On Debian systems, the full text of the Apache License version 2.0 is in",
    " /usr/share/common-licenses/Apache-2.0.",
  ];
  if (denoLicence !== undefined) {
    const holder = /^Copyright .*$/m.exec(denoLicence)?.[0].replace(/^Copyright (\(c\) )?/, "");
    parts.push(
      "",
      "Files: usr/lib/nox-mesh-host/deno",
      `Copyright: ${holder ?? "the Deno authors"}`,
      "License: Expat",
      dep5Text(denoLicence),
    );
  }
  if (b.glibc) {
    parts.push(
      "",
      "Files: usr/lib/nox-mesh-host/glibc/*",
      "Copyright: the GNU C Library and GCC authors (Debian's libc6 and libgcc-s1; their",
      " copyright files are usr/lib/nox-mesh-host/glibc/LICENSE.glibc and LICENSE.libgcc,",
      " their source packages are named in usr/lib/nox-mesh-host/glibc/SOURCES)",
      "License: LGPL-2.1+ and GPL-3+ with GCC-exception-3.1",
      " On Debian systems, the full texts of the GNU Lesser General Public License",
      " version 2.1 and the GNU General Public License version 3 are in",
      " /usr/share/common-licenses/LGPL-2.1 and /usr/share/common-licenses/GPL-3; the",
      " GCC Runtime Library Exception is in LICENSE.libgcc beside the files.",
    );
  }
  return parts.join("\n") + "\n";
}

/** The Debian changelog the package carries (one entry: this build). */
function changelog(b: BuildResult, revision: number, time: number): string {
  const date = new Date(time * 1000).toUTCString().replace("GMT", "+0000");
  return `${PACKAGE} (${debVersion(b, revision)}) ${SUITE}; urgency=medium\n\n` +
    "  * Built from the nox-mesh-host repository; its CHANGELOG.md says what changed.\n\n" +
    ` -- nox-mesh-host packagers <packages@example.invalid>  ${date}\n`;
}

/**
 * What lintian flags in this package, and why it is so: every one follows from one decision,
 * that the package carries the Deno runtime the host is tested on and the glibc loader and
 * libraries that start it (packaging/README.md, "The carried glibc"), so that no upgrade of
 * the machine changes the runtime under the host and a rollback of the package rolls it back.
 * Each: the reason, then the tags it covers (lintian's override syntax, without the package).
 */
export const LINTIAN_OVERRIDES: readonly (readonly [string, readonly string[]])[] = [
  [
    "Deno's own executable, as Deno publishes it (npm @deno/linux-x64-glibc), with the libraries " +
    "it links statically; it is not rebuilt here.",
    [
      "embedded-library lcms2 [usr/lib/nox-mesh-host/deno]",
      "hardening-no-relro [usr/lib/nox-mesh-host/deno]",
    ],
  ],
  [
    "The glibc files are copied unchanged from Debian's libc6 and libgcc-s1 (their copyright " +
    "files and sources beside them); the host's runtime is started through them alone.",
    ["embedded-library libm [usr/lib/nox-mesh-host/glibc/libm.so.6]"],
  ],
  [
    "The loader is run as a program by the shim (LOADER --library-path DIR deno …).",
    [
      "shared-library-is-executable 0755 [usr/lib/nox-mesh-host/glibc/ld-linux-*]",
      "shared-library-lacks-prerequisites [usr/lib/nox-mesh-host/glibc/ld-linux-*]",
    ],
  ],
  [
    "Resolved from the carried glibc directory (--library-path), never the machine's: the " +
    "package depends on no libc6 on purpose.",
    ["undeclared-elf-prerequisites * [usr/lib/nox-mesh-host/*]"],
  ],
  [
    "The state directory holds the node's key seed and store: root's alone, as the unit's " +
    "StateDirectoryMode=0700 makes it.",
    ["non-standard-dir-perm 0700 != 0755 [var/lib/mesh-host/]"],
  ],
  [
    "Not uploaded to Debian's archive: there is no bug to close.",
    ["initial-upload-closes-no-bugs [usr/share/doc/nox-mesh-host/changelog.Debian.gz:1]"],
  ],
];

/** The overrides file (/usr/share/lintian/overrides/nox-mesh-host): each reason, its tags. */
export function lintianOverrides(): string {
  return LINTIAN_OVERRIDES.map(([why, tags]) =>
    [
      ...why.match(/.{1,76}(\s|$)/g)!.map((line) => `# ${line.trim()}`),
      ...tags.map((tag) => `${PACKAGE}: ${tag}`),
    ].join("\n")
  ).join("\n") + "\n";
}

/** The conffiles of a payload (paths relative to /): every file it installs under /etc. */
export function conffilesOf(paths: readonly string[]): string[] {
  return paths.filter((p) => p.startsWith("etc/")).map((p) => `/${p}`);
}

/** Writes `text` to `path` with `mode`. */
async function put(path: string, text: string, mode: number): Promise<void> {
  await Deno.writeTextFile(path, text);
  await Deno.chmod(path, mode);
}

/** `gzip -9n` of a file's bytes (no name, no time: the same input gives the same bytes). */
async function gzip(from: string, to: string): Promise<void> {
  const out = await new Deno.Command("sh", {
    args: ["-c", 'gzip -9 -n -c -- "$1" > "$2"', "gzip", from, to],
    stdin: "null",
  }).output();
  if (!out.success) throw new PackageError(`gzip ${from} failed`, "");
}

/**
 * What the package installs, relative to / → [source file or text, mode]: the program and
 * its launcher (with its apt path), the bundle, runtime and glibc in the bundled form, the
 * unit, the bundle the host applies with no mesh and the image it loads, the licences,
 * man pages and completions.
 */
async function payload(
  b: BuildResult,
  revision: number,
  work: string,
): Promise<Record<string, [string, number]>> {
  const lib = "usr/lib/nox-mesh-host";
  const files: Record<string, [string, number]> = {
    "usr/bin/nox-mesh-host": [join(b.dir, "nox-mesh-host"), 0o755],
    "usr/bin/nox-mesh-host-launch": [repo("launcher/nox-mesh-host-launch"), 0o755],
    [`${lib}/launch/apt.sh`]: [repo("launcher/pkg/apt.sh"), 0o644],
    "usr/share/nox-mesh-host/substrate.lock": [join(b.dir, "substrate.lock"), 0o644],
    "usr/share/nox-mesh-host/images/pause.oci.tar": [join(b.dir, "images", IMAGE_FILE), 0o644],
  };
  const made = async (name: string, text: string) => {
    const path = join(work, name);
    await Deno.writeTextFile(path, text);
    return path;
  };
  const unit = debianUnit(await Deno.readTextFile(repo("packaging/arch/nox-mesh-host.service")));
  files["usr/lib/systemd/system/nox-mesh-host.service"] = [
    await made("nox-mesh-host.service", unit),
    0o644,
  ];
  let denoLicence: string | undefined;
  if (b.form === "bundled") {
    if (!b.runtime || !b.glibc) {
      throw new PackageError(
        `the bundled build in ${b.dir} carries no runtime with its glibc loader`,
        "build it with packaging/build.ts for os debian",
      );
    }
    for (const name of programFiles(b)) files[`${lib}/${name}`] = [join(b.dir, name), 0o644];
    files[`${lib}/deno`] = [join(b.dir, "deno"), 0o755];
    files[`${lib}/deno.LICENSE`] = [join(b.dir, "deno.LICENSE"), 0o644];
    for (const name of b.glibc.files) {
      files[`${lib}/glibc/${name}`] = [
        join(b.dir, "glibc", name),
        name === b.glibc.loader ? 0o755 : 0o644,
      ];
    }
    denoLicence = await Deno.readTextFile(join(b.dir, "deno.LICENSE"));
  }
  // What lintian flags by design (the carried runtime and glibc), each with why.
  files["usr/share/lintian/overrides/nox-mesh-host"] = [
    await made("lintian-overrides", lintianOverrides()),
    0o644,
  ];
  const doc = "usr/share/doc/nox-mesh-host";
  files[`${doc}/copyright`] = [await made("copyright", copyrightFile(b, denoLicence)), 0o644];
  const log = await made("changelog.Debian", changelog(b, revision, await tarballTime()));
  await gzip(log, `${log}.gz`);
  files[`${doc}/changelog.Debian.gz`] = [`${log}.gz`, 0o644];
  for (const page of MAN_PAGES) {
    const text = await run("sh", [
      "-c",
      'scdoc < "$1"',
      "scdoc",
      repo(`packaging/man/${page}.scd`),
    ]);
    const source = await made(page, text);
    await gzip(source, `${source}.gz`);
    files[`usr/share/man/man${page.split(".").pop()}/${page}.gz`] = [`${source}.gz`, 0o644];
  }
  for (const shell of SHELLS) {
    files[COMPLETIONS[shell]] = [join(b.dir, "completions", `nox-mesh-host.${shell}`), 0o644];
  }
  return files;
}

/**
 * Builds the .deb of a build with dpkg-deb into `<build>/deb/`; returns its path. The tree
 * is owned by root (--root-owner-group), its files' times and the archive's the commit's
 * (SOURCE_DATE_EPOCH), its md5sums listed; gzip, which installs and builds faster than xz
 * for a package whose bulk is a 90 MiB runtime.
 */
export async function packageDebian(b: BuildResult, revision = 1): Promise<string> {
  const work = join(b.dir, "deb-work");
  const root = join(work, "root");
  await Deno.remove(work, { recursive: true }).catch(() => {});
  await Deno.mkdir(root, { recursive: true });
  const files = await payload(b, revision, work);
  let bytes = 0;
  const paths = Object.keys(files).sort();
  for (const path of paths) {
    const [from, mode] = files[path];
    await Deno.mkdir(join(root, path, ".."), { recursive: true });
    await Deno.copyFile(from, join(root, path));
    await Deno.chmod(join(root, path), mode);
    bytes += (await Deno.stat(join(root, path))).size;
  }
  // The state directory, private to root (the unit's StateDirectory= would make it too).
  await Deno.mkdir(join(root, "var/lib/mesh-host"), { recursive: true });
  await Deno.chmod(join(root, "var/lib/mesh-host"), 0o700);
  const sums = await run("sh", [
    "-c",
    'cd "$1" && shift && md5sum -- "$@"',
    "md5sum",
    root,
    ...paths,
  ]);
  const control = join(root, "DEBIAN");
  await Deno.mkdir(control, { mode: 0o755 });
  await put(join(control, "control"), controlFile(b, revision, Math.ceil(bytes / 1024)), 0o644);
  await put(join(control, "md5sums"), sums, 0o644);
  // Today none: host.json is the administrator's. A file the package ever ships under /etc
  // is a conffile, which dpkg never overwrites once a person changed it.
  const conffiles = conffilesOf(paths);
  if (conffiles.length > 0) {
    await put(join(control, "conffiles"), conffiles.map((p) => `${p}\n`).join(""), 0o644);
  }
  // Every entry's time the commit's, as the archive's (the same checkout, the same package).
  const time = String(await tarballTime());
  await run("find", [root, "-exec", "touch", "-h", "-d", `@${time}`, "{}", "+"]);
  const out = join(b.dir, "deb");
  await Deno.mkdir(out, { recursive: true });
  const file = join(out, debFileName(b, revision));
  await run("dpkg-deb", ["--root-owner-group", "-Zgzip", "-z9", "--build", root, file], {
    SOURCE_DATE_EPOCH: time,
  });
  await Deno.remove(work, { recursive: true });
  return file;
}

/**
 * Makes (or makes again) an apt repository in `dir` holding `debs`: each copied into
 * pool/main/n/nox-mesh-host/ (other packages under their own name), the indexes
 * dists/stable/main/binary-<arch>/Packages(.gz) of every architecture present
 * (apt-ftparchive), and dists/stable/Release; with a signer, InRelease and Release.gpg,
 * its signatures, which apt checks against the key a machine trusts (`signed-by=`).
 * Without one the repository is unsigned, which apt refuses. Files already in the pool
 * stay: a repository keeps every version it offered (a rollback, an exact version).
 */
export async function aptRepository(
  dir: string,
  debs: readonly string[],
  signer?: GpgSigner,
): Promise<void> {
  for (const deb of debs) {
    const name = deb.split("/").pop()!;
    const pkg = name.split("_")[0];
    const pool = join(dir, "pool", COMPONENT, pkg.slice(0, 1), pkg);
    await Deno.mkdir(pool, { recursive: true });
    await Deno.copyFile(deb, join(pool, name));
  }
  const arches = new Set<string>();
  for await (const deb of walk(join(dir, "pool"))) {
    const arch = deb.replace(/\.deb$/, "").split("_").pop()!;
    if (arch !== "all") arches.add(arch);
  }
  if (arches.size === 0) arches.add(DEB_ARCH[Deno.build.arch as RuntimeArch] ?? "amd64");
  const dists = join(dir, "dists", SUITE);
  await Deno.remove(dists, { recursive: true }).catch(() => {});
  for (const arch of arches) {
    const index = join(dists, COMPONENT, `binary-${arch}`);
    await Deno.mkdir(index, { recursive: true });
    // Run from the repository's top, so each Filename: is relative to it (as apt wants).
    const packages = await run("sh", [
      "-c",
      'cd "$1" && apt-ftparchive --arch "$2" packages pool',
      "apt-ftparchive",
      dir,
      arch,
    ]);
    await Deno.writeTextFile(join(index, "Packages"), packages);
    await gzip(join(index, "Packages"), join(index, "Packages.gz"));
  }
  const release = await run("apt-ftparchive", [
    "-o",
    `APT::FTPArchive::Release::Suite=${SUITE}`,
    "-o",
    `APT::FTPArchive::Release::Codename=${SUITE}`,
    "-o",
    `APT::FTPArchive::Release::Components=${COMPONENT}`,
    "-o",
    `APT::FTPArchive::Release::Architectures=${[...arches].sort().join(" ")}`,
    "-o",
    "APT::FTPArchive::Release::Origin=nox-mesh-host",
    "release",
    dists,
  ]);
  await Deno.writeTextFile(join(dists, "Release"), release);
  if (!signer) return;
  const env = signer.gnupgHome ? { GNUPGHOME: signer.gnupgHome } : undefined;
  const gpg = ["--batch", "--yes", "--local-user", signer.key];
  await run("gpg", [
    ...gpg,
    "--clearsign",
    "--output",
    join(dists, "InRelease"),
    join(dists, "Release"),
  ], env);
  await run("gpg", [
    ...gpg,
    "--armor",
    "--detach-sign",
    "--output",
    join(dists, "Release.gpg"),
    join(dists, "Release"),
  ], env);
}

/** Every .deb under `dir`, by path. */
async function* walk(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) yield* walk(path);
    else if (entry.name.endsWith(".deb")) yield path;
  }
}

/**
 * `deno task package debian`: a .deb per build, and dist/debian/repo/, a repository of them
 * (signed with `--sign KEY`). Returns the lines to print.
 */
export async function packageFor(
  builds: readonly BuildResult[],
  { sign, revision = 1 }: { sign?: GpgSigner; revision?: number } = {},
): Promise<string[]> {
  const debs: string[] = [];
  for (const b of builds) debs.push(await packageDebian(b, revision));
  const dir = join(builds[0].dir, "repo");
  await aptRepository(dir, debs, sign);
  return [
    ...debs.map((d) => `built ${d}`),
    `apt repository ${dir} (${sign ? "signed" : "UNSIGNED: apt refuses it; use --sign KEY"}): ` +
    `deb [signed-by=KEYRING] URL ${SUITE} ${COMPONENT}`,
  ];
}
