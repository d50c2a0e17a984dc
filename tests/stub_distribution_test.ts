// What adding a distribution takes (issue 36; docs/contributing.md, "Add a distribution"):
// its file os/distros/<id>.ts, its line in os/distros/mod.ts, its packaging folder
// packaging/<id>/ (its permission set; its recipe, packaging/<id>/recipe.ts; its bundle
// when it ships one) and its lab scenarios. A package manager no distribution had before
// brings its provider (os/<folder>/ and its line in os/provider_list.ts) and the launcher's
// include for it (launcher/pkg/<manager>.sh). Here: every distribution is laid out so, no
// other file of the program names one, and a distribution that exists only in this test,
// put in the list, gets its providers, its permission lines, its own paths, its package
// manager's detection and its launcher kind from its file alone.
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { type Distribution, DISTRIBUTIONS } from "../os/distros/mod.ts";
import { placed } from "../os/distros/distribution.ts";
import { carriedBy, needsOf } from "../os/needs.ts";
import { type PackagedBuild, selects } from "../os/provider.ts";
import { PROVIDERS } from "../os/provider_list.ts";
import { managersOf } from "../os/detect/packages.ts";
import { permissionBlock } from "../packaging/derive_providers.ts";
import { ownPathsOf } from "../packaging/own_paths.ts";
import { TARGET_OSES } from "../packaging/permissions.ts";

const root = new URL("../", import.meta.url).pathname;
const exists = (path: string) => Deno.lstat(join(root, path)).then(() => true, () => false);

/** Every .ts file of the program (not tests) under `dirs`, relative to the repository. */
async function sources(...dirs: string[]): Promise<string[]> {
  const out: string[] = [];
  const walk = async (at: string) => {
    for await (const entry of Deno.readDir(at)) {
      const path = join(at, entry.name);
      if (entry.isDirectory) await walk(path);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith("_test.ts")) {
        out.push(relative(root, path));
      }
    }
  };
  for (const dir of dirs) await walk(join(root, dir));
  return out.sort();
}

/** A file's code without its comments (lines that are only a comment, and trailing `//`). */
function code(text: string): string {
  return text.split("\n").filter((l) => !/^\s*(\/\/|\/\*\*?|\*)/.test(l))
    .map((l) => l.replace(/\s\/\/ .*$/, "")).join("\n");
}

/**
 * Where the program names a distribution by its id outside the distribution's own files,
 * known and not needed by a new one: Arch's and Alpine's packaging predate
 * packaging/<id>/recipe.ts (make_package.ts builds them itself), and busybox's account
 * tools are Alpine's userland.
 */
const KNOWN: readonly string[] = [
  'os/busybox-accounts/provider.ts: "alpine"',
  'packaging/make_package.ts: "alpine"',
  'packaging/make_package.ts: "arch"',
];

Deno.test("stub distribution: each distribution is its file, its line in the list, its packaging folder; nothing else in the program names it", async () => {
  const list = await Deno.readTextFile(join(root, "os/distros/mod.ts"));
  // The program and its builds (the lab, which raises each distribution's machines, is a test).
  const program = [...await sources("src", "os", "packaging"), "mod.ts", "main.ts"];
  const named: string[] = [];
  for (const d of DISTRIBUTIONS) {
    const file = `os/distros/${d.id}.ts`;
    assert.ok(await exists(file), `${file} holds ${d.title}`);
    const imports = list.split("\n").filter((l) => l.includes(`"./${d.id}.ts"`));
    assert.equal(imports.length, 1, `os/distros/mod.ts imports ${file} once`);
    // Its packaging folder: its permission set, and its recipe (but Arch's and Alpine's).
    assert.ok(await exists(`packaging/${d.id}/permissions`), `packaging/${d.id}/permissions`);
    if (!["arch", "alpine"].includes(d.id)) {
      assert.ok(await exists(`packaging/${d.id}/recipe.ts`), `packaging/${d.id}/recipe.ts`);
      const { packageFor } = await import(`../packaging/${d.id}/recipe.ts`);
      assert.equal(typeof packageFor, "function", `packaging/${d.id}/recipe.ts packageFor`);
    }
    // The launcher's commands for its package manager.
    assert.ok(
      await exists(`launcher/pkg/${d.packages.name}.sh`),
      `launcher/pkg/${d.packages.name}.sh`,
    );
    for (const source of program) {
      const own = source === file || source.startsWith(`packaging/${d.id}/`);
      if (own || source === "os/distros/mod.ts") continue;
      const text = await Deno.readTextFile(join(root, source));
      if (text.includes(`distros/${d.id}.ts"`)) named.push(`${source} imports ${file}`);
      if (code(text).includes(`"${d.id}"`)) named.push(`${source}: "${d.id}"`);
    }
  }
  assert.deepEqual(named.sort(), KNOWN);
  // Its build is one of the targets (the permission sets, `deno task build|package <id>`).
  assert.deepEqual(TARGET_OSES, [...DISTRIBUTIONS.map((d) => d.id), "tarball"]);
});

/** A distribution that exists only here: OpenRC, pacman, its programs in /usr/bin, nft elsewhere. */
const STUB: Distribution<"stub"> = {
  id: "stub",
  name: "Stub",
  title: "Stub Linux",
  osIds: ["stubos"],
  libc: "glibc",
  init: "openrc",
  packages: { name: "pacman", query: ["pacman", "-Q"], emptyExit: 1 },
  programs: {
    ...placed("/usr/bin", [
      "pacman",
      "rc-service",
      "rc-update",
      "rc-status",
      "podman",
      "docker",
      "ip",
      "wg",
      "wireguard-go",
      "sysctl",
      "stat",
      "sync",
      "useradd",
      "usermod",
      "userdel",
      "groupadd",
      "groupdel",
      "mount",
      "umount",
      "findfs",
      "cat",
    ]),
    nft: ["/opt/stub/bin/nft"],
  },
  install: { binDir: "/usr/bin", rootPath: ["/usr/local/bin", "/usr/bin"] },
};
const WITH_STUB: readonly Distribution[] = [...DISTRIBUTIONS, STUB];
/** Its build: an id the types (derived from the real list) do not know, as a new one would be. */
const BUILD = STUB.id as unknown as PackagedBuild;

Deno.test("stub distribution: put in the list, it gets its providers, allow-run lines, own paths, package manager and launcher kind from its file alone", () => {
  // The providers its init and package manager select, and those of every build.
  const carried = carriedBy(BUILD, PROVIDERS, WITH_STUB).map((p) => p.folder).sort();
  assert.deepEqual(carried, [
    "arch-pacman",
    "command-runner",
    "container-cli",
    "nftables",
    "openrc",
    "openrc-mount",
    "posix-fs",
    "shadow-accounts",
    "sysctl",
    "wireguard",
  ]);
  assert.ok(selects(["init:openrc"], BUILD, WITH_STUB));
  assert.ok(!selects(["init:systemd", "packages:apt"], BUILD, WITH_STUB));
  // Its allow-run lines: each program where it says, nothing else.
  const needs = needsOf(BUILD, PROVIDERS, WITH_STUB);
  assert.deepEqual(needs.at.pacman, [{ path: "/usr/bin/pacman", on: "stub" }]);
  assert.deepEqual(needs.at.nft, [{ path: "/opt/stub/bin/nft", on: "stub" }]);
  assert.equal(needs.at.systemctl, undefined, "no systemd on an OpenRC distribution");
  const block = permissionBlock(BUILD, "allow-run", PROVIDERS, WITH_STUB);
  assert.ok(block.some((l) => /^allow-run +\/usr\/bin\/rc-service +# service resources/.test(l)));
  assert.equal(block.length, Object.values(needs.at).flat().length);
  // The tarball runs on every distribution: it gains the stub's new spellings, and only them.
  const tarball = permissionBlock("tarball", "allow-run", PROVIDERS, WITH_STUB);
  const before = permissionBlock("tarball", "allow-run", PROVIDERS);
  assert.deepEqual(
    tarball.filter((l) => !before.includes(l)).map((l) => l.replace(/\s+/g, " ")),
    [
      "allow-run /usr/bin/rc-service # the same, on Stub",
      "allow-run /usr/bin/rc-update # the same, on Stub",
      "allow-run /opt/stub/bin/nft # the same, on Stub",
    ],
  );
  // A program a carried provider runs that it does not place stops the derivation.
  const programs: Record<string, readonly string[]> = { ...STUB.programs };
  delete programs["rc-service"];
  const missing: Distribution<"stub"> = { ...STUB, programs };
  assert.throws(
    () => needsOf(BUILD, PROVIDERS, [...DISTRIBUTIONS, missing]),
    /Stub places no rc-service \(os\/distros\/stub\.ts programs\)/,
  );
  // Its own paths: its init's and its PATH's, from its install facts.
  const own = ownPathsOf({ ...STUB.install, inits: [STUB.init] });
  assert.ok(own.includes("/etc/init.d/nox-mesh-host"));
  assert.ok(!own.some((p) => p.includes("systemd")));
  // Its package manager is detected as the OS's own where os-release names it.
  const pacman = managersOf(WITH_STUB).find((m) => m.name === "pacman")!;
  assert.deepEqual(pacman.native, ["arch", "stubos"]);
  assert.deepEqual(managersOf(WITH_STUB).map((m) => m.name), ["pacman", "apk", "apt"]);
});

/** Every file under `dir` (relative to the repository), or the file itself. */
async function files(path: string): Promise<string[]> {
  const info = await Deno.stat(join(root, path));
  if (!info.isDirectory) return [path];
  const out: string[] = [];
  for await (const entry of Deno.readDir(join(root, path))) {
    out.push(...await files(join(path, entry.name)));
  }
  return out.sort();
}

Deno.test("stub distribution: what adding Debian took outside tests and docs, counted", async () => {
  // Debian itself: its file, its packaging folder (and its line in os/distros/mod.ts).
  const distribution = [...await files("os/distros/debian.ts"), ...await files("packaging/debian")];
  assert.deepEqual(distribution, [
    "os/distros/debian.ts",
    "packaging/debian/permissions",
    "packaging/debian/recipe.ts",
    "packaging/debian/substrate.lock",
  ]);
  // apt, a package manager no distribution had: its provider (and its line in
  // os/provider_list.ts), and the launcher's include for it.
  const manager = [
    ...(await files("os/debian-apt")).filter((f) => !f.endsWith(".md")),
    ...await files("launcher/pkg/apt.sh"),
  ];
  assert.deepEqual(manager, [
    "os/debian-apt/mod.ts",
    "os/debian-apt/provider.ts",
    "launcher/pkg/apt.sh",
  ]);
  // The two list lines, and deno.json's `host` task, whose allow-run `deno task providers`
  // writes from the descriptors (apt-get, dpkg-query).
  const lists = ["os/distros/mod.ts", "os/provider_list.ts", "deno.json"];
  const host = JSON.parse(await Deno.readTextFile(join(root, "deno.json"))).tasks.host;
  assert.match(host, /--allow-run=[^ ]*\bapt-get,dpkg-query\b/);
  assert.equal(distribution.length + manager.length + lists.length, 10);
  // An Ubuntu of its own (were ID_LIKE=debian not enough) would be one file and one line.
});
