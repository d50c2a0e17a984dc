/**
 * The Deno runtime the tarball and the Arch package carry when they ship the bundled form
 * (DESIGN.md §12): the `deno` executable of the npm package for the build's architecture
 * (`@deno/linux-x64-glibc`, `@deno/linux-arm64-glibc`), at the version this build runs on,
 * and Deno's licence from the npm package `deno` of the same version (the platform packages
 * carry none). Both are fetched with `npm pack` into a cache outside the checkout and checked
 * against the integrity pinned in runtime.json before anything is used.
 */
import { join } from "node:path";
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
