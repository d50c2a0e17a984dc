import {
  apply,
  assertFile,
  assertPackage,
  assertUnit,
  json,
  run,
  type Scenario,
  waitFor,
  writeFile,
} from "../lib/scenario.ts";
import { fail, type Step } from "../lib/_step.ts";
import { CARRIED_RUNTIME, debFileName } from "../lib/host_builds.ts";
import { APT_KEYRING, APT_SOURCE, aptKeyring, TEST_DEB } from "../lib/apt_repo.ts";
import { join } from "node:path";
import { assertLaunched, assertServiceSaid, CURRENT, STATE, unmaskPodman } from "./_ship.ts";
import { assertBashCompletes, assertManPages } from "./_distro.ts";

const HELLO = TEST_DEB.name;
const [OLD, NEW] = TEST_DEB.versions;

/** apt on the machine has one source, the lab repository, checked against the lab key alone. */
function assertAptSource(machine: string): Step {
  return {
    title: `assert apt on ${machine} has one source, the lab repository over HTTP, signed-by ` +
      "the lab key (the keyring holds exactly that key)",
    async run(ctx) {
      const m = ctx.machine(machine);
      const list = await m.exec([
        "sh",
        "-c",
        "grep -h '^deb' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null",
      ]);
      if (list.stdout !== APT_SOURCE) fail(APT_SOURCE.trim(), list.stdout.trim());
      const here = await Deno.readFile(await aptKeyring());
      const there = await m.exec(["base64", "-w0", APT_KEYRING], { check: true });
      const bytes = Uint8Array.from(atob(there.stdout.trim()), (c) => c.charCodeAt(0));
      if (bytes.length !== here.length || bytes.some((b, i) => b !== here[i])) {
        fail(`${APT_KEYRING} to hold the lab key`, "another keyring");
      }
    },
  };
}

/**
 * A mirror serves a changed noxlab-hello under the same name and version, its index and
 * Release made again but unsigned (the attacker has no key; the old signatures removed).
 * apt must refuse the repository, and nothing may be installed.
 */
function tamperedRepositoryRefused(machine: string): Step {
  return {
    title: `a mirror serves a changed ${HELLO} ${NEW} with its index re-made, unsigned: apt on ` +
      `${machine} refuses the repository; nothing installed`,
    async run(ctx) {
      const dir = ctx.lab.aptDir;
      const work = await Deno.makeTempDir({ prefix: "noxtamper-" });
      try {
        const file = join(dir, "pool/main/n", HELLO, `${HELLO}_${NEW}_all.deb`);
        const tree = join(work, "tree");
        const sh = async (script: string, ...args: string[]) => {
          const out = await new Deno.Command("sh", { args: ["-c", script, "sh", ...args] })
            .output();
          if (!out.success) fail(script, new TextDecoder().decode(out.stderr));
        };
        await sh('dpkg-deb -R "$1" "$2"', file, tree);
        await Deno.writeTextFile(
          join(tree, "usr/bin", HELLO),
          "#!/bin/sh\necho 'not what the packager built'\n",
        );
        await sh('dpkg-deb --root-owner-group -Zgzip --build "$1" "$2"', tree, file);
        // Indexes and Release made again from the pool, without a signature.
        await sh(
          'cd "$1" && apt-ftparchive --arch amd64 packages pool > "$2" && gzip -9n -c "$2" > "$2.gz"',
          dir,
          join(dir, "dists/stable/main/binary-amd64/Packages"),
        );
        await sh(
          'rm -f "$1/InRelease" "$1/Release.gpg" && apt-ftparchive release "$1" > "$2" && mv "$2" "$1/Release"',
          join(dir, "dists/stable"),
          join(work, "Release"),
        );
      } finally {
        await Deno.remove(work, { recursive: true });
      }
      const m = ctx.machine(machine);
      const update = await m.exec(["apt-get", "-q", "update"]);
      const said = update.stdout + update.stderr;
      if (update.code === 0) fail("apt-get update to refuse the repository", said);
      if (!/is (not|no longer) signed/.test(said)) {
        fail("a refusal saying the repository is not signed", said);
      }
      // apt keeps the indexes it checked before: the changed file does not match them (its
      // cache emptied first, so that it has to fetch the file the mirror serves).
      await m.exec(["apt-get", "clean"], { check: true });
      const install = await m.exec(["apt-get", "-q", "-y", "install", `${HELLO}=${NEW}`]);
      if (install.code === 0) fail("apt-get install to refuse the changed package", install.stdout);
      const hello = await m.exec([HELLO]);
      if (hello.stdout !== `${HELLO} ${OLD}\n`) {
        fail(`${HELLO} ${OLD} still installed`, hello.stdout);
      }
    },
  };
}

/** The host installed as a Debian user installs it, and started by systemd through the launcher. */
export const scenario: Scenario = {
  name: "debian-install",
  summary: "a Debian 12 machine (no pacman) whose apt's only source is the lab repository, " +
    "signed by the lab key and served over HTTP in the lab network: apt-get install " +
    "nox-mesh-host (no deno: it carries its runtime and the glibc loader that starts it), " +
    "then `nox-mesh-host apply` makes apt install a declared package, and an exact older " +
    "version (a downgrade); systemctl enable --now: the launcher runs the host under the " +
    "Debian permission set, which applies the shipped bundle; known-good written, the .deb " +
    "kept for a rollback; man pages, completion, copyright; a re-made, unsigned repository " +
    "is refused",
  machines: {
    // The shipped bundle runs a container (scenario substrate shows it in detail).
    deb: { flavour: "systemd", hostFrom: "deb", containers: true },
  },
  steps: [
    assertAptSource("deb"),
    run("deb", ["apt-get", "-q", "update"]),
    run("deb", ["apt-get", "-q", "-y", "install", "nox-mesh-host"]),
    assertPackage("deb", "nox-mesh-host", { version: `${CURRENT}-1` }),
    // It carries its runtime and the glibc loader that starts it: no deno package.
    assertPackage("deb", "deno", { absent: true }),
    assertFile("deb", CARRIED_RUNTIME, { type: "file" }),
    assertFile("deb", "/usr/lib/nox-mesh-host/glibc/ld-linux-x86-64.so.2", { type: "file" }),
    assertFile("deb", "/usr/lib/nox-mesh-host/launch/apt.sh", { type: "file" }),
    assertFile("deb", "/usr/share/doc/nox-mesh-host/copyright", { type: "file" }),
    run("deb", ["nox-mesh-host", "version"], { stdoutIncludes: `nox-mesh-host ${CURRENT}\n` }),
    run("deb", ["nox-mesh-host", "version", "--json"], { stdoutIncludes: `"form":"bundled"` }),
    // The host's profile: apt answered and is Debian's own.
    run("deb", ["nox-mesh-host", "profile", "--json"], {
      stdoutIncludes: `"packages":{"state":"working","provider":"apt"`,
    }),
    assertManPages("deb", {
      "nox-mesh-host": "/usr/share/man/man8/nox-mesh-host.8.gz",
      "nox-mesh-host-launch": "/usr/share/man/man8/nox-mesh-host-launch.8.gz",
      "host.json": "/usr/share/man/man5/host.json.5.gz",
      "nox-mesh-host-declaration": "/usr/share/man/man5/nox-mesh-host-declaration.5.gz",
    }),
    assertBashCompletes("deb"),
    // As if an earlier start had failed twice: only the host's first reconcile clears it.
    writeFile("deb", `${STATE}/failures`, "2\n"),
    unmaskPodman("deb"),
    run("deb", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    assertUnit("deb", "nox-mesh-host", { enabled: true, running: true }),
    waitFor(assertFile("deb", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    assertFile("deb", `${STATE}/failures`, { absent: true }),
    assertLaunched("deb"),
    assertServiceSaid("deb", "not enrolled: holding the machine to the store (or the bundle)"),
    assertServiceSaid("deb", `run: ${CURRENT} completed a reconcile: recorded as known-good`),
    run("deb", ["nox-mesh-host", "status"], {
      stdoutIncludes: "/usr/share/nox-mesh-host/substrate.lock",
    }),
    waitFor(
      assertFile("deb", `${STATE}/rollback/${CURRENT}/${debFileName("current")}`, { type: "file" }),
      30,
    ),
    assertServiceSaid("deb", `kept the package file of nox-mesh-host ${CURRENT}`, 1),
    // A Debian machine manages its own packages with apt: a declared package, then an exact
    // older version of it (the only case apt is allowed to downgrade), applied by a person
    // while the service runs (the apply waits for the service's lock).
    writeFile(
      "deb",
      "/root/hello.json",
      json({ version: 1, resources: [{ type: "package", id: "hello", name: HELLO }] }),
    ),
    apply("deb", "/root/hello.json", { outcome: "converged", changed: 1 }),
    assertPackage("deb", HELLO, { version: NEW }),
    run("deb", [HELLO], { stdoutIncludes: `${HELLO} ${NEW}` }),
    writeFile(
      "deb",
      "/root/hello-old.json",
      json({
        version: 1,
        resources: [{ type: "package", id: "hello", name: HELLO, version: OLD }],
      }),
    ),
    apply("deb", "/root/hello-old.json", { outcome: "converged", changed: 1 }),
    assertPackage("deb", HELLO, { version: OLD }),
    apply("deb", "/root/hello-old.json", { outcome: "converged", changed: 0, unchanged: 1 }),
    // Last: it changes the lab repository.
    tamperedRepositoryRefused("deb"),
  ],
};
