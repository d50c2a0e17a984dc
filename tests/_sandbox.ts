// Test helper: run a program in a private mount namespace where the system
// directories it may write are overlays whose upper layer is a temp directory.
// Whatever it writes (also what it should not have been able to write) lands
// there and never on this machine. Private to tests/.
import { dirname, join } from "node:path";

/** Directories overlaid in every sandbox. */
export const OVERLAID = [
  "/etc",
  "/usr/bin",
  "/usr/lib",
  "/usr/local",
  "/usr/share",
  "/var/lib",
  "/var/cache",
  "/var/log",
  "/srv",
];

/** A sandbox: files placed before the program runs, and the upper layers it wrote to. */
export interface Sandbox {
  dir: string;
  /** Where a path inside the sandbox landed, if it was written (the upper layer). */
  upper(path: string): string;
}

/** Makes the sandbox directories. */
export async function makeSandbox(): Promise<Sandbox> {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-sandbox-" });
  for (const d of OVERLAID) {
    await Deno.mkdir(join(dir, "upper", d), { recursive: true });
    await Deno.mkdir(join(dir, "work", d), { recursive: true });
  }
  return {
    dir,
    upper: (path: string) => {
      const root = OVERLAID.find((d) => path === d || path.startsWith(d + "/"));
      if (!root) throw new Error(`${path} is not in an overlaid directory`);
      return join(dir, "upper", path);
    },
  };
}

/** Places a file at `path` inside the sandbox (in its upper layer) before a run. */
export async function place(s: Sandbox, path: string, content: string | Uint8Array, mode = 0o644) {
  const dest = s.upper(path);
  await Deno.mkdir(dirname(dest), { recursive: true });
  if (typeof content === "string") await Deno.writeTextFile(dest, content);
  else await Deno.writeFile(dest, content);
  await Deno.chmod(dest, mode);
}

/** Runs argv inside the sandbox; returns exit code, stdout, stderr. */
export async function runInSandbox(
  s: Sandbox,
  argv: string[],
  { stdin, env }: { stdin?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const mounts = OVERLAID.map((d) =>
    `mount -t overlay overlay -o 'lowerdir=${d},upperdir=${s.dir}/upper${d},workdir=${s.dir}/work${d}' '${d}'`
  ).join(" && ");
  const child = new Deno.Command("unshare", {
    args: [
      "--mount",
      "--propagation",
      "private",
      "sh",
      "-c",
      `${mounts} && exec "$@"`,
      "sandbox",
      ...argv,
    ],
    env,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await child.output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

/** Removes the sandbox (its upper layers included). */
export async function removeSandbox(s: Sandbox): Promise<void> {
  await Deno.remove(s.dir, { recursive: true });
}

/**
 * Hides every deno of this machine inside the sandbox (overlay whiteouts): the one in each
 * directory of the standard PATH, and the npm package it points into, wherever npm put them
 * (/usr/bin and /usr/lib/node_modules here; /usr/local/bin and /usr/local/lib/node_modules
 * where npm's prefix is /usr/local, as Debian's own npm has it).
 */
export async function hideDeno(s: Sandbox): Promise<void> {
  const hidden = new Set<string>();
  for (
    const dir of ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
  ) {
    let real: string;
    try {
      real = await Deno.realPath(dir);
      await Deno.lstat(`${real}/deno`);
    } catch {
      continue;
    }
    hidden.add(`${real}/deno`);
    const target = await Deno.realPath(`${real}/deno`).catch(() => "");
    const pkg = target.match(/^(.*\/node_modules\/deno)\//);
    if (pkg) hidden.add(pkg[1]);
  }
  for (const path of hidden) {
    const upper = s.upper(path);
    await Deno.mkdir(dirname(upper), { recursive: true });
    const mk = await new Deno.Command("mknod", { args: [upper, "c", "0", "0"] }).output();
    if (!mk.success) throw new Error(`mknod ${upper}: ${new TextDecoder().decode(mk.stderr)}`);
  }
}
