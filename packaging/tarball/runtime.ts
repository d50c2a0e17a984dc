/**
 * The Deno runtime the tarball carries when it ships the bundled form (DESIGN.md §12): the
 * `deno` executable of the npm package `@deno/linux-x64-glibc`, at the version this build runs
 * on, and Deno's licence from the npm package `deno` of the same version (the platform
 * package carries none). Both are fetched with `npm pack` into a cache outside the checkout
 * and checked against the integrity pinned in runtime.json before anything is used.
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

/** The runtime files, ready to be copied into a tarball. */
export interface Runtime {
  version: string;
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

/**
 * The runtime for `arch` (Deno.build.arch's spelling), fetched into `cache` once and
 * checked: the packages' integrity against runtime.json, and the executable must say it
 * is that version. The version must be the one this build runs on: the bundle is made by
 * this deno and runs on that one.
 */
export async function ensureRuntime(
  cache: string,
  { arch = Deno.build.arch, buildVersion = Deno.version.deno } = {},
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
  const runtime = { version: pins.version, deno: join(dir, "deno"), licence: join(dir, "LICENSE") };
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
    const said = await run(join(work, "deno"), ["--version"]);
    if (!said.startsWith(`deno ${pins.version} `)) {
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
