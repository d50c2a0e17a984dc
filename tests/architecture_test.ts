// The shape of the repository, as tests (DESIGN.md §1, seed 001 "what asserts it"):
// imports only go downward, only the link talks NATS, only the store opens a
// database, each per-OS build carries only its own adapters, a provider is named
// outside its folder only in the list of descriptors, and what is written from the
// descriptors is what is committed.
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { build } from "../packaging/build.ts";
import {
  DEV_SHIM,
  hostFlags,
  rewriteDenoJson,
  rewriteDevShim,
  rewritePermissionFile,
} from "../packaging/derive_providers.ts";
import { TARGET_OSES } from "../packaging/permissions.ts";
import { PROVIDERS } from "../os/provider_list.ts";

const root = new URL("../", import.meta.url).pathname;

/** Every .ts file under `dir` (relative to the repository), tests excluded. */
async function sources(dir: string): Promise<string[]> {
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
  await walk(join(root, dir));
  return out.sort();
}

/** The import/export specifiers of a module, resolved to repository paths (or bare names). */
async function importsOf(file: string): Promise<string[]> {
  const text = await Deno.readTextFile(join(root, file));
  const specifiers = [
    ...text.matchAll(/^\s*(?:import|export)\b[^;]*?from\s+"([^"]+)"/gms),
    ...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g),
  ].map((m) => m[1]);
  return specifiers.map((s) =>
    s.startsWith(".") ? relative(root, new URL(s, `file://${join(root, file)}`).pathname) : s
  );
}

Deno.test("src/ never imports os/, lab/, packaging/ or tests/ (the core is OS-agnostic)", async () => {
  const found: string[] = [];
  for (const file of await sources("src")) {
    for (const target of await importsOf(file)) {
      if (/^(os|lab|packaging|tests)\//.test(target)) found.push(`${file} -> ${target}`);
    }
  }
  assert.deepEqual(found, []);
});

Deno.test("os/ never imports lab/, packaging/ or tests/ (adapters sit below the builds)", async () => {
  const found: string[] = [];
  for (const file of await sources("os")) {
    for (const target of await importsOf(file)) {
      if (/^(lab|packaging|tests)\//.test(target)) found.push(`${file} -> ${target}`);
    }
  }
  assert.deepEqual(found, []);
});

Deno.test("only src/link/ imports the NATS client; only src/store/ opens a database", async () => {
  const nats: string[] = [];
  const database: string[] = [];
  for (const file of [...await sources("src"), ...await sources("os"), "mod.ts"]) {
    for (const target of await importsOf(file)) {
      if (target.startsWith("@nats-io/") && !file.startsWith("src/link/")) {
        nats.push(`${file} -> ${target}`);
      }
      if (target === "node:sqlite" && !file.startsWith("src/store/")) {
        database.push(`${file} -> ${target}`);
      }
    }
  }
  assert.deepEqual(nats, [], "the NATS client belongs to the link");
  assert.deepEqual(database, [], "the store is the core's only database client");
});

Deno.test("the rule above catches what it should (an upward import is found)", async () => {
  const dir = await Deno.makeTempDir({ dir: join(root, "src"), prefix: "_arch_probe" });
  try {
    await Deno.writeTextFile(
      join(dir, "probe.ts"),
      'import { CARRIED } from "../../os/carried.ts";\nexport const x = CARRIED;\n',
    );
    const imports = await importsOf(relative(root, join(dir, "probe.ts")));
    assert.deepEqual(imports, ["os/carried.ts"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Every test file (`*_test.ts`) under tests/, relative to the repository. */
async function testFiles(): Promise<string[]> {
  const out: string[] = [];
  const walk = async (at: string) => {
    for await (const entry of Deno.readDir(at)) {
      const path = join(at, entry.name);
      if (entry.isDirectory) await walk(path);
      else if (entry.name.endsWith("_test.ts")) out.push(relative(root, path));
    }
  };
  await walk(join(root, "tests"));
  return out.sort();
}

/**
 * Why a test runs the file system adapter in-process while it races it or claims its
 * trust, or `undefined`. A race or trust test is one that starts the attacker
 * (tests/_flipper.ts, tests/races/) or whose name says race or trust; in-process is
 * importing the adapter (os/posix-fs/), the engine (src/engine/, tests/_engine.ts) or
 * opening it through tests/_helpers.ts (hostOn). Deno walks every path again from / under a
 * permission set, and passes relative names through under --allow-all (LAB-NOTES.md): such
 * a test proves something only of the host as a process under its real permission set.
 */
function inProcessRace(file: string, imports: string[], text: string): string | undefined {
  const racing = imports.some((i) => i === "tests/_flipper.ts" || i.startsWith("tests/races/")) ||
    /(race|trust)[^/]*_test\.ts$/.test(file);
  if (!racing) return undefined;
  const inProcess = imports.find((i) =>
    i.startsWith("os/posix-fs/") || i.startsWith("src/engine/") || i === "tests/_engine.ts"
  );
  if (inProcess) return `${file} imports ${inProcess}`;
  if (/\bhostOn\(/.test(text)) return `${file} opens the host in-process (hostOn)`;
  return undefined;
}

Deno.test("the race and trust tests of the file system run the host as a process under a real permission set, never in-process", async () => {
  const found: string[] = [];
  const checked: string[] = [];
  for (const file of await testFiles()) {
    const why = inProcessRace(
      file,
      await importsOf(file),
      await Deno.readTextFile(join(root, file)),
    );
    if (why) found.push(why);
    if (/(race|trust)[^/]*_test\.ts$/.test(file)) checked.push(file);
  }
  assert.deepEqual(found, []);
  assert.deepEqual(checked, ["tests/fs_race_test.ts", "tests/fs_trust_test.ts"]);
});

Deno.test("the rule above catches what it should (a race run in-process, through the engine)", () => {
  assert.match(
    inProcessRace("tests/x_test.ts", ["tests/_flipper.ts", "os/posix-fs/mod.ts"], "") ?? "",
    /imports os\/posix-fs\/mod\.ts/,
  );
  assert.match(
    inProcessRace("tests/fs_race_test.ts", ["src/engine/mod.ts"], "") ?? "",
    /imports src\/engine/,
  );
  assert.match(inProcessRace("tests/a_trust_test.ts", [], "await hostOn(s)") ?? "", /hostOn/);
  assert.equal(inProcessRace("tests/x_test.ts", ["os/posix-fs/mod.ts"], ""), undefined);
});

/** Words that only a given adapter's module contains (its factory and its tool's verbs). */
const MARKS = {
  pacman: ["function archPacman(", "function parsePacmanQuery("],
  apk: ["function alpineApk(", "function parseApkInfoExists("],
  apt: ["function debianApt(", "function parseDpkgStatus("],
  systemd: ["function systemd(", "function parseShow("],
  openrc: ["function openrc(", "function parseRcUpdateShow("],
  tarballSelf: ["function tarballSelf(", "function readTarball("],
};

Deno.test("each OS build carries its own adapters only (the builds its descriptors name)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-arch-" });
  try {
    const carries = async (os: "arch" | "alpine" | "debian") => {
      const result = await build({ os, form: "bundled", out: join(dir, os) });
      // The whole program: the entry and every part it loads.
      const text = (await Promise.all(
        result.bundle!.map((name) => Deno.readTextFile(join(result.dir, name))),
      )).join("\n");
      const has = (name: keyof typeof MARKS) => MARKS[name].every((mark) => text.includes(mark));
      return Object.fromEntries(Object.keys(MARKS).map((n) => [n, has(n as keyof typeof MARKS)]));
    };
    assert.deepEqual(await carries("arch"), {
      pacman: true,
      apk: false,
      apt: false,
      systemd: true,
      openrc: false,
      tarballSelf: false,
    });
    assert.deepEqual(await carries("alpine"), {
      pacman: false,
      apk: true,
      apt: false,
      systemd: false,
      openrc: true,
      tarballSelf: false,
    });
    assert.deepEqual(await carries("debian"), {
      pacman: false,
      apk: false,
      apt: true,
      systemd: true,
      openrc: false,
      tarballSelf: false,
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** The folders of os/ that are providers (every one but the profile's detect/ and distros/). */
async function providerFolders(): Promise<string[]> {
  const folders: string[] = [];
  for await (const entry of Deno.readDir(join(root, "os"))) {
    if (entry.isDirectory && !["detect", "distros"].includes(entry.name)) {
      folders.push(entry.name);
    }
  }
  return folders.sort();
}

Deno.test("each provider folder of os/ has its descriptor, and os/provider_list.ts lists each once", async () => {
  const folders = await providerFolders();
  for (const folder of folders) {
    const { PROVIDER } = await import(`../os/${folder}/provider.ts`);
    assert.equal(PROVIDER?.folder, folder, `os/${folder}/provider.ts describes os/${folder}`);
    assert.ok(PROVIDERS.includes(PROVIDER), `os/provider_list.ts lists os/${folder}`);
  }
  assert.deepEqual(PROVIDERS.map((p) => p.folder).sort(), folders, "the list names each once");
});

/**
 * Imports of a provider's folder from outside it, other than the list's (its provider.ts)
 * and the profile's (os/detect/mod.ts: its detect.ts).
 */
async function namedOutside(files: string[], folders: string[]): Promise<string[]> {
  const found: string[] = [];
  for (const file of files) {
    for (const target of await importsOf(file)) {
      const folder = folders.find((f) => target.startsWith(`os/${f}/`));
      if (!folder || file.startsWith(`os/${folder}/`)) continue;
      const listed = file === "os/provider_list.ts" && target === `os/${folder}/provider.ts`;
      const detected = file === "os/detect/mod.ts" && target === `os/${folder}/detect.ts`;
      if (!listed && !detected) found.push(`${file} -> ${target}`);
    }
  }
  return found;
}

/** Every non-test source of the program and its builds. */
async function programSources(): Promise<string[]> {
  const dirs = ["src", "os", "packaging", "lab", "launcher"];
  return ["mod.ts", ...(await Promise.all(dirs.map(sources))).flat()];
}

Deno.test("outside its folder, a provider is named only in os/provider_list.ts (adding one: its folder and its line there)", async () => {
  assert.deepEqual(await namedOutside(await programSources(), await providerFolders()), []);
});

Deno.test("the rule above catches what it should (an adapter imported by a build file is found)", async () => {
  const dir = await Deno.makeTempDir({ dir: join(root, "packaging"), prefix: "_arch_probe" });
  try {
    await Deno.writeTextFile(
      join(dir, "probe.ts"),
      'import { archPacman } from "../../os/arch-pacman/mod.ts";\nexport const x = archPacman;\n',
    );
    const probe = relative(root, join(dir, "probe.ts"));
    assert.deepEqual(await namedOutside([probe], await providerFolders()), [
      `${probe} -> os/arch-pacman/mod.ts`,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("what is written from the descriptors is what is committed (`deno task providers`)", async () => {
  for (const os of TARGET_OSES) {
    const file = join(root, "packaging", os, "permissions");
    const text = await Deno.readTextFile(file);
    assert.equal(rewritePermissionFile(text, os), text, `${file}: run \`deno task providers\``);
  }
  const config = await Deno.readTextFile(join(root, "deno.json"));
  assert.equal(rewriteDenoJson(config), config, "deno.json's host task: run `deno task providers`");
  // The development shim runs the host with exactly the host task's flags.
  const shim = await Deno.readTextFile(join(root, DEV_SHIM));
  assert.equal(rewriteDevShim(shim, config), shim, `${DEV_SHIM}: run \`deno task providers\``);
  for (const flag of hostFlags(config)) assert.ok(shim.includes(`'${flag}'`), flag);
});

/** The string literals of TypeScript `text`, comments left out (template literals whole). */
function stringLiterals(text: string): string[] {
  const found: string[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "/" && text[i + 1] === "/") {
      i = text.indexOf("\n", i) < 0 ? text.length : text.indexOf("\n", i);
    } else if (c === "/" && text[i + 1] === "*") i = text.indexOf("*/", i + 2) + 1 || text.length;
    else if (c === '"' || c === "'" || c === "`") {
      let value = "";
      let j = i + 1;
      for (; j < text.length && text[j] !== c; j++) {
        if (text[j] === "\\") j++;
        value += text[j];
      }
      if (c !== "`") found.push(value);
      i = j;
    }
  }
  return found;
}

/**
 * Where src/engine/ names a kind: a string literal equal to a kind's type, or an import of
 * a kind's own module (the engine imports only src/resources/mod.ts and kind.ts). The one
 * word allowed is a declaration's source `"file"` where `Source` is defined (engine/types.ts:
 * a file on disk, not the kind).
 */
async function kindsNamedIn(files: string[], types: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const file of files) {
    const text = await Deno.readTextFile(join(root, file));
    for (const literal of stringLiterals(text)) {
      const source = file === "src/engine/types.ts" && literal === "file";
      if (types.includes(literal) && !source) found.push(`${file}: "${literal}"`);
    }
    for (const target of await importsOf(file)) {
      const kindModule = /^src\/resources\/[a-z]/.test(target) &&
        !["src/resources/mod.ts", "src/resources/kind.ts"].includes(target);
      if (kindModule) found.push(`${file} -> ${target}`);
    }
  }
  return found;
}

Deno.test("src/engine/ never names a kind: it asks kinds through their hooks (kind.ts)", async () => {
  const { KINDS } = await import("../src/resources/mod.ts");
  assert.deepEqual(await kindsNamedIn(await sources("src/engine"), [...KINDS.keys()]), []);
});

Deno.test("the rule above catches what it should (a kind's type and a kind's module are found)", async () => {
  const dir = await Deno.makeTempDir({ dir: join(root, "src/engine"), prefix: "_arch_probe" });
  try {
    await Deno.writeTextFile(
      join(dir, "probe.ts"),
      'import { serviceBaseName } from "../../resources/service.ts";\n' +
        '// a comment may say "package"\n' +
        'export const x = (r: { type: string }) => r.type === "package" ? serviceBaseName("a") : "";\n',
    );
    const probe = relative(root, join(dir, "probe.ts"));
    assert.deepEqual(await kindsNamedIn([probe], ["package", "service"]), [
      `${probe}: "package"`,
      `${probe} -> src/resources/service.ts`,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("one public apply: outside src/engine/, src/ reaches the apply only through engine/mod.ts", async () => {
  const inner = ["src/engine/apply.ts", "src/engine/commit_window.ts", "src/engine/recorder.ts"];
  const found: string[] = [];
  for (const file of await sources("src")) {
    if (file.startsWith("src/engine/")) continue;
    for (const target of await importsOf(file)) {
      if (inner.includes(target)) found.push(`${file} -> ${target}`);
    }
  }
  assert.deepEqual(found, []);
});

Deno.test("src/run/ reads no meta key of the engine's or the store's (it asks the engine)", async () => {
  // The run loop's own records (its status, the inventory it sent) and the node's name.
  const own = new Set(["runStatus", "inventoryDigest", "inventorySentAt", "node"]);
  const found: string[] = [];
  for (const file of await sources("src/run")) {
    const text = await Deno.readTextFile(join(root, file));
    for (const [, key] of text.matchAll(/\bMETA\.(\w+)/g)) {
      if (!own.has(key)) found.push(`${file}: META.${key}`);
    }
  }
  assert.deepEqual(found, []);
});

// One meaning per name (issue 25): no two files under src/, os/, lab/ and packaging/ share a
// base name, except names that mean the same part of each folder they are in.

/** Names every folder may have, each meaning the same part of its folder. */
const CONVENTIONAL_NAMES = new Set([
  "README.md", // the folder's guide
  "mod.ts", // the folder's entry point
  "main.ts", // a program's entry point (src/cli/, lab/)
  "errors.ts", // an area's error classes
  "provider.ts", // an os/ provider's descriptor
  "detect.ts", // an os/ provider's probe
  "needs.ts", // what providers need of the machine (os/, os/detect/)
  "own_paths.ts", // a package's own paths (packaging/<os>/)
  "permissions", // a package's permission set (packaging/<os>/)
  "substrate.lock", // a package's pinned substrate (packaging/<os>/)
]);

/**
 * Base names held by more than one of `files` (repository paths), with their paths. A lab
 * scenario's file bears its scenario's name (`deno task lab NAME`), often the feature it
 * exercises: lab/scenarios/ is a namespace of its own.
 */
function sharedNames(files: readonly string[]): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  for (const file of files) {
    if (file.startsWith("lab/scenarios/") || /(^|\/)_arch_probe/.test(file)) continue;
    const name = file.slice(file.lastIndexOf("/") + 1);
    byName.set(name, [...(byName.get(name) ?? []), file]);
  }
  return new Map(
    [...byName].filter(([name, paths]) => paths.length > 1 && !CONVENTIONAL_NAMES.has(name)),
  );
}

/** Every file under `dir` (relative to the repository). */
async function allFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (at: string) => {
    for await (const entry of Deno.readDir(at)) {
      const path = join(at, entry.name);
      if (entry.isDirectory) await walk(path);
      else out.push(relative(root, path));
    }
  };
  await walk(join(root, dir));
  return out.sort();
}

Deno.test("no two files under src/, os/, lab/ and packaging/ share a base name (one meaning per name)", async () => {
  const files = (await Promise.all(["src", "os", "lab", "packaging"].map(allFiles))).flat();
  assert.deepEqual(
    Object.fromEntries(sharedNames(files)),
    {},
    "rename so each name says what it is",
  );
});

Deno.test("the rule above catches what it should (two content.ts, not two mod.ts or scenarios)", () => {
  const shared = sharedNames([
    "src/link/content.ts",
    "src/store/content.ts",
    "os/a/mod.ts",
    "os/b/mod.ts",
    "lab/scenarios/outbox.ts",
    "src/store/outbox.ts",
  ]);
  assert.deepEqual(Object.fromEntries(shared), {
    "content.ts": ["src/link/content.ts", "src/store/content.ts"],
  });
});
