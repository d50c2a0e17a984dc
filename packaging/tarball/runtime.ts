/**
 * The Deno runtime every package carries when it ships the bundled form (DESIGN.md §2, §12):
 * the `deno` executable of the npm package for the build's architecture
 * (`@deno/linux-x64-glibc`, `@deno/linux-arm64-glibc`), at the version this build runs on,
 * and Deno's licence from the npm package `deno` of the same version (the platform packages
 * carry none). Both are fetched with `npm pack` into a cache outside the checkout and checked
 * against the integrity pinned in runtime.json before anything is used.
 *
 * Deno publishes no musl build, so the tarball and the Alpine package also carry the glibc
 * dynamic loader and the few libraries that `deno` needs ({@link ensureGlibc}), copied
 * unchanged from Debian's packages on the build machine with their licences, and start the
 * runtime through that loader (`LIB/ld-linux-x86-64.so.2 --library-path LIB DIR/deno …`): it
 * then runs on a musl system and on any glibc one alike.
 */
import { join, posix } from "node:path";
import { HostError } from "../../src/errors.ts";

/** What the runtime.json pins. */
interface Pins {
  version: string;
  /** npm package spec (name) → the `integrity` npm records for its tarball (sha512-…). */
  packages: Record<string, string>;
  /** Build arch → the platform package holding `deno` for it. */
  platforms: Record<string, string>;
  /** The package that carries Deno's LICENSE. */
  licence: string;
}

/** The architectures a runtime is pinned for (Deno.build.arch's spelling, and pacman's). */
export type RuntimeArch = "x86_64" | "aarch64";

/** The ELF machine (e_machine) of each architecture's executables. */
const ELF_MACHINE: Record<RuntimeArch, number> = { x86_64: 62, aarch64: 183 };

/**
 * How to run another architecture's executable on this machine: QEMU's user-mode emulator
 * (Debian's qemu-user-static) and that architecture's C library (Debian's cross packages).
 */
export const EMULATORS: Record<RuntimeArch, { qemu: string; libs: string }> = {
  x86_64: { qemu: "/usr/bin/qemu-x86_64-static", libs: "/usr/x86_64-linux-gnu" },
  aarch64: { qemu: "/usr/bin/qemu-aarch64-static", libs: "/usr/aarch64-linux-gnu" },
};

/** The runtime files, ready to be copied into a package. */
export interface Runtime {
  version: string;
  arch: RuntimeArch;
  /** The `deno` executable. */
  deno: string;
  /** Deno's licence (MIT), shipped beside it as `deno.LICENSE`. */
  licence: string;
}

/** Fetching or checking the runtime failed. */
export class RuntimeError extends HostError {
  constructor(what: string, hint: string) {
    super("packaging.runtime", what, { hint });
  }
}

const PINS_FILE = new URL("./runtime.json", import.meta.url).pathname;

/** The pins of runtime.json. */
export async function runtimePins(): Promise<Pins> {
  return JSON.parse(await Deno.readTextFile(PINS_FILE)) as Pins;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

async function run(cmd: string, args: string[], cwd?: string): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdin: "null" }).output()
    .catch((e) => {
      throw new RuntimeError(`cannot run ${cmd}: ${e.message}`, `install ${cmd}`);
    });
  const d = new TextDecoder();
  if (!out.success) {
    throw new RuntimeError(
      `${cmd} ${args.join(" ")} failed (exit ${out.code}): ${d.decode(out.stderr).trim()}`,
      cmd === "npm" ? "the npm registry must be reachable (or its cache hold the package)" : "",
    );
  }
  return d.decode(out.stdout);
}

/** npm's `integrity` of a file: "sha512-" + base64 of its SHA-512. */
async function integrityOf(path: string): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-512", await Deno.readFile(path)));
  return `sha512-${btoa(String.fromCharCode(...hash))}`;
}

/** `npm pack NAME@VERSION` into `dir` (once), checked against the pinned integrity. */
async function fetchPackage(name: string, version: string, want: string, dir: string) {
  const file = join(dir, `${name.replace(/^@/, "").replace("/", "-")}-${version}.tgz`);
  if (!(await exists(file))) {
    await run("npm", ["pack", "--silent", "--pack-destination", dir, `${name}@${version}`]);
  }
  const got = await integrityOf(file);
  if (got !== want) {
    await Deno.remove(file).catch(() => {});
    throw new RuntimeError(
      `${name}@${version} from npm has the integrity ${got}, but packaging/tarball/runtime.json ` +
        `pins ${want}`,
      "find out why before building: the registry, its mirror or the pin changed",
    );
  }
  return file;
}

/** The e_machine of an ELF file's header, or undefined when it is not a 64-bit LE ELF. */
async function elfMachine(path: string): Promise<number | undefined> {
  using file = await Deno.open(path);
  const head = new Uint8Array(20);
  if ((await file.read(head)) !== 20) return undefined;
  const elf = head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c && head[3] === 0x46;
  if (!elf || head[4] !== 2 || head[5] !== 1) return undefined;
  return new DataView(head.buffer).getUint16(18, true);
}

/**
 * The argv that runs `deno` of `arch` here: itself on this architecture, else under QEMU's
 * user-mode emulation when it is installed (undefined when it is not).
 */
export async function runnable(deno: string, arch: RuntimeArch): Promise<string[] | undefined> {
  if (arch === Deno.build.arch) return [deno];
  const { qemu, libs } = EMULATORS[arch];
  return (await exists(qemu)) && (await exists(libs)) ? [qemu, "-L", libs, deno] : undefined;
}

/**
 * The runtime for `arch`, fetched into `cache` once and checked: the packages' integrity
 * against runtime.json, the executable's ELF machine, and it must say it is that version
 * (another architecture's under QEMU where installed; the pinned integrity alone where not).
 * The version must be the one this build runs on: the bundle is made by this deno and runs
 * on that one.
 */
export async function ensureRuntime(
  cache: string,
  {
    arch = Deno.build.arch as RuntimeArch,
    buildVersion = Deno.version.deno,
  }: { arch?: RuntimeArch; buildVersion?: string } = {},
): Promise<Runtime> {
  const pins = await runtimePins();
  if (pins.version !== buildVersion) {
    throw new RuntimeError(
      `the tarball carries Deno ${pins.version} (packaging/tarball/runtime.json), but this ` +
        `build runs on Deno ${buildVersion}, which makes the bundle`,
      `build with Deno ${pins.version}, or pin ${buildVersion} in runtime.json (npm pack --json ` +
        "prints each package's integrity)",
    );
  }
  const platform = pins.platforms[arch];
  if (!platform) {
    throw new RuntimeError(
      `runtime.json names no Deno package for ${arch}`,
      `add the platform package for ${arch} and its integrity`,
    );
  }
  const dir = join(cache, `deno-${pins.version}-${arch}`);
  const runtime = {
    version: pins.version,
    arch,
    deno: join(dir, "deno"),
    licence: join(dir, "LICENSE"),
  };
  if (await exists(join(dir, "ready"))) return runtime;
  await Deno.mkdir(cache, { recursive: true });
  const packed: string[] = [];
  for (const name of [platform, pins.licence]) {
    const want = pins.packages[name];
    if (!want) throw new RuntimeError(`runtime.json pins no integrity for ${name}`, "add it");
    packed.push(await fetchPackage(name, pins.version, want, cache));
  }
  const work = await Deno.makeTempDir({ dir: cache, prefix: ".unpack-" });
  try {
    await run("tar", ["-xzf", packed[0], "-C", work, "package/deno"]);
    await run("tar", ["-xzf", packed[1], "-C", work, "--transform=s,^package/,lic/,"]);
    await Deno.rename(join(work, "package", "deno"), join(work, "deno"));
    await Deno.rename(join(work, "lic", "LICENSE"), join(work, "LICENSE"));
    await Deno.chmod(join(work, "deno"), 0o755);
    await Deno.chmod(join(work, "LICENSE"), 0o644);
    const machine = await elfMachine(join(work, "deno"));
    if (machine !== ELF_MACHINE[arch]) {
      throw new RuntimeError(
        `the deno of ${platform}@${pins.version} is not an ${arch} executable (ELF machine ` +
          `${machine ?? "none"})`,
        `runtime.json's platforms must name the package built for ${arch}`,
      );
    }
    const argv = await runnable(join(work, "deno"), arch);
    const said = argv ? await run(argv[0], [...argv.slice(1), "--version"]) : undefined;
    if (said !== undefined && !said.startsWith(`deno ${pins.version} `)) {
      throw new RuntimeError(
        `the deno of ${platform}@${pins.version} says "${said.split("\n")[0]}"`,
        "the package does not hold the runtime it names",
      );
    }
    await Deno.remove(join(work, "package"), { recursive: true });
    await Deno.remove(join(work, "lic"), { recursive: true });
    await Deno.writeTextFile(join(work, "ready"), `${pins.version}\n`);
    await Deno.chmod(work, 0o755);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await Deno.rename(work, dir);
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
  return runtime;
}

/** The glibc files carried beside the runtime, for one architecture: where Debian puts them. */
export interface GlibcSource {
  /** The dynamic loader's file name, the program that starts `deno`. */
  loader: string;
  /** The directory Debian's packages install them into on this (build) machine. */
  from: string;
  /** The package of the loader and the C library, and the package of libgcc_s. */
  packages: { libc: string; libgcc: string };
}

/**
 * Per architecture: Debian's libc6 and libgcc-s1 on this machine's own architecture, the
 * cross packages (libc6-arm64-cross, libgcc-s1-arm64-cross, which lab/setup.sh installs) for
 * aarch64 on an x86_64 build machine.
 */
export const GLIBC: Record<RuntimeArch, GlibcSource> = {
  x86_64: {
    loader: "ld-linux-x86-64.so.2",
    from: "/lib/x86_64-linux-gnu",
    packages: { libc: "libc6", libgcc: "libgcc-s1" },
  },
  aarch64: {
    loader: "ld-linux-aarch64.so.1",
    from: "/usr/aarch64-linux-gnu/lib",
    packages: { libc: "libc6-arm64-cross", libgcc: "libgcc-s1-arm64-cross" },
  },
};

/** On an aarch64 build machine its own libc6 and libgcc-s1 hold them, in the multiarch path. */
function glibcSource(arch: RuntimeArch): GlibcSource {
  if (arch === "aarch64" && Deno.build.arch === "aarch64") {
    return {
      ...GLIBC.aarch64,
      from: "/lib/aarch64-linux-gnu",
      packages: { libc: "libc6", libgcc: "libgcc-s1" },
    };
  }
  return GLIBC[arch];
}

/**
 * The libraries `deno` names (its DT_NEEDED, checked by {@link ensureGlibc} through the
 * loader's own `--list`): libgcc_s from libgcc, the rest from the C library's package.
 */
export const GLIBC_LIBS: readonly string[] = [
  "libc.so.6",
  "libm.so.6",
  "libdl.so.2",
  "libpthread.so.0",
  "librt.so.1",
  "libgcc_s.so.1",
];

/** The carried glibc: its directory (ready to copy), its files and where they came from. */
export interface Glibc {
  arch: RuntimeArch;
  dir: string;
  /** The loader's file name in `dir`. */
  loader: string;
  /** Every file of `dir`, the loader first, then the libraries, licences and SOURCES. */
  files: string[];
  /** The Debian packages copied from: name, version, and the source package to ask for. */
  packages: { name: string; version: string; source: string }[];
}

/** `dpkg-query` of one installed package: its version and its source package's name and version. */
async function debianPackage(name: string) {
  const out = await new Deno.Command("dpkg-query", {
    args: ["-W", "-f", "${Status}\t${Version}\t${source:Package}\t${source:Version}", name],
    stdin: "null",
  }).output().catch(() => undefined);
  const [status, version, source, sourceVersion] = out?.success
    ? new TextDecoder().decode(out.stdout).split("\t")
    : [];
  if (!status?.endsWith(" installed") || !version) {
    throw new RuntimeError(
      `Debian's package ${name} is not installed on this build machine: the glibc loader and ` +
        "libraries the packages carry beside Deno are copied from it",
      `apt-get install ${name} (lab/setup.sh installs it)`,
    );
  }
  return { name, version, source: `${source}=${sourceVersion}` };
}

/** The package dpkg says owns `path`. */
async function ownerOf(path: string): Promise<string> {
  const out = await new Deno.Command("dpkg-query", { args: ["-S", path], stdin: "null" })
    .output().catch(() => undefined);
  const text = out?.success ? new TextDecoder().decode(out.stdout) : "";
  return text.split(":")[0].trim();
}

/**
 * The glibc loader and libraries `runtime`'s `deno` needs, for its architecture, copied
 * into `cache` once per set of Debian package versions: each file from the package that
 * owns it (dpkg says so), the packages' copyright files as `LICENSE.glibc` and
 * `LICENSE.libgcc`, and `SOURCES` naming the packages and versions (their source is in
 * Debian's archive). Checked before use: the loader, asked to `--list` deno's libraries
 * with only this directory on its path, must find every one of them in it, and deno started
 * through it must say its version (another architecture's under QEMU where installed).
 */
export async function ensureGlibc(cache: string, runtime: Runtime): Promise<Glibc> {
  const source = glibcSource(runtime.arch);
  const libc = await debianPackage(source.packages.libc);
  const libgcc = await debianPackage(source.packages.libgcc);
  const stamp = `${libc.version}_${libgcc.version}`.replace(/[^A-Za-z0-9.+~_-]/g, "_");
  const dir = join(cache, `glibc-${runtime.arch}-${stamp}`);
  const files = [source.loader, ...GLIBC_LIBS, "LICENSE.glibc", "LICENSE.libgcc", "SOURCES"];
  const glibc: Glibc = { arch: runtime.arch, dir, loader: source.loader, files, packages: [] };
  glibc.packages = [libc, libgcc];
  if (await exists(join(dir, "ready"))) return glibc;
  await Deno.mkdir(cache, { recursive: true });
  const work = await Deno.makeTempDir({ dir: cache, prefix: ".glibc-" });
  try {
    const copied: Record<string, string[]> = { [libc.name]: [], [libgcc.name]: [] };
    for (const name of [source.loader, ...GLIBC_LIBS]) {
      const from = join(source.from, name);
      const owner = await ownerOf(from);
      const want = name === "libgcc_s.so.1" ? libgcc.name : libc.name;
      if (owner.replace(/:.*$/, "") !== want) {
        throw new RuntimeError(
          `${from} is not ${want}'s (dpkg says: ${owner || "no package"})`,
          `reinstall ${want}: the packages carry only files of Debian's ${want}`,
        );
      }
      await Deno.copyFile(from, join(work, name));
      await Deno.chmod(join(work, name), name === source.loader ? 0o755 : 0o644);
      copied[want].push(name);
    }
    for (const [pkg, as] of [[libc.name, "LICENSE.glibc"], [libgcc.name, "LICENSE.libgcc"]]) {
      await Deno.copyFile(`/usr/share/doc/${pkg}/copyright`, join(work, as));
      await Deno.chmod(join(work, as), 0o644);
    }
    const lines = [
      `The glibc dynamic loader and libraries that start the Deno runtime beside them`,
      `(${
        posix.basename(runtime.deno)
      } ${runtime.version}, ${runtime.arch}), copied unchanged from Debian's packages:`,
      ...[libc, libgcc].map((p) =>
        `  ${p.name} ${p.version}: ${copied[p.name].join(" ")} (source: apt-get source ${p.source})`
      ),
      "Their licences: LICENSE.glibc (the C library: LGPL-2.1-or-later and others) and",
      "LICENSE.libgcc (GPL-3.0-or-later with the GCC Runtime Library Exception), Debian's",
      "copyright files of those packages. The sources are in Debian's archive",
      "(https://deb.debian.org/debian, pool/main/g/).",
      "",
    ];
    await Deno.writeTextFile(join(work, "SOURCES"), lines.join("\n"), { mode: 0o644 });
    await checkGlibc(work, runtime, source.loader);
    await Deno.writeTextFile(join(work, "ready"), `${stamp}\n`);
    await Deno.chmod(work, 0o755);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await Deno.rename(work, dir);
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
  return glibc;
}

/**
 * The argv that starts `runtime`'s deno through the carried loader in `dir` (under QEMU for
 * another architecture where installed; undefined where not).
 */
export async function throughLoader(
  dir: string,
  loader: string,
  runtime: Runtime,
  deno = runtime.deno,
): Promise<string[] | undefined> {
  const argv = [join(dir, loader), "--library-path", dir, deno];
  if (runtime.arch === Deno.build.arch) return argv;
  const { qemu } = EMULATORS[runtime.arch];
  return (await exists(qemu)) ? [qemu, ...argv] : undefined;
}

async function checkGlibc(dir: string, runtime: Runtime, loader: string): Promise<void> {
  const argv = await throughLoader(dir, loader, runtime);
  if (!argv) return; // another architecture without QEMU: the files are Debian's, unchecked
  const list = [...argv.slice(0, -1), "--list", argv.at(-1)!];
  const listed = await run(list[0], list.slice(1));
  const outside = listed.split("\n").map((l) => l.trim()).filter((l) =>
    // The kernel's vDSO (named linux-vdso, or nothing under QEMU) is no file.
    l !== "" && !l.startsWith("linux-vdso") && !/^\(0x[0-9a-f]+\)$/.test(l) &&
    !l.includes(`=> ${dir}/`)
  );
  if (outside.length > 0) {
    throw new RuntimeError(
      `deno ${runtime.version} (${runtime.arch}) needs libraries the carried glibc lacks: ` +
        outside.join("; "),
      "add them to GLIBC_LIBS in packaging/tarball/runtime.ts",
    );
  }
  const said = await run(argv[0], [...argv.slice(1), "--version"]);
  if (!said.startsWith(`deno ${runtime.version} `)) {
    throw new RuntimeError(
      `deno started through the carried ${loader} says "${said.split("\n")[0]}"`,
      "the loader and libraries copied from Debian do not start this runtime",
    );
  }
}
