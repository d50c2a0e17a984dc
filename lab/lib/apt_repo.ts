/**
 * The lab's apt repository, as Debian and Ubuntu machines meet one: packages built with
 * dpkg-deb, indexes made by apt-ftparchive, Release signed (InRelease, Release.gpg) with the
 * lab packager key (lab/lib/keys.ts), which a machine trusts for this repository alone
 * (`signed-by=`), never for Debian's own. packaging/debian/recipe.ts makes it (the same
 * code as `deno task package debian --sign KEY`). The lab serves it over HTTP inside the lab
 * network (lib/lab.ts `aptRepo`), at APT_HOST.
 *
 * It holds the test package noxlab-hello (1.0-1 and 1.1-1: apt offers the newer, the
 * older stays in the pool for an exact version) and each lab adds the host's own .debs
 * (lib/host_builds.ts).
 */
import { createHash } from "node:crypto";
import { join } from "node:path";
import { aptRepository } from "../../packaging/debian/recipe.ts";
import { CACHE_DIR } from "./base.ts";
import { exists, run } from "./_process.ts";
import { labKeys, withLabGpg } from "./keys.ts";

export { APT_KEYRING, APT_SOURCE, aptKeyring, dearmor } from "./base.ts";
export { APT_ADDRESS, APT_HOST } from "./net.ts";

/** The lab's test package, in two versions (as the pacman repository's). */
export const TEST_DEB = { name: "noxlab-hello", versions: ["1.0-1", "1.1-1"], latest: "1.1-1" };

/** A package to build: its name and version, and maintainer scripts when it has some. */
export interface DebSpec {
  name: string;
  version: string;
  /** Shell bodies of DEBIAN/preinst, postinst, postrm (a `#!/bin/sh` line is added). */
  scripts?: Partial<Record<"preinst" | "postinst" | "postrm", string>>;
}

/**
 * Builds a small Architecture: all package with dpkg-deb into `dir`: `/usr/bin/NAME`, a
 * script printing "NAME VERSION". Returns its path.
 */
export async function buildDeb(dir: string, spec: DebSpec): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "noxdeb-" });
  try {
    await Deno.mkdir(join(root, "DEBIAN"), { recursive: true });
    await Deno.mkdir(join(root, "usr/bin"), { recursive: true });
    await Deno.writeTextFile(
      join(root, "DEBIAN/control"),
      `Package: ${spec.name}\nVersion: ${spec.version}\nArchitecture: all\n` +
        "Maintainer: nox-mesh-host lab <lab@nox-mesh-host.invalid>\n" +
        "Description: nox-mesh-host lab test package\n a script that says its version\n",
    );
    for (const [script, body] of Object.entries(spec.scripts ?? {})) {
      await Deno.writeTextFile(join(root, "DEBIAN", script), `#!/bin/sh\n${body}\n`);
      await Deno.chmod(join(root, "DEBIAN", script), 0o755);
    }
    const program = join(root, "usr/bin", spec.name);
    await Deno.writeTextFile(program, `#!/bin/sh\necho "${spec.name} ${spec.version}"\n`);
    await Deno.chmod(program, 0o755);
    await Deno.mkdir(dir, { recursive: true });
    const file = join(dir, `${spec.name}_${spec.version}_all.deb`);
    await run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, file], {
      what: `dpkg-deb --build ${spec.name}`,
    });
    return file;
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

/** The test packages, built once (cached by recipe); returns their files. */
export async function ensureTestDebs(log: (line: string) => void = () => {}): Promise<string[]> {
  const key = `debs-${
    createHash("sha256").update(JSON.stringify(TEST_DEB)).update(buildDeb.toString()).digest(
      "hex",
    ).slice(0, 16)
  }`;
  const dir = join(CACHE_DIR, key);
  const files = TEST_DEB.versions.map((v) => join(dir, `${TEST_DEB.name}_${v}_all.deb`));
  if (await exists(join(dir, "ready"))) return files;
  log(`building the lab's test .debs (${TEST_DEB.name} ${TEST_DEB.versions.join(", ")})`);
  const temp = `${dir}.${crypto.randomUUID()}`;
  for (const version of TEST_DEB.versions) await buildDeb(temp, { name: TEST_DEB.name, version });
  await Deno.writeTextFile(join(temp, "ready"), "");
  await Deno.rename(temp, dir).catch(async (error) => {
    await Deno.remove(temp, { recursive: true });
    if (!(await exists(join(dir, "ready")))) throw error;
  });
  return files;
}

/** Makes (or makes again) the repository in `dir` holding `debs`, signed by the lab key. */
export async function signedAptRepo(dir: string, debs: readonly string[]): Promise<void> {
  await withLabGpg(await labKeys(), (signer) => aptRepository(dir, debs, signer));
}
