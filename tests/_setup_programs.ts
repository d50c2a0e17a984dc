/**
 * Every program the tests and the lab run must come from lab/setup.sh (the README's first
 * command), so that a newcomer's fresh Debian 12 runs what CI runs. Loaded with `--preload`
 * by `deno task test` and `deno task lab` (deno.json): it wraps `Deno.Command` in the test or
 * lab process and, for each program started there that lives in a system directory, asks
 * dpkg's database which package installed it. A program from a package that lab/setup.sh does
 * not install (itself, or as a dependency of what it installs) and that is not part of every
 * Debian system (Essential, Priority required) stops the test that ran it, naming the
 * package to add. A program no Debian package installed is left alone (it is this machine's
 * own, which no list can install). Programs inside lab machines are the machines' images' (mmdebstrap), run
 * through nsenter or a shell: they are not the host's and are not checked here.
 */
import { posix } from "node:path";

const SETUP = new URL("../lab/setup.sh", import.meta.url);

/** Directories a program from a Debian package (or lab/setup.sh's npm install) lives in. */
const SYSTEM_DIRS = ["/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin", "/usr/local/sbin"];

/** What one installed package says of itself (dpkg-query). */
interface PackageFacts {
  depends: string[][];
  provides: string[];
  base: boolean;
}

/**
 * The package names lab/setup.sh installs: its PACKAGES list, and NPM_PACKAGES (Debian's
 * Node.js and npm, installed where no npm is found).
 */
export function setupPackages(text: string): string[] {
  return ["PACKAGES", "NPM_PACKAGES"].flatMap((name) => {
    const match = text.match(new RegExp(`^${name}="([^"]*)"`, "m"));
    if (match === null) throw new Error(`lab/setup.sh has no ${name}="…" list`);
    return match[1].split(/\s+/).filter(Boolean);
  });
}

/** Installed packages, from dpkg's database. */
function installedPackages(): Map<string, PackageFacts> {
  const out = new Deno.Command("dpkg-query", {
    args: [
      "-W",
      "-f",
      "${Package}\t${Pre-Depends}, ${Depends}\t${Provides}\t${Priority}\t${Essential}\t" +
      "${db:Status-Status}\n",
    ],
    stdout: "piped",
    stderr: "null",
  }).outputSync();
  const packages = new Map<string, PackageFacts>();
  const names = (field: string) =>
    field.split(",").map((s) => s.trim()).filter(Boolean).map((alternatives) =>
      alternatives.split("|").map((a) => a.trim().split(/[\s(:]/)[0]).filter(Boolean)
    );
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    const [name, depends, provides, priority, essential, status] = line.split("\t");
    if (!name || status !== "installed") continue;
    packages.set(name, {
      depends: names(depends ?? ""),
      provides: names(provides ?? "").flat(),
      base: essential === "yes" || priority === "required",
    });
  }
  return packages;
}

/**
 * The packages a fresh Debian 12 has once lab/setup.sh ran: every Essential or required
 * package, the list, and what they depend on (an alternative counts when it is installed).
 */
export function expectedPackages(
  list: readonly string[],
  packages: Map<string, PackageFacts> = installedPackages(),
): Set<string> {
  const providers = new Map<string, string[]>();
  for (const [name, facts] of packages) {
    for (const virtual of facts.provides) {
      providers.set(virtual, [...providers.get(virtual) ?? [], name]);
    }
  }
  const seen = new Set<string>();
  const todo = [...list, ...[...packages].filter(([, f]) => f.base).map(([n]) => n)];
  while (todo.length > 0) {
    const name = todo.pop()!;
    const real = packages.has(name) ? [name] : providers.get(name) ?? [];
    for (const pkg of real) {
      if (seen.has(pkg)) continue;
      seen.add(pkg);
      for (const alternatives of packages.get(pkg)!.depends) {
        const present = alternatives.filter((a) => packages.has(a) || providers.has(a));
        todo.push(...present.slice(0, 1));
      }
    }
  }
  return seen;
}

/** Which package installed a file, from dpkg's file lists (merged /usr spelt both ways). */
export function owners(): (path: string) => string | undefined {
  const byPath = new Map<string, string>();
  for (const entry of Deno.readDirSync("/var/lib/dpkg/info")) {
    if (!entry.name.endsWith(".list")) continue;
    const pkg = entry.name.slice(0, -".list".length).split(":")[0];
    const text = Deno.readTextFileSync(`/var/lib/dpkg/info/${entry.name}`);
    for (const path of text.split("\n")) {
      if (SYSTEM_DIRS.some((d) => path.startsWith(`${d}/`))) byPath.set(path, pkg);
    }
  }
  return (path) => {
    const spellings = [path, path.replace(/^\/usr\//, "/"), `/usr${path}`];
    for (const p of spellings) {
      const pkg = byPath.get(p);
      if (pkg !== undefined) return pkg;
    }
    return undefined;
  };
}

/** Where `program` is found (PATH for a bare name), or `undefined` when it is not. */
function located(program: string, cwd?: string): string | undefined {
  const candidates = program.includes("/")
    ? [posix.resolve(cwd ?? Deno.cwd(), program)]
    : (Deno.env.get("PATH") ?? "").split(":").filter(Boolean).map((d) => `${d}/${program}`);
  for (const candidate of candidates) {
    try {
      if (Deno.statSync(candidate).isFile) return candidate;
    } catch { /* not there */ }
  }
  return undefined;
}

/** A program a test or the lab ran that lab/setup.sh does not install. */
export class NotFromSetupError extends Error {
  constructor(program: string, path: string, why: string) {
    super(
      `the tests or the lab ran ${program} (${path}), ${why}: lab/setup.sh must install it ` +
        "(add its Debian package to PACKAGES there, with what it is for), or a fresh machine " +
        "that ran only the README's commands fails here",
    );
    this.name = "NotFromSetupError";
  }
}

/**
 * The check for one program: `undefined` when lab/setup.sh (or every Debian) installs it,
 * or when it is not a system program (built by a test, inside the checkout, a temporary
 * directory or a lab machine's root); else the error to throw.
 */
export function programChecker(
  expected: Set<string>,
  ownerOf: (path: string) => string | undefined,
  deno: string,
): (program: string, cwd?: string) => NotFromSetupError | undefined {
  const verdicts = new Map<string, NotFromSetupError | undefined>();
  return (program, cwd) => {
    const path = located(program, cwd);
    if (path === undefined) return undefined; // the spawn itself says NotFound
    if (verdicts.has(path)) return verdicts.get(path);
    let verdict: NotFromSetupError | undefined;
    let real = path;
    try {
      real = Deno.realPathSync(path);
    } catch { /* a dangling link: the spawn says so */ }
    const system = (p: string) => SYSTEM_DIRS.some((d) => p.startsWith(`${d}/`));
    if ((system(path) || system(real)) && real !== deno) {
      const pkg = ownerOf(path) ?? ownerOf(real);
      // A program no Debian package installed is this machine's own (a docker client put in
      // /usr/local by hand): lab/setup.sh could not install it, and a test that probes for it
      // (the profile's detection) must see it as it is.
      if (pkg !== undefined && !expected.has(pkg)) {
        verdict = new NotFromSetupError(
          program,
          path,
          `which comes from the Debian package ${pkg}, not installed by lab/setup.sh`,
        );
      }
    }
    verdicts.set(path, verdict);
    return verdict;
  };
}

/** Wrap Deno.Command in this process so that every start is checked first. */
export function checkEveryStart(): void {
  if (Deno.build.os !== "linux" || located("dpkg-query") === undefined) return;
  const expected = expectedPackages(setupPackages(Deno.readTextFileSync(SETUP)));
  const check = programChecker(expected, owners(), Deno.realPathSync(Deno.execPath()));
  const Original = Deno.Command;
  class CheckedCommand extends Original {
    constructor(command: string | URL, options?: Deno.CommandOptions) {
      const program = command instanceof URL ? command.pathname : command;
      const cwd = options?.cwd instanceof URL ? options.cwd.pathname : options?.cwd;
      const error = check(program, cwd);
      if (error !== undefined) throw error;
      super(command, options);
    }
  }
  Object.defineProperty(Deno, "Command", { value: CheckedCommand, configurable: true });
}
