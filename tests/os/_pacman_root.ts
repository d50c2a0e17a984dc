/**
 * A real pacman working on an isolated root in a temp directory, with the lab's
 * local repository (noxlab-hello 1.0-1 and 1.1-1, built by makepkg as nobody,
 * cached) served over file://. Nothing touches this machine's own root.
 */
import { archPacman, type Pacman } from "../../os/arch-pacman/mod.ts";
import { ensureRepo, TEST_PACKAGE } from "../../lab/lib/repo.ts";

export { TEST_PACKAGE };

/** An isolated pacman root; dispose to delete it. */
export interface PacmanRoot extends AsyncDisposable {
  dir: string;
  root: string;
  /** The repository copy: the database offers 1.1-1; the 1.0-1 file lies beside it. */
  repo: string;
  pacman: Pacman;
}

/** Make an isolated root and a pacman adapter for it. */
export async function pacmanRoot(): Promise<PacmanRoot> {
  const cached = await ensureRepo();
  const dir = await Deno.makeTempDir({ prefix: "noxad-pacman-" });
  const root = `${dir}/root`;
  const repo = `${dir}/repo`;
  for (
    const d of [`${root}/var/lib/pacman`, `${root}/var/cache/pacman/pkg`, `${root}/var/log`, repo]
  ) {
    await Deno.mkdir(d, { recursive: true });
  }
  for await (const entry of Deno.readDir(cached)) {
    const from = `${cached}/${entry.name}`;
    if (entry.isSymlink) await Deno.symlink(await Deno.readLink(from), `${repo}/${entry.name}`);
    else if (entry.isFile) await Deno.copyFile(from, `${repo}/${entry.name}`);
  }
  await Deno.writeTextFile(
    `${dir}/pacman.conf`,
    `[options]\nArchitecture = auto\nSigLevel = Never\nLocalFileSigLevel = Never\n\n` +
      `[noxlab]\nServer = file://${repo}\n`,
  );
  const pacman = archPacman({
    config: `${dir}/pacman.conf`,
    root,
    dbPath: `${root}/var/lib/pacman`,
    cacheDir: `${root}/var/cache/pacman/pkg`,
    logFile: `${root}/var/log/pacman.log`,
    gpgDir: `${root}/etc/pacman.d/gnupg`,
    hookDir: `${root}/etc/pacman.d/hooks`,
    fileDirs: [`${root}/var/cache/pacman/pkg`, repo],
  });
  return {
    dir,
    root,
    repo,
    pacman,
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}
