// Steps of the install scenarios about what a distribution checks and ships: signatures
// (pacman's keyring and SigLevel, minisign on the tarball), man pages, completions.
import { join } from "node:path";
import { repoAdd } from "../../packaging/make_package.ts";
import { REPO_NAME, TEST_PACKAGE } from "../lib/repo.ts";
import { run as runHere } from "../lib/_process.ts";
import { fail, type Step } from "../lib/scenario.ts";

/**
 * pacman in the machine checks signatures as Arch does: SigLevel Required for packages
 * (a database may be unsigned), and its keyring trusts the lab packager key (added and
 * locally signed with pacman-key when the image was made).
 */
export function assertSignaturesRequired(machine: string): Step {
  return {
    title: `assert pacman on ${machine} requires package signatures and trusts the lab ` +
      "packager key (its keyring)",
    async run(ctx) {
      const m = ctx.machine(machine);
      const conf = await m.exec(["cat", "/etc/pacman.conf"], { check: true });
      if (!/^SigLevel = Required DatabaseOptional$/m.test(conf.stdout)) {
        fail("SigLevel = Required DatabaseOptional in /etc/pacman.conf", conf.stdout);
      }
      // pacman's keyring, read as pacman-key --list-keys reads it (Debian's pacman-key
      // needs makepkg's libraries, which the machines do not have).
      const keys = await m.exec([
        "gpg",
        "--homedir",
        "/etc/pacman.d/gnupg",
        "--with-colons",
        "--list-keys",
        "lab@nox-mesh-host.invalid",
      ]);
      // Validity "f" (full): locally signed by the keyring's own master key (--lsign-key).
      if (keys.code !== 0 || !/^pub:f:/m.test(keys.stdout)) {
        fail("the lab packager key with full validity", keys.stdout + keys.stderr);
      }
    },
  };
}

/**
 * A mirror serves a changed noxlab-hello under the same name and version: the package is
 * re-packed with another program, the database re-made (checksums match, the database
 * unsigned, which DatabaseOptional accepts), but the package's signature cannot be made
 * without the key. pacman must refuse it, and nothing may be installed.
 */
export function tamperedPackageRefused(machine: string): Step {
  const name = TEST_PACKAGE.name;
  const file = `${name}-${TEST_PACKAGE.latest}-any.pkg.tar.gz`;
  return {
    title: `a mirror serves a changed ${file} (database re-made, unsigned): pacman -S on ` +
      `${machine} refuses it for its signature; nothing installed`,
    async run(ctx) {
      const repo = join(ctx.lab.shareDir, "repo");
      const work = await Deno.makeTempDir({ prefix: "noxtamper-" });
      try {
        const tree = join(work, "tree");
        await Deno.mkdir(tree);
        await runHere(["bsdtar", "-xf", join(repo, file), "-C", tree], { what: "unpack" });
        await Deno.writeTextFile(
          join(tree, "usr/bin", name),
          "#!/bin/sh\necho 'not what the packager built'\n",
        );
        const entries = [...Deno.readDirSync(tree)].map((e) => e.name);
        await Deno.remove(join(repo, file));
        await runHere(["bsdtar", "-czf", join(repo, file), "-C", tree, ...entries], {
          what: "re-pack the changed package",
        });
        // The attacker has no key: an unsigned database (the old signature removed).
        for (const sig of [`${REPO_NAME}.db.sig`, `${REPO_NAME}.db.tar.gz.sig`]) {
          await Deno.remove(join(repo, sig)).catch(() => {});
        }
        await repoAdd(join(repo, `${REPO_NAME}.db.tar.gz`), [join(repo, file)]);
      } finally {
        await Deno.remove(work, { recursive: true });
      }
      const m = ctx.machine(machine);
      const r = await m.exec(["pacman", "-Sy", "--noconfirm", "--noprogressbar", name]);
      const said = r.stdout + r.stderr;
      if (r.code === 0) fail("pacman to refuse the package", said);
      if (!/signature/i.test(said)) fail("a refusal naming the signature", said);
      const q = await m.exec(["pacman", "-Q", name]);
      if (q.code === 0) fail(`${name} not installed`, q.stdout);
      const there = await m.exec(["test", "-e", `/usr/bin/${name}`]);
      if (there.code === 0) fail(`no /usr/bin/${name}`, "it exists");
    },
  };
}

/** `man -w` finds each page where the package put it, and `man` renders the first. */
export function assertManPages(machine: string, pages: Record<string, string>): Step {
  return {
    title: `assert man finds ${Object.keys(pages).join(", ")} on ${machine}, and renders them`,
    async run(ctx) {
      const m = ctx.machine(machine);
      for (const [page, path] of Object.entries(pages)) {
        const w = await m.exec(["man", "-w", page]);
        if (w.stdout.trim() !== path) fail(`man -w ${page} = ${path}`, w.stdout + w.stderr);
        const shown = await m.exec(["man", page], { env: { MANPAGER: "cat", MANWIDTH: "80" } });
        if (shown.code !== 0 || !shown.stdout.includes("SEE ALSO")) {
          fail(`man ${page} to render its SEE ALSO section`, shown.stdout + shown.stderr);
        }
      }
    },
  };
}

/**
 * Interactive bash in a pty (script): `nox-mesh-host ap<TAB>` with the completion the
 * package installed completes to `apply`. Readline then goes to the start of the line,
 * inserts `echo COMPLETED:` and runs it, so the completed line comes back as output.
 */
export function assertBashCompletes(machine: string): Step {
  return {
    title: `assert bash on ${machine} completes "nox-mesh-host ap<TAB>" to "apply" ` +
      "(the installed completion, in a pty)",
    async run(ctx) {
      const m = ctx.machine(machine);
      const rc = "PS1='$ '\nbind 'set enable-bracketed-paste off'\n" +
        ". /usr/share/bash-completion/completions/nox-mesh-host\n";
      await m.writeFile("/root/completion-rc", rc, "0644");
      const r = await m.exec([
        "sh",
        "-c",
        "printf 'nox-mesh-host ap\\t\\001echo COMPLETED:\\005\\nexit\\n' | " +
        'script -qec "bash --noprofile --rcfile /root/completion-rc -i" /dev/null',
      ]);
      const lines = r.stdout.split(/\r?\n/).map((l) => l.replace(/\r/g, ""));
      if (!lines.includes("COMPLETED:nox-mesh-host apply")) fail("the completed line", r.stdout);
    },
  };
}
