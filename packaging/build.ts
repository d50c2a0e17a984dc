/**
 * `deno task build <os> [--form auto|compiled|bundled] [--arch A] [--target TRIPLE] [--version V]`:
 * builds the host for one OS into dist/<os>/ from ONE permission file
 * (packaging/<os>/permissions), in the compiled form where a Deno runtime base
 * (denort) is available, else in the bundled form (DESIGN.md §2).
 */
import { parseArgs } from "node:util";
import { join, posix } from "node:path";
import { pathToFileURL } from "node:url";
import { HostError } from "../src/errors.ts";
import { VERSION } from "../src/version.ts";
import { OWN_PATHS_BY_OS } from "./own_paths_by_os.ts";
import { DISTRIBUTIONS } from "../os/distros/mod.ts";
import { carriedModule } from "./derive_providers.ts";
import { completion, SHELLS } from "../src/cli/completions.ts";
import { IMAGE_FILE, IMAGE_NAME, pauseImage } from "./image.ts";
import {
  ensureGlibc,
  ensureRuntime,
  GLIBC,
  type Glibc,
  type RuntimeArch,
  runtimePins,
} from "./tarball/runtime.ts";
import {
  actionPrograms,
  loadPermissionSet,
  permissionFlags,
  type PermissionSet,
  TARGET_OSES,
  type TargetOs,
} from "./permissions.ts";

/** What `build` was asked for. */
export interface BuildOptions {
  os: TargetOs;
  /** auto: compiled when `deno compile` can get a denort (DENORT_BIN or online), else bundled. */
  form?: "auto" | "compiled" | "bundled";
  /** Output directory; default dist/<os>. */
  out?: string;
  /** Program entry; default main.ts, the program (tests build a probe with the same set). */
  entry?: string;
  /**
   * The bundle shipped with the package; default packaging/<os>/substrate.lock when the
   * OS has one (arch, alpine), else packaging/substrate.lock (the tarball's, empty).
   */
  bundleFile?: string;
  /** Compile target; default this machine's. */
  target?: string;
  /**
   * The machine architecture the build is for: the runtime the Arch package and the tarball
   * carry in the bundled form is that architecture's. Default this machine's.
   */
  arch?: RuntimeArch;
  /**
   * The Deno version the built host accepts to run on (src/version.ts RUNTIME_TESTED);
   * default runtime.json's, the one every build runs on. A test stamps another to see the
   * host refuse the runtime it finds.
   */
  testedRuntime?: string;
  /**
   * The version compiled in (the host's VERSION, which `version` prints and heartbeats
   * report); default src/version.ts's. A stamped build (e.g. the next version for an
   * upgrade test) swaps src/version.ts for a copy stating this one, via an import map.
   */
  version?: string;
  /**
   * Where the Deno runtime the bundled form of the tarball and the Arch package carries is
   * fetched to and kept (packaging/tarball/runtime.ts); default dist/runtime.
   */
  runtimeCache?: string;
  /**
   * Modules of the checkout built in place of others (paths from the checkout, e.g.
   * `{"src/link/connection.ts": "src/link/connection_deno.ts"}`), through the import map:
   * for a bench that measures a variant (tests/bench/link_bench.ts --transport). None by
   * default; never a package's build.
   */
  swaps?: Record<string, string>;
}

/** What a build produced. Written to dist/<os>/build.json as well. */
export interface BuildResult {
  os: TargetOs;
  form: "compiled" | "bundled";
  version: string;
  /** The machine architecture it is for (the carried runtime's). */
  arch: RuntimeArch;
  dir: string;
  /** The permission flags both forms carry. */
  flags: string[];
  /** compiled: the `deno compile` argv; bundled: the argv the shim execs. */
  command: string[];
  /** Why the form is what it is. */
  note: string;
  /**
   * The bundled form (every package carries its runtime): the Deno version it carries
   * (`deno`, `deno.LICENSE`).
   */
  runtime?: string;
  /**
   * The tarball and Alpine: the glibc loader and libraries carried beside the runtime, in
   * `glibc/` (packaging/tarball/runtime.ts ensureGlibc): the loader's name, every file, and
   * the Debian packages they were copied from.
   */
  glibc?: Pick<Glibc, "loader" | "files" | "packages">;
  /**
   * The bundled form: the program's files in `dir`, installed side by side (the entry,
   * nox-mesh-host.js, first; then the parts it loads when a command needs them).
   */
  bundle?: string[];
}

/** The bundled form's entry: the file the shim runs (the permission file's `bundle`). */
export const BUNDLE_ENTRY = "nox-mesh-host.js";

/** A build step failed. */
export class BuildError extends HostError {
  constructor(what: string, hint: string) {
    super("packaging.build", what, { hint });
  }
}

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;

/**
 * V8 flags of both forms: a young generation of 1 MiB semi-spaces instead of V8's
 * default (up to 16 MiB each), which a short-lived CLI and an idle service never
 * need: the peak resident memory of an apply drops without costing its time; and
 * `--optimize-for-size`, V8's own trade of speed for memory: `run` holding 550
 * resources peaks about 30 MiB lower under a stream of pushes, for about a tenth
 * more CPU per push (tests/bench/RESULTS.md, "The resident run"); and `--expose-gc`, so
 * that `run`, before it gives freed memory back while it waits (main.ts, `memoryTrim`),
 * collects V8's garbage first: about 4 MiB more off its idle resident set, no CPU per push
 * measured (RESULTS.md, "Issue 37").
 */
export const RUNTIME_FLAGS: readonly string[] = [
  "--v8-flags=--max-semi-space-size=1,--optimize-for-size,--expose-gc",
];

/** The `deno compile` argv (after `deno`) for a set; the flags are `permissionFlags`. */
export function compileArgs(
  flags: readonly string[],
  { output, entry, target }: { output: string; entry: string; target?: string },
): string[] {
  return [
    "compile",
    ...(target ? ["--target", target] : []),
    "--output",
    output,
    ...RUNTIME_FLAGS,
    ...flags,
    entry,
  ];
}

/**
 * The argv that starts the runtime, before `run`: `deno` itself, or where the set carries a
 * glibc loader (the tarball, Alpine) that loader with its libraries' directory and then
 * `deno` (`LIB/ld-linux-x86-64.so.2 --library-path LIB DIR/deno`), which runs on musl and on
 * any glibc. The loader's name is the architecture's (`arch`, default this machine's).
 */
export function runtimeArgs(set: PermissionSet, arch: RuntimeArch = hostArch()): string[] {
  if (!set.glibc) return [set.deno];
  return [posix.join(set.glibc, GLIBC[arch].loader), "--library-path", set.glibc, set.deno];
}

const hostArch = () => Deno.build.arch as RuntimeArch;

/** The argv the bundled form's shim execs (without the trailing "$@"). */
export function shimArgs(
  set: PermissionSet,
  flags: readonly string[],
  arch: RuntimeArch = hostArch(),
): string[] {
  return [...runtimeArgs(set, arch), "run", "--no-config", ...RUNTIME_FLAGS, ...flags, set.bundle];
}

const quote = (a: string) => `'${a.replaceAll("'", `'\\''`)}'`;

/**
 * Whether an OS's bundled form carries its runtime (beside the bundle, in the package's own
 * library directory): every one does (the tarball and Alpine with the glibc loader that
 * starts it, since Deno publishes no musl build).
 */
export function carried(set: PermissionSet): boolean {
  return posix.dirname(set.deno) === posix.dirname(set.bundle);
}

/**
 * The shim: a sh script that runs the bundle on deno with exactly `flags`. For the
 * tarball it runs the runtime the tarball carries, found relative to the shim (in
 * ../lib/nox-mesh-host/ from its own directory), through the glibc loader beside it, never
 * a deno on PATH; for the Arch package the runtime it carries in /usr/lib/nox-mesh-host;
 * for Alpine the runtime it carries there, through the glibc loader beside it.
 */
export function shimText(
  set: PermissionSet,
  flags: readonly string[],
  version = VERSION,
  arch: RuntimeArch = hostArch(),
): string {
  const args = shimArgs(set, flags, arch);
  const through = set.glibc
    ? ` (started through the glibc loader carried beside it, ${GLIBC[arch].loader}: ${arch})`
    : "";
  /** The shim's comment: `text` as lines of at most 90 characters, each after "# ". */
  const comment = (text: string) =>
    text.split(" ").reduce<string[]>((lines, word) => {
      const last = lines.at(-1);
      if (last !== undefined && last.length + word.length < 88) {
        lines[lines.length - 1] += ` ${word}`;
      } else lines.push(`# ${word}`);
      return lines;
    }, []).join("\n");
  if (set.os !== "tarball") {
    return `#!/bin/sh
${
      comment(
        `nox-mesh-host ${version}, bundled form for ${set.os}: runs the bundle on ${
          carried(set) ? "the Deno runtime the package carries" : "the system deno"
        }${through} with the permission set of packaging/${set.os}/permissions. Generated by ` +
          "packaging/build.ts; do not edit.",
      )
    }
exec ${args.map(quote).join(" \\\n\t")} \\\n\t"$@"
`;
  }
  const lib = posix.dirname(set.deno);
  if (posix.dirname(set.bundle) !== lib || (set.glibc && posix.dirname(set.glibc) !== lib)) {
    throw new BuildError(
      `${set.source}: the tarball's deno, glibc and bundle must lie in one directory (${lib})`,
      "put them in lib/nox-mesh-host/",
    );
  }
  const fromBin = posix.relative(posix.dirname(set.binary), lib);
  const deno = `$lib/${posix.basename(set.deno)}`;
  const glibc = set.glibc ? `$lib/${posix.basename(set.glibc)}` : undefined;
  const loader = glibc ? `${glibc}/${GLIBC[arch].loader}` : undefined;
  const start = loader ? [loader, "--library-path", glibc!, deno] : [deno];
  const need = loader ? [deno, loader] : [deno];
  const middle = args.slice(runtimeArgs(set, arch).length, -1).map(quote);
  return `#!/bin/sh
${
    comment(
      `nox-mesh-host ${version}, bundled form from the tarball: runs the bundle on the Deno ` +
        `runtime the tarball carries (${fromBin}/deno from this script's directory, never a ` +
        `deno on PATH)${through} with the permission set of packaging/tarball/permissions. ` +
        "Generated by packaging/build.ts; do not edit.",
    )
  }
set -eu
lib=$(CDPATH='' cd -- "$(dirname -- "$0")/${fromBin}" 2>/dev/null && pwd) || lib=''
if [ -z "$lib" ]${need.map((p) => ` || [ ! -x "${p}" ]`).join("")}; then
	printf '%s\\n' "nox-mesh-host: no Deno runtime (or its loader) at $(dirname -- "$0")/${fromBin}/: unpack the whole tarball into one prefix (tar -xz -C /usr/local)" >&2
	exit 127
fi
exec ${start.map((a) => a.startsWith("$") ? `"${a}"` : quote(a)).join(" ")} ${
    middle.join(" \\\n\t")
  } \\\n\t"$lib/${posix.basename(set.bundle)}" "$@"
`;
}

async function deno(args: string[], env?: Record<string, string>) {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    // From the checkout, so the module paths the bundle names are the same wherever it is.
    cwd: repo(""),
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { ok: out.success, text };
}

/** The machine architectures a build can be for (`--arch`). */
export const BUILD_ARCHES: readonly RuntimeArch[] = ["x86_64", "aarch64"];

/** What a version may look like: a pacman pkgver and an apk pkgver, and a directory name. */
const VERSION_FORM = /^[0-9]+(\.[0-9A-Za-z]+)*$/;

/** What a build stamps into its copy of src/version.ts. */
interface Stamp {
  version: string;
  form: "compiled" | "bundled";
  commit: string;
  /** The Deno version the host accepts to run on. */
  runtime: string;
}

/**
 * Writes the build's import map into `dir` and returns its path: deno.json's own
 * imports, os/carried.ts replaced by a module importing the providers this OS carries
 * (packaging/derive_providers.ts carriedModule), packaging/program_own_paths.ts replaced by the
 * OS's own paths, and src/version.ts replaced by a copy stating the stamp's version, form and commit.
 */
async function writeImportMap(
  os: TargetOs,
  stamp: Stamp,
  dir: string,
  swaps: Record<string, string> = {},
): Promise<string> {
  const config = JSON.parse(await Deno.readTextFile(repo("deno.json")));
  const imports: Record<string, string> = { ...config.imports };
  // Its providers: the descriptors whose builds name it, in place of the checkout's. A
  // generated module (its path is named in the bundle, so not one beside the output: two
  // builds into two directories would differ).
  const providers = await generatedModule(
    "carried.ts",
    carriedModule(os, new URL("../", import.meta.url).href),
  );
  imports[new URL("../os/carried.ts", import.meta.url).href] = pathToFileURL(providers).href;
  // Its own paths (packaging/own_paths_by_os.ts), as a literal list in place of every OS's list.
  imports[new URL("./program_own_paths.ts", import.meta.url).href] = pathToFileURL(
    await embedOwnPaths(os),
  ).href;
  imports[new URL("../src/version.ts", import.meta.url).href] = pathToFileURL(
    await stampVersion(stamp),
  ).href;
  for (const [from, to] of Object.entries(swaps)) {
    imports[pathToFileURL(repo(from)).href] = pathToFileURL(repo(to)).href;
  }
  const file = join(dir, `import_map.${stamp.form}.json`);
  await Deno.writeTextFile(file, JSON.stringify({ imports }, null, 2));
  return file;
}

/**
 * Writes a module stating `os`'s own paths (packaging/own_paths_by_os.ts) as a
 * literal list, where its installation puts substrate.lock (the permission
 * file's `substrate`) and the program (its `binary`, which the file system runs as a
 * directory's owner), as a generated module; returns its path. The program then carries its
 * OS's list and nothing else.
 */
async function embedOwnPaths(os: TargetOs): Promise<string> {
  const set = await loadPermissionSet(os);
  return await generatedModule(
    "own_paths.ts",
    `// The host's own paths on ${os}, from packaging/own_paths_by_os.ts, and its bundle\n` +
      `// (packaging/${os}/permissions). Generated by packaging/build.ts; do not edit.\n` +
      `export const OWN_PATHS: readonly string[] = ${
        JSON.stringify(OWN_PATHS_BY_OS[os], null, 2)
      };\n` +
      `export const BUNDLE_PATH: string | undefined = ${JSON.stringify(set.substrate)};\n` +
      `export const SELF_PROGRAM: string | undefined = ${JSON.stringify(set.binary)};\n`,
  );
}

/** Where the modules a build generates lie (under dist/, named by their content). */
const GENERATED = "dist/.gen";

/**
 * Writes a module the build generates (a stamped version.ts, an OS's own paths) to
 * dist/.gen/<digest of its text>/NAME, unless it is there already, and returns its path.
 * The bundler names a module by its path from the checkout (in comments, and in the
 * names of modules it initialises lazily), and the names of the bundle's files are
 * digests of their text: a path that depends only on the text keeps the same checkout's
 * bundle the same bytes, file names included, whatever the output directory.
 */
async function generatedModule(name: string, text: string): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)),
  );
  const hex = Array.from(digest.subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
  const dir = repo(`${GENERATED}/${hex}`);
  const file = join(dir, name);
  if (await Deno.readTextFile(file).then((t) => t === text, () => false)) return file;
  await Deno.mkdir(dir, { recursive: true });
  // Written aside and renamed: another build may be reading the same file.
  const temp = join(dir, `.${name}.${crypto.randomUUID()}`);
  await Deno.writeTextFile(temp, text);
  await Deno.rename(temp, file);
  return file;
}

/** Writes a copy of src/version.ts stating the stamp (generatedModule); returns its path. */
async function stampVersion(stamp: Stamp): Promise<string> {
  const original = await Deno.readTextFile(repo("src/version.ts"));
  const lines: Array<[RegExp, string]> = [
    [
      /^export const VERSION = "[^"]*";$/m,
      `export const VERSION = ${JSON.stringify(stamp.version)};`,
    ],
    [
      /^export const FORM: [^=]+= "[^"]*";$/m,
      `export const FORM: "compiled" | "bundled" | "source" = ${JSON.stringify(stamp.form)};`,
    ],
    [/^export const COMMIT = "[^"]*";$/m, `export const COMMIT = ${JSON.stringify(stamp.commit)};`],
    [
      /^export const RUNTIME_TESTED: string \| null = null;$/m,
      `export const RUNTIME_TESTED: string | null = ${JSON.stringify(stamp.runtime)};`,
    ],
  ];
  let text = original;
  for (const [line, stamped] of lines) {
    if (!line.test(text)) {
      throw new BuildError(`src/version.ts has no line like ${line.source}`, "restore it");
    }
    text = text.replace(line, stamped);
  }
  return await generatedModule(`version.${stamp.form}.ts`, text);
}

/** The commit of the checkout (with "-dirty" when it has changes), or "unknown" outside git. */
export async function checkoutCommit(): Promise<string> {
  const git = async (args: string[]) => {
    const out = await new Deno.Command("git", { args: ["-C", repo(""), ...args], stdin: "null" })
      .output().catch(() => undefined);
    return out?.success ? new TextDecoder().decode(out.stdout).trim() : undefined;
  };
  const head = await git(["rev-parse", "HEAD"]);
  if (!head) return "unknown";
  const changes = await git(["status", "--porcelain", "--untracked-files=no"]);
  return changes ? `${head}-dirty` : head;
}

/** Builds one OS into its output directory. */
export async function build(options: BuildOptions): Promise<BuildResult> {
  const dir = options.out ?? repo(`dist/${options.os}`);
  const version = options.version ?? VERSION;
  if (!VERSION_FORM.test(version)) {
    throw new BuildError(
      `"${version}" is not a version this build can stamp`,
      "use digits and dots (letters after the first dot allowed), e.g. 0.2.0 or 0.1.0.1",
    );
  }
  // The import map and the bundler's output live beside the output (the build task may
  // write only there and in dist/) and go after; the generated modules stay in dist/.gen.
  const mapDir = `${dir}.map`;
  try {
    await Deno.remove(mapDir, { recursive: true }).catch(() => {});
    await Deno.mkdir(mapDir, { recursive: true });
    const commit = await checkoutCommit();
    const runtime = options.testedRuntime ?? (await runtimePins()).version;
    const importMap = (form: Stamp["form"]) =>
      writeImportMap(options.os, { version, form, commit, runtime }, mapDir, options.swaps);
    return await buildWith(options, dir, version, importMap, mapDir);
  } finally {
    await Deno.remove(mapDir, { recursive: true }).catch(() => {});
  }
}

async function buildWith(
  options: BuildOptions,
  dir: string,
  version: string,
  importMap: (form: Stamp["form"]) => Promise<string>,
  mapDir: string,
): Promise<BuildResult> {
  const { os, form = "auto", entry = repo("main.ts") } = options;
  const arch = options.arch ?? (Deno.build.arch as RuntimeArch);
  const target = options.target ??
    (arch === Deno.build.arch ? undefined : `${arch}-unknown-linux-gnu`);
  const set = await loadPermissionSet(os);
  const bundleFile = options.bundleFile ?? await defaultBundle(os);
  const bundleText = await Deno.readTextFile(bundleFile);
  const flags = permissionFlags(set, await actionPrograms(bundleText, bundleFile));
  const image = await pauseImage();
  checkImagePins(bundleText, image.digest, bundleFile);
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(join(dir, "images"), { recursive: true });
  await Deno.copyFile(bundleFile, join(dir, "substrate.lock"));
  // The image the bundle's container runs, loaded by its action (packaging/image.ts).
  await Deno.writeFile(join(dir, "images", IMAGE_FILE), image.archive, { mode: 0o644 });
  const binary = join(dir, "nox-mesh-host");

  let result: BuildResult | undefined;
  // A musl distribution (Alpine) has no compiled form: Deno publishes no musl runtime.
  const musl = DISTRIBUTIONS.find((d) => d.id === os)?.libc === "musl";
  if (form === "compiled" && musl) {
    throw new BuildError(
      `${os} has no compiled form: Deno publishes no musl runtime`,
      `build ${os} with --form bundled (the default picks it)`,
    );
  }
  if (form !== "bundled" && !musl) {
    const command = compileArgs(flags, { output: binary, entry, target });
    const mapArgs = ["--import-map", await importMap("compiled")];
    const compiled = await deno([command[0], ...mapArgs, ...command.slice(1)]);
    if (compiled.ok) await checkCompiled(binary, version, target);
    if (compiled.ok) {
      const note = Deno.env.get("DENORT_BIN") ? "compiled with DENORT_BIN" : "compiled";
      result = { os, form: "compiled", version, arch, dir, flags, command, note };
    } else if (form === "compiled") {
      throw new BuildError(
        `deno compile failed:\n${compiled.text}`,
        "set DENORT_BIN to a denort of this Deno version, or build --form bundled",
      );
    } else {
      const why = compiled.text.split("Stack backtrace")[0].trim().split("\n").pop()?.trim();
      console.error(`build ${os}: deno compile could not get a denort (${why}); building bundled`);
    }
  }
  if (!result) {
    const parts = `${mapDir}/bundle`;
    const bundled = await deno([
      "bundle",
      "--quiet",
      "--code-splitting",
      "--import-map",
      await importMap("bundled"),
      "--outdir",
      parts,
      entry,
    ]);
    if (!bundled.ok) throw new BuildError(`deno bundle failed:\n${bundled.text}`, "fix the entry");
    const files = await placeBundle(parts, entry, dir);
    for (const file of files) await reproducible(join(dir, file));
    await Deno.writeTextFile(binary, shimText(set, flags, version, arch), { mode: 0o755 });
    await Deno.chmod(binary, 0o755);
    const name = DISTRIBUTIONS.find((d) => d.id === os)?.name;
    const note = musl ? `bundled (${name}: always)` : "bundled (no denort available)";
    result = {
      os,
      form: "bundled",
      version,
      arch,
      dir,
      flags,
      command: shimArgs(set, flags, arch),
      note,
      bundle: files,
    };
    if (carried(set)) {
      // No package needs a deno on the machine: each carries the runtime the shim runs,
      // for the architecture it is built for; the tarball and Alpine also the glibc loader
      // and libraries that start it on musl (and on any glibc).
      const cache = options.runtimeCache ?? repo("dist/runtime");
      const runtime = await ensureRuntime(cache, { arch });
      for (const [from, to] of [[runtime.deno, "deno"], [runtime.licence, "deno.LICENSE"]]) {
        await Deno.link(from, join(dir, to)).catch(() => Deno.copyFile(from, join(dir, to)));
      }
      result.runtime = runtime.version;
      if (set.glibc) {
        const glibc = await ensureGlibc(cache, runtime);
        await Deno.mkdir(join(dir, "glibc"));
        for (const name of glibc.files) {
          const [from, to] = [join(glibc.dir, name), join(dir, "glibc", name)];
          await Deno.link(from, to).catch(() => Deno.copyFile(from, to));
        }
        const { loader, files, packages } = glibc;
        result.glibc = { loader, files, packages };
      }
    }
  }
  // Shell completions from the CLI's command table (the packages install them).
  await Deno.mkdir(join(dir, "completions"));
  for (const shell of SHELLS) {
    await Deno.writeTextFile(join(dir, "completions", `nox-mesh-host.${shell}`), completion(shell));
  }
  await Deno.writeTextFile(join(dir, "build.json"), JSON.stringify(result, null, 2) + "\n");
  return result;
}

/** packaging/<os>/substrate.lock when the OS has its own bundle, else packaging/substrate.lock. */
export async function defaultBundle(os: TargetOs): Promise<string> {
  const own = repo(`packaging/${os}/substrate.lock`);
  try {
    await Deno.stat(own);
    return own;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    return repo("packaging/substrate.lock");
  }
}

/**
 * Every pin of the carried image in a bundle (`localhost/nox-mesh-host/pause@sha256:…`)
 * must name the digest of the archive this build makes: a stale pin would load an
 * image the container then cannot find, on every machine.
 */
export function checkImagePins(bundleText: string, digest: string, origin: string): void {
  const pin = new RegExp(`${IMAGE_NAME.replaceAll(".", "\\.")}@(sha256:[a-f0-9]{64})`, "g");
  for (const [, pinned] of bundleText.matchAll(pin)) {
    if (pinned !== digest) {
      throw new BuildError(
        `${origin} pins ${IMAGE_NAME}@${pinned}, but the image this build carries is ${digest}`,
        "write the digest `deno run packaging/image.ts` prints into the bundle",
      );
    }
  }
}

/**
 * The bundle names each module by its path from the checkout, the generated ones (stamped
 * version, own paths) too, which lie beside the output: they are renamed to one fixed
 * name, so the same checkout gives the same bundle whatever the output directory.
 */
async function reproducible(bundle: string): Promise<void> {
  const generated = new RegExp(`${GENERATED.replaceAll(".", "\\.")}/[0-9a-f]{16}`, "g");
  const text = await Deno.readTextFile(bundle);
  if (!generated.test(text)) return;
  await Deno.writeTextFile(bundle, text.replaceAll(generated, "nox-mesh-host-build"));
}

/** How the bundler names a part other than the entry: a name, a dash, 8 digest characters. */
const PART_NAME = /^[A-Za-z0-9_]+(-[A-Za-z0-9_]+)*-[A-Z0-9]{8}\.js$/;

/**
 * Moves the bundler's output (`parts`) into `dir`: the entry as nox-mesh-host.js, the other
 * parts (the code a command loads when it runs it: the engine, the link, the adapters,
 * and the code they share) under their own names beside it. Returns the names, the
 * entry first. Deno reads every part the entry can import when the program starts, so a
 * running process never mixes the parts of two versions (packaging/README.md).
 */
async function placeBundle(parts: string, entry: string, dir: string): Promise<string[]> {
  const entryName = posix.basename(entry).replace(/\.[cm]?[jt]sx?$/, ".js");
  const names = [...Deno.readDirSync(parts)].map((e) => {
    if (!e.isFile) throw new BuildError(`deno bundle wrote ${e.name}, not a file`, "report it");
    return e.name;
  }).sort();
  if (!names.includes(entryName)) {
    throw new BuildError(`deno bundle wrote no ${entryName} (it wrote ${names.join(", ")})`, "");
  }
  const others = names.filter((n) => n !== entryName);
  for (const name of others) {
    if (!PART_NAME.test(name)) {
      throw new BuildError(`deno bundle wrote ${name}, which is not a part's name`, "report it");
    }
    // The entry is renamed: nothing may import it by its old name.
    if ((await Deno.readTextFile(join(parts, name))).includes(`"./${entryName}"`)) {
      throw new BuildError(`${name} imports the entry ${entryName}`, "report it");
    }
  }
  await Deno.rename(join(parts, entryName), join(dir, BUNDLE_ENTRY));
  for (const name of others) await Deno.rename(join(parts, name), join(dir, name));
  for (const name of [BUNDLE_ENTRY, ...others]) await lazyRequire(join(dir, name));
  return [BUNDLE_ENTRY, ...others];
}

/**
 * How `deno bundle` gives the npm packages' CommonJS code its `require`: node's module
 * loader, imported by the part with the bundler's helpers, which every part imports.
 */
const DENO_REQUIRE =
  'import { createRequire as __deno_internal_createRequire } from "node:module";\n' +
  "var __require = __deno_internal_createRequire(import.meta.url);\n";

/**
 * The same `require`, made when first called: loading node's module loader costs every
 * command about 15 ms and 9 MiB, and only the link's packages call it (`version`, `plan`
 * and `apply` of a file never do; tests/program_parts_test.ts).
 */
const LAZY_REQUIRE = "var __deno_require;\n" +
  "var __require = (id) => (__deno_require ??= globalThis.process.getBuiltinModule(" +
  '"node:module").createRequire(import.meta.url))(id);\n';

async function lazyRequire(file: string): Promise<void> {
  const text = await Deno.readTextFile(file);
  if (text.includes(DENO_REQUIRE)) {
    await Deno.writeTextFile(file, text.replace(DENO_REQUIRE, LAZY_REQUIRE));
  }
}

/** A "denort" that is not one (e.g. a full deno) compiles fine and then does not run. */
async function checkCompiled(binary: string, version: string, target?: string): Promise<void> {
  if (target && !target.startsWith(Deno.build.arch)) return; // cannot run another arch here
  const out = await new Deno.Command(binary, { args: ["version"], stdin: "null" }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success || !text.includes(version)) {
    throw new BuildError(
      `the compiled ${binary} does not run (\`version\` printed "${text.trim()}")`,
      "DENORT_BIN must be the denort of this exact Deno version",
    );
  }
}

if (import.meta.main) {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      form: { type: "string", default: "auto" },
      target: { type: "string" },
      version: { type: "string" },
      arch: { type: "string", default: Deno.build.arch },
    },
  });
  const [os] = positionals;
  const form = values.form as BuildOptions["form"];
  if (
    !TARGET_OSES.includes(os as TargetOs) || !["auto", "compiled", "bundled"].includes(form!) ||
    !BUILD_ARCHES.includes(values.arch as RuntimeArch)
  ) {
    console.error(
      `usage: deno task build ${TARGET_OSES.join("|")} [--form auto|compiled|bundled] ` +
        `[--arch ${BUILD_ARCHES.join("|")}] [--target T] [--version V]`,
    );
    Deno.exit(64);
  }
  try {
    const r = await build({
      os: os as TargetOs,
      form,
      arch: values.arch as RuntimeArch,
      target: values.target,
      version: values.version,
    });
    console.log(`built ${r.os} ${r.version} for ${r.arch} (${r.note}) into ${r.dir}`);
  } catch (e) {
    if (!(e instanceof HostError)) throw e;
    console.error(e.message);
    Deno.exit(1);
  }
}
