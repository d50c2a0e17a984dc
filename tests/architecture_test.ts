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
import { CLASS_FIELDS, FILE_LINES, FUNCTION_LINES, shapeProblems } from "./_shape.ts";

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

/**
 * What the library (the root mod.ts) and the program (main.ts) export or import past the
 * engine's mod.ts: any module of src/engine/ but mod.ts, and a value (not a type) of
 * src/store/ (its class opens the store beside the lock).
 */
async function pastTheEngine(file: string): Promise<string[]> {
  const text = await Deno.readTextFile(join(root, file));
  const found: string[] = [];
  const statements =
    /^(?:import|export)(\s+type)?\s*(\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+)\s*from\s*"([^"]+)"/gm;
  for (const [, typeOnly, names, specifier] of text.matchAll(statements)) {
    const target = relative(root, new URL(specifier, `file://${join(root, file)}`).pathname);
    const values = names.startsWith("{")
      ? names.slice(1, -1).split(",").map((n) => n.trim()).filter((n) =>
        n && !n.startsWith("type ")
      )
      : [names];
    if (target.startsWith("src/engine/") && target !== "src/engine/mod.ts") {
      found.push(`${file} -> ${target}`);
    } else if (target.startsWith("src/store/") && !typeOnly && values.length > 0) {
      found.push(`${file} -> ${target} (${values.join(", ")})`);
    }
  }
  return found;
}

Deno.test("one public apply at the root too: mod.ts and main.ts reach the engine only through engine/mod.ts", async () => {
  assert.deepEqual([...await pastTheEngine("mod.ts"), ...await pastTheEngine("main.ts")], []);
});

Deno.test("the rule above catches what it should (the inner apply, the store's class)", async () => {
  const probe = "_arch_probe_root.ts";
  await Deno.writeTextFile(
    join(root, probe),
    'export { applyDeclaration } from "./src/engine/apply.ts";\n' +
      'export { Store } from "./src/store/store.ts";\n' +
      'export type { Store as S } from "./src/store/store.ts";\n' +
      'export { type ManagedResource } from "./src/store/records.ts";\n' +
      'export { apply } from "./src/engine/mod.ts";\n',
  );
  try {
    assert.deepEqual(await pastTheEngine(probe), [
      `${probe} -> src/engine/apply.ts`,
      `${probe} -> src/store/store.ts (Store)`,
    ]);
  } finally {
    await Deno.remove(join(root, probe));
  }
});

/** Identifiers (exports, and the methods of exported classes) of a module. */
async function namesOf(file: string): Promise<string[]> {
  const text = await Deno.readTextFile(join(root, file));
  const exported =
    /^export\s+(?:declare\s+)?(?:async\s+)?(?:function\*?|class|interface|type|const|let|enum)\s+(\w+)/gm;
  const methods = /^ {2}(?:static\s+)?(?:async\s+)?(?:get\s+|set\s+)?([a-zA-Z]\w*)[(<]/gm;
  return [...text.matchAll(exported), ...text.matchAll(methods)].map((m) => m[1]);
}

Deno.test('"held" names a person\'s hold only: the resources the host manages are "managed"', async () => {
  // The hold (engine/hold.ts), what it withholds (run/hold_watch.ts), and the report of a
  // check made while held (link/messages.ts).
  const hold = new Set(["HeldError", "HeldMessage", "heldMessage", "withheld"]);
  const found: string[] = [];
  for (const file of ["mod.ts", ...await sources("src")]) {
    for (const name of await namesOf(file)) {
      if (/held/i.test(name) && !hold.has(name)) found.push(`${file}: ${name}`);
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

// No import circle (issue 36): a type-only import counts, and so does a dynamic one (a
// template's `${…}` stands for any file name there).

/**
 * The files `file` imports among `files`: its static and dynamic imports (importsOf), and
 * the files a template import (`./${os}/recipe.ts`) can name.
 */
async function importedAmong(file: string, files: ReadonlySet<string>): Promise<string[]> {
  const text = await Deno.readTextFile(join(root, file));
  const found = (await importsOf(file)).filter((target) => files.has(target));
  for (const [, template] of text.matchAll(/\bimport\(\s*`([^`]+)`\s*\)/g)) {
    if (!template.startsWith(".")) continue;
    const any = "__any_name__";
    const path = relative(
      root,
      new URL(template.replace(/\$\{[^}]*\}/g, any), `file://${join(root, file)}`).pathname,
    );
    const escaped = path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replaceAll(any, "[^/]+");
    const pattern = new RegExp(`^${escaped}$`);
    found.push(...[...files].filter((f) => pattern.test(f)));
  }
  return found;
}

/** Each import circle among `files`, as one path through it: "a.ts -> b.ts -> a.ts". */
async function circles(files: readonly string[]): Promise<string[]> {
  const known = new Set(files);
  const edges = new Map<string, string[]>();
  for (const file of files) edges.set(file, await importedAmong(file, known));
  // Tarjan's strongly connected components; each with more than one file (or a file
  // importing itself) is a circle.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of edges.get(file)!) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let top: string;
    do {
      top = stack.pop()!;
      onStack.delete(top);
      component.push(top);
    } while (top !== file);
    if (component.length > 1 || edges.get(file)!.includes(file)) components.push(component);
  };
  for (const file of files) if (!index.has(file)) visit(file);
  // One way round each component, from its first file (by name) back to it.
  return components.map((component) => {
    const inside = new Set(component);
    const start = component.sort()[0];
    const from = new Map<string, string>();
    const queue = [start];
    while (queue.length > 0) {
      const at = queue.shift()!;
      for (const next of edges.get(at)!.filter((n) => inside.has(n))) {
        if (next === start) {
          const path = [start];
          for (let step: string | undefined = at; step !== start; step = from.get(step!)) {
            path.splice(1, 0, step!);
          }
          return [...path, start].join(" -> ") + ` (${component.length} files)`;
        }
        if (!from.has(next)) {
          from.set(next, at);
          queue.push(next);
        }
      }
    }
    return component.join(", ");
  }).sort();
}

Deno.test("no import circle among mod.ts, main.ts, src/, os/, packaging/ and lab/ (type-only and dynamic imports count)", async () => {
  const dirs = ["src", "os", "packaging", "lab"];
  const files = ["mod.ts", "main.ts", ...(await Promise.all(dirs.map(sources))).flat()];
  assert.deepEqual(await circles(files), [], "move the type or value to where its owner is");
});

Deno.test("the circle rule sees every import `deno info` sees (from the programs' entry points)", async () => {
  const dirs = ["src", "os", "packaging", "lab"];
  const files = new Set(["mod.ts", "main.ts", ...(await Promise.all(dirs.map(sources))).flat()]);
  const entries = [
    "mod.ts",
    "main.ts",
    "lab/main.ts",
    "lab/mesh/cli.ts",
    "packaging/make_package.ts",
  ];
  const missed: string[] = [];
  for (const entry of entries) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", entry],
      cwd: root,
      stdin: "null",
    }).output();
    assert.ok(out.success, `deno info ${entry}: ${new TextDecoder().decode(out.stderr)}`);
    const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      modules: { specifier: string; dependencies?: { code?: Spec; type?: Spec }[] }[];
    };
    type Spec = { specifier: string };
    const local = (url: string) =>
      url.startsWith(`file://${root}`) ? url.slice(7 + root.length) : "";
    for (const module of graph.modules) {
      const file = local(module.specifier);
      if (!files.has(file)) continue;
      const seen = new Set(await importedAmong(file, files));
      for (const dependency of module.dependencies ?? []) {
        for (const target of [dependency.code, dependency.type]) {
          const to = target ? local(target.specifier) : "";
          if (files.has(to) && !seen.has(to)) missed.push(`${file} -> ${to}`);
        }
      }
    }
  }
  assert.deepEqual([...new Set(missed)], [], "importsOf misses these imports");
});

Deno.test("the rule above catches what it should (a type-only circle, a dynamic one, a template one)", async () => {
  const dir = await Deno.makeTempDir({ dir: join(root, "src"), prefix: "_arch_probe" });
  try {
    const write = (name: string, text: string) => Deno.writeTextFile(join(dir, name), text);
    await write("a.ts", 'import type { B } from "./b.ts";\nexport type A = B;\n');
    await write("b.ts", 'import type { A } from "./a.ts";\nexport type B = { a?: A };\n');
    await write("c.ts", 'export const c = () => import("./d.ts");\n');
    await write("d.ts", 'import { c } from "./c.ts";\nexport const d = c;\n');
    await Deno.mkdir(join(dir, "x"));
    await write("e.ts", "export const e = (id: string) => import(`./${id}/f.ts`);\n");
    await write("x/f.ts", 'import { e } from "../e.ts";\nexport const f = e;\n');
    await write("g.ts", 'import { c } from "./c.ts";\nexport const g = c;\n');
    const probe = relative(root, dir);
    const files = ["a", "b", "c", "d", "e", "x/f", "g"].map((n) => `${probe}/${n}.ts`);
    assert.deepEqual(await circles(files), [
      `${probe}/a.ts -> ${probe}/b.ts -> ${probe}/a.ts (2 files)`,
      `${probe}/c.ts -> ${probe}/d.ts -> ${probe}/c.ts (2 files)`,
      `${probe}/e.ts -> ${probe}/x/f.ts -> ${probe}/e.ts (2 files)`,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** What in src/ and os/ breaks issue 36's limits: long functions unexplained, large classes and files. */
async function shapeOfTree(): Promise<string[]> {
  const problems: string[] = [];
  for (const file of [...await sources("src"), ...await sources("os")]) {
    const text = await Deno.readTextFile(join(root, file));
    for (const p of shapeProblems(file, text)) problems.push(`${p.file}:${p.line}: ${p.what}`);
    const lines = text.endsWith("\n") ? text.split("\n").length - 1 : text.split("\n").length;
    if (/^src\/(run|engine)\//.test(file) && lines > FILE_LINES) {
      problems.push(`${file}: ${lines} lines (over ${FILE_LINES} in src/run and src/engine)`);
    }
  }
  return problems;
}

Deno.test(`no file of src/run or src/engine over ${FILE_LINES} lines, no class over ${CLASS_FIELDS} fields, no function over ${FUNCTION_LINES} lines without a comment saying why (src/, os/)`, async () => {
  assert.deepEqual(await shapeOfTree(), []);
});

Deno.test("the rule above catches what it should (a long function, one that says why, a large class)", () => {
  const body = Array.from({ length: FUNCTION_LINES }, (_, i) => `  const v${i} = ${i};`).join("\n");
  const fields = Array.from({ length: CLASS_FIELDS + 1 }, (_, i) => `  #f${i} = ${i};`).join("\n");
  const source = `export function long(): void {\n${body}\n}\n` +
    `// Long because: a test of the rule.\nexport function explained(): void {\n${body}\n}\n` +
    `const arrow = () => {\n${body}\n};\n` +
    `export class Large {\n${fields}\n  constructor(readonly p: number) {}\n  m(): void {}\n}\n` +
    `export class Small {\n  #a = 1;\n  static b = 2;\n}\n`;
  const found = shapeProblems("probe.ts", source).map((p) => `${p.line}: ${p.what}`);
  assert.deepEqual(found, [
    `1: function long is ${FUNCTION_LINES + 2} lines (over ${FUNCTION_LINES}) with no ` +
    "`// Long because: …` comment before it",
    `${2 * FUNCTION_LINES + 6}: function arrow is ${
      FUNCTION_LINES + 2
    } lines (over ${FUNCTION_LINES}) ` +
    "with no `// Long because: …` comment before it",
    `${3 * FUNCTION_LINES + 8}: class Large has ${CLASS_FIELDS + 2} fields (over ${CLASS_FIELDS})`,
  ]);
});
