// Test helpers: real pacman packages of the stand-in host, built with makepkg
// as `nobody`, and an isolated pacman root with a local repository. Private to tests/.
import { join } from "node:path";
import { writeStandIn } from "./_launcher_world.ts";
import { makepkgAsNobody } from "../packaging/make_package.ts";

/** Runs a program; throws with its output when it fails. Returns stdout. */
export async function run(
  cmd: string,
  args: string[],
  env?: Record<string, string>,
): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdin: "null" }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    const err = new TextDecoder().decode(out.stderr);
    throw new Error(`${cmd} ${args.join(" ")} failed (exit ${out.code}):\n${text}${err}`);
  }
  return text;
}

const PKGBUILD = (version: string) =>
  `pkgname=nox-mesh-host
pkgver=${version}
pkgrel=1
pkgdesc="stand-in host for launcher tests"
arch=(any)
license=(MIT)
source=(nox-mesh-host)
sha256sums=(SKIP)
package() { install -Dm0755 nox-mesh-host "$pkgdir/usr/bin/nox-mesh-host"; }
`;

/** Builds a pacman package `nox-mesh-host-VERSION-1-any` holding the stand-in; returns its path. */
export async function buildStandInPackage(dir: string, version: string): Promise<string> {
  const build = join(dir, `build-${version}`);
  const out = join(dir, "packages");
  await Deno.mkdir(build, { recursive: true });
  await Deno.mkdir(out, { recursive: true });
  await Deno.writeTextFile(join(build, "PKGBUILD"), PKGBUILD(version));
  await writeStandIn(join(build, "nox-mesh-host"), version);
  await makepkgAsNobody(build, out);
  return join(out, `nox-mesh-host-${version}-1-any.pkg.tar.gz`);
}

/** An isolated pacman root with a local repository `noxpk`. */
export interface PacmanRoot {
  root: string;
  repo: string;
  cache: string;
  /** A `pacman` wrapper (put its directory first on PATH) pinned to this root. */
  wrapper: string;
}

/** Makes the root under `dir`, and a `pacman` wrapper in `binDir`. */
export async function makePacmanRoot(dir: string, binDir: string): Promise<PacmanRoot> {
  const root = join(dir, "root");
  const repo = join(dir, "repo");
  const cache = join(root, "var/cache/pacman/pkg");
  for (const d of ["var/lib/pacman", "var/cache/pacman/pkg", "var/log", "etc"]) {
    await Deno.mkdir(join(root, d), { recursive: true });
  }
  await Deno.mkdir(repo, { recursive: true });
  await Deno.writeTextFile(
    join(root, "etc/pacman.conf"),
    `[options]\nArchitecture = auto\nSigLevel = Never\n[noxpk]\nServer = file://${repo}\n`,
  );
  const wrapper = join(binDir, "pacman");
  await Deno.writeTextFile(
    wrapper,
    `#!/bin/sh\nexec /usr/bin/pacman --root '${root}' --dbpath '${root}/var/lib/pacman' ` +
      `--cachedir '${cache}' --config '${root}/etc/pacman.conf' ` +
      `--logfile '${root}/var/log/pacman.log' "$@"\n`,
    { mode: 0o755 },
  );
  await Deno.chmod(wrapper, 0o755);
  return { root, repo, cache, wrapper };
}

/** Adds a package file to the root's repository. */
export async function publish(r: PacmanRoot, file: string): Promise<void> {
  const dest = join(r.repo, file.split("/").pop()!);
  await Deno.copyFile(file, dest);
  await run("repo-add", ["-q", join(r.repo, "noxpk.db.tar.gz"), dest]);
}

/** `pacman -Q nox-mesh-host` in the root: "nox-mesh-host 1.0-1". */
export async function installed(r: PacmanRoot): Promise<string> {
  return (await run(r.wrapper, ["-Q", "nox-mesh-host"])).trim();
}

/** SHA-256 of a file, hex. */
export async function sha256(path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}
