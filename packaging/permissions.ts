/**
 * The per-OS permission set (packaging/<os>/permissions), the single source of
 * the host's Deno permission flags in both build forms (DESIGN.md §2, §3).
 */
import { posix } from "node:path";
import { HostError } from "../src/errors.ts";
import { DEFAULTS } from "../src/config.ts";
import { ALL_OWN_PATHS } from "./own_paths_by_os.ts";
import { parseTrustedDeclaration } from "../src/engine/parse.ts";
import { PROGRAM } from "../src/version.ts";
import type { PackagedBuild } from "../os/provider.ts";
import { DISTRIBUTIONS } from "../os/distros/mod.ts";

/** The operating systems the host is built for: each distribution's build, and the tarball. */
export type TargetOs = PackagedBuild;

/** Every target, in the order builds and docs list them (os/distros/mod.ts, then the tarball). */
export const TARGET_OSES: readonly TargetOs[] = [...DISTRIBUTIONS.map((d) => d.id), "tarball"];

/** One OS's permission set, and where its build installs the host. */
export interface PermissionSet {
  os: TargetOs;
  /** The file it was read from. */
  source: string;
  /** The host's program: the compiled binary, or the shim of the bundled form. */
  binary: string;
  /** The bundled form's program file. */
  bundle: string;
  /** The deno the shim runs (bundled form). */
  deno: string;
  /**
   * Where the glibc loader and libraries carried beside `deno` lie, which start it (the
   * tarball, Alpine: packaging/tarball/runtime.ts); absent where the runtime starts by itself.
   */
  glibc?: string;
  /** Where the build installs the bundle substrate.lock (the program's default bundle). */
  substrate: string;
  allowRead: string[];
  allowWrite: string[];
  denyWrite: string[];
  allowRun: string[];
  allowEnv: string[];
  allowSys: string[];
  /** "all" = any address (`allow-net *`); otherwise host[:port] entries. */
  allowNet: "all" | string[];
  denyNet: string[];
}

/** A permission file is malformed, or a bundle names a program the set cannot allow. */
export class PermissionFileError extends HostError {
  constructor(what: string, where: string) {
    super("packaging.permissions", what, {
      where,
      hint: "fix the file; its format is described at its top",
    });
  }
}

const LISTS = {
  "allow-read": "allowRead",
  "allow-write": "allowWrite",
  "deny-write": "denyWrite",
  "allow-run": "allowRun",
  "allow-env": "allowEnv",
  "allow-sys": "allowSys",
  "deny-net": "denyNet",
} as const;
const PLACES = ["binary", "bundle", "deno", "substrate"] as const;
/** Places a set may name (once), or not. */
const OPTIONAL_PLACES = ["glibc"] as const;
const PATH_KINDS = new Set([
  "allow-read",
  "allow-write",
  "deny-write",
  "allow-run",
  ...PLACES,
  ...OPTIONAL_PLACES,
]);

/** Reads packaging/<os>/permissions of this repository. */
export async function loadPermissionSet(os: TargetOs): Promise<PermissionSet> {
  const source = new URL(`./${os}/permissions`, import.meta.url).pathname;
  return parsePermissionFile(await Deno.readTextFile(source), os, source);
}

/**
 * Parses a permission file: one `KIND VALUE` a line, `#` starts a comment.
 *
 * @example
 * ```ts
 * const set = parsePermissionFile("binary /usr/bin/x\n…", "arch", "arch/permissions");
 * ```
 */
export function parsePermissionFile(text: string, os: TargetOs, source: string): PermissionSet {
  const set: PermissionSet = {
    os,
    source,
    binary: "",
    bundle: "",
    deno: "",
    substrate: "",
    allowRead: [],
    allowWrite: [],
    denyWrite: [],
    allowRun: [],
    allowEnv: [],
    allowSys: [],
    allowNet: [],
    denyNet: [],
  };
  text.split("\n").forEach((raw, i) => {
    const where = `${source}:${i + 1}`;
    const words = raw.replace(/(^|\s)#.*$/, "").trim().split(/\s+/).filter((w) => w !== "");
    if (words.length === 0) return;
    if (words.length !== 2) throw new PermissionFileError("expected KIND VALUE", where);
    const [kind, value] = words;
    if (value.includes(",")) throw new PermissionFileError(`"${value}" holds a comma`, where);
    if (
      PATH_KINDS.has(kind) &&
      (!value.startsWith("/") || posix.normalize(value) !== value || /.\/$/.test(value))
    ) {
      throw new PermissionFileError(`"${value}" is not a normalised absolute path`, where);
    }
    if (kind === "allow-net") {
      if (value === "*") set.allowNet = "all";
      else if (set.allowNet === "all") {
        throw new PermissionFileError("allow-net * is already all", where);
      } else set.allowNet.push(value);
    } else if ([...PLACES, ...OPTIONAL_PLACES].includes(kind as typeof PLACES[number])) {
      const place = kind as typeof PLACES[number] | typeof OPTIONAL_PLACES[number];
      if (set[place]) throw new PermissionFileError(`${kind} is given twice`, where);
      set[place] = value;
    } else if (kind in LISTS) {
      set[LISTS[kind as keyof typeof LISTS]].push(value);
    } else {
      throw new PermissionFileError(`unknown kind "${kind}"`, where);
    }
  });
  for (const place of PLACES) {
    if (!set[place]) throw new PermissionFileError(`no "${place}" line`, source);
  }
  return set;
}

/**
 * The Deno permission flags of a set, in a fixed order; the host's own program (the set's
 * `binary`: the compiled program, or the shim that fixes these same flags, so running it
 * widens nothing), which it runs as the owner of a directory (os/posix-fs), and `extraRun`
 * (the bundle's action programs) join allow-run. Both build forms take exactly these.
 */
export function permissionFlags(set: PermissionSet, extraRun: readonly string[] = []): string[] {
  const list = (flag: string, values: readonly string[]) =>
    values.length === 0 ? [] : [`--${flag}=${[...new Set(values)].join(",")}`];
  return [
    "--no-prompt",
    ...list("allow-read", set.allowRead),
    ...list("allow-write", set.allowWrite),
    ...list("deny-write", set.denyWrite),
    ...list("allow-run", [...set.allowRun, set.binary, ...extraRun]),
    ...list("allow-env", set.allowEnv),
    ...list("allow-sys", set.allowSys),
    ...(set.allowNet === "all" ? ["--allow-net"] : list("allow-net", set.allowNet)),
    ...list("deny-net", set.denyNet),
  ];
}

/**
 * The programs the bundle's actions run (their `run` and `verify`), which the
 * build adds to allow-run. The bundle is parsed with the host's own trusted
 * parse, so a bundle the host would refuse fails the build.
 */
export async function actionPrograms(bundleText: string, origin: string): Promise<string[]> {
  const decl = await parseTrustedDeclaration(bundleText, {
    managedRoots: DEFAULTS.managedRoots,
    own: { paths: ALL_OWN_PATHS, services: [PROGRAM] },
    origin,
  });
  const programs: string[] = [];
  for (const r of decl.resources) {
    if (r.type !== "action") continue;
    for (const program of [r.run[0], r.verify[0]]) {
      if (!program.startsWith("/") || program.includes(",")) {
        throw new PermissionFileError(
          `action "${r.id}" runs "${program}": an action's program must be an absolute path ` +
            "without commas, so allow-run names exactly it",
          origin,
        );
      }
      programs.push(program);
    }
  }
  return [...new Set(programs)];
}
