/**
 * `deno task providers`: rewrites what is derived from the providers' descriptors
 * (os/provider_list.ts, os/needs.ts): the allow-run and allow-read blocks of each
 * packaging/<os>/permissions, the `host` task's --allow-run in deno.json, and the flags of
 * the development shim packaging/dev/nox-mesh-host (the `host` task's own).
 * tests/architecture_test.ts regenerates them and compares with what is committed. The
 * module each per-OS build puts in place of os/carried.ts is written at build time
 * (packaging/build.ts, {@link carriedModule}).
 */
import { HostError } from "../src/errors.ts";
import { DEFAULTS } from "../src/config.ts";
import { carriedBy, needsOf, type Spelling } from "../os/needs.ts";
import type { PackagedBuild, ProviderDescriptor } from "../os/provider.ts";
import { PROVIDERS } from "../os/provider_list.ts";
import { type Distribution, DISTRIBUTIONS } from "../os/distros/mod.ts";
import { TARGET_OSES } from "./permissions.ts";

/** The block kinds written into a permission file. */
const BLOCKS = ["allow-run", "allow-read"] as const;

/** The first line of a written block; its last is `# END <kind>`. */
const begin = (kind: string) =>
  `# BEGIN ${kind}: written by \`deno task providers\` from the providers' descriptors`;

const within = (path: string, root: string) => path === root || path.startsWith(root + "/");

/**
 * The lines of one block for a build: allow-run, each program at each spelling (its
 * providers' reason, then "the same"); allow-read, each path read that no managed root
 * grants already.
 *
 * @example
 * ```ts
 * permissionBlock("arch", "allow-run")[0]; // "allow-run  /usr/bin/pacman … # package resources: …"
 * ```
 */
export function permissionBlock(
  os: PackagedBuild,
  kind: typeof BLOCKS[number],
  list: readonly ProviderDescriptor[] = PROVIDERS,
  distros: readonly Distribution[] = DISTRIBUTIONS,
): string[] {
  const needs = needsOf(os, list, distros);
  const rows: [string, string][] = [];
  if (kind === "allow-run") {
    for (const [name, why] of Object.entries(needs.run)) {
      const seen: Spelling[] = [];
      for (const spelling of needs.at[name]) {
        rows.push([spelling.path, seen.length === 0 ? why : sameAs(spelling, seen, distros)]);
        seen.push(spelling);
      }
    }
  } else {
    for (const [path, why] of Object.entries(needs.read)) {
      if (!DEFAULTS.managedRoots.some((root) => within(path, root))) rows.push([path, why]);
    }
  }
  const width = Math.max(...rows.map(([path]) => path.length));
  return rows.map(([path, why]) => `${kind.padEnd(10)} ${path.padEnd(width)} # ${why}`);
}

/** The comment of a program's further spelling. */
function sameAs(spelling: Spelling, seen: Spelling[], distros: readonly Distribution[]): string {
  if (seen.some((s) => spelling.path === `/usr${s.path}`)) return "the same, where /usr is merged";
  return `the same, on ${distros.find((d) => d.id === spelling.on)?.name ?? spelling.on}`;
}

/** A permission file, or deno.json, lacks what the generator rewrites. */
export class GeneratedError extends HostError {
  constructor(what: string, where: string) {
    super("packaging.generated", what, {
      where,
      hint: "restore the marker lines from git, then run `deno task providers`",
    });
  }
}

/** A permission file's text with its written blocks made again. */
export function rewritePermissionFile(
  text: string,
  os: PackagedBuild,
  list: readonly ProviderDescriptor[] = PROVIDERS,
  distros: readonly Distribution[] = DISTRIBUTIONS,
): string {
  let out = text;
  for (const kind of BLOCKS) {
    const lines = out.split("\n");
    const first = lines.indexOf(begin(kind));
    const last = lines.indexOf(`# END ${kind}`, first);
    if (first < 0 || last < 0) {
      throw new GeneratedError(`no "${begin(kind)}" … "# END ${kind}" block`, `packaging/${os}`);
    }
    lines.splice(first + 1, last - first - 1, ...permissionBlock(os, kind, list, distros));
    out = lines.join("\n");
  }
  return out;
}

/**
 * The development shim: the host from this checkout under the `host` task's flags, which
 * the host runs as a directory's owner (os/posix-fs). The `host` task allows running it
 * (relative to the checkout, where `deno task` starts), never deno itself.
 */
export const DEV_SHIM = "packaging/dev/nox-mesh-host";

/**
 * The `host` task's --allow-run: every program the checkout's providers and profile run,
 * and the development shim.
 */
export function hostAllowRun(list: readonly ProviderDescriptor[] = PROVIDERS): string {
  return `--allow-run=${
    [...Object.keys(needsOf("checkout", list).run), `./${DEV_SHIM}`].join(",")
  }`;
}

/** The development permission flags: those of deno.json's `host` task, in its order. */
export function hostFlags(denoJson: string): string[] {
  const host: string = JSON.parse(denoJson).tasks.host;
  return host.split(/\s+/).filter((w) => w.startsWith("--allow-") || w.startsWith("--deny-"));
}

/** The development shim's text with its flags written from deno.json's `host` task. */
export function rewriteDevShim(shim: string, denoJson: string): string {
  const lines = shim.split("\n");
  const first = lines.indexOf("# BEGIN flags");
  const last = lines.indexOf("# END flags", first);
  if (first < 0 || last < 0) {
    throw new GeneratedError('no "# BEGIN flags" … "# END flags"', DEV_SHIM);
  }
  const quote = (a: string) => `'${a.replaceAll("'", `'\\''`)}'`;
  lines.splice(first + 1, last - first - 1, ...[
    'exec "${NOX_MESH_HOST_DENO:-deno}" run --quiet \\',
    ...hostFlags(denoJson).map((f) => `\t${quote(f)} \\`),
    '\t"$here/../../mod.ts" "$@"',
  ]);
  return lines.join("\n");
}

/** deno.json's text with the `host` task's --allow-run made again (nothing else touched). */
export function rewriteDenoJson(
  text: string,
  list: readonly ProviderDescriptor[] = PROVIDERS,
): string {
  const host = /^(\s*"host": "[^"\n]*?)--allow-run=[^ "]*/m;
  if (!host.test(text)) throw new GeneratedError('no "host" task with --allow-run', "deno.json");
  return text.replace(host, (_, head) => head + hostAllowRun(list));
}

/**
 * The module a per-OS build puts in place of os/carried.ts: it imports the descriptors
 * whose `builds` name the OS, and no other (`root`: the checkout's file URL, ending in /).
 */
export function carriedModule(
  os: PackagedBuild,
  root: string,
  list: readonly ProviderDescriptor[] = PROVIDERS,
): string {
  const carried = carriedBy(os, list);
  return [
    `// The providers the ${os} build carries: the descriptors of os/provider_list.ts whose`,
    "// builds name it. Written by packaging/build.ts; do not edit.",
    `import type { ProviderDescriptor } from "${root}os/provider.ts";`,
    ...carried.map((p, i) =>
      `import { PROVIDER as p${i} } from "${root}os/${p.folder}/provider.ts";`
    ),
    "",
    "/** This build's providers. */",
    `export const CARRIED: readonly ProviderDescriptor[] = [${
      carried.map((_, i) => `p${i}`).join(", ")
    }];`,
    "",
  ].join("\n");
}

if (import.meta.main) {
  const root = new URL("../", import.meta.url);
  const files: [URL, (text: string) => string][] = [
    ...TARGET_OSES.map((os): [URL, (text: string) => string] => [
      new URL(`packaging/${os}/permissions`, root),
      (text) => rewritePermissionFile(text, os),
    ]),
    [new URL("deno.json", root), (text) => rewriteDenoJson(text)],
  ];
  for (const [file, rewrite] of files) {
    const text = await Deno.readTextFile(file);
    const made = rewrite(text);
    if (made === text) continue;
    await Deno.writeTextFile(file, made);
    console.log(`rewrote ${file.pathname.slice(root.pathname.length)}`);
  }
  // After deno.json: the shim takes the host task's flags as they are now.
  const shim = new URL(DEV_SHIM, root);
  const text = await Deno.readTextFile(shim);
  const made = rewriteDevShim(text, await Deno.readTextFile(new URL("deno.json", root)));
  if (made !== text) {
    await Deno.writeTextFile(shim, made);
    console.log(`rewrote ${DEV_SHIM}`);
  }
}
