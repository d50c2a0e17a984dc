// The shape of the repository, as tests (DESIGN.md §1, seed 001 "what asserts it"):
// imports only go downward, only the link talks NATS, only the store opens a
// database, and each per-OS build carries only its own adapters.
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { build } from "../packaging/build.ts";

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
      'import { ADAPTERS } from "../../os/adapters.ts";\nexport const x = ADAPTERS;\n',
    );
    const imports = await importsOf(relative(root, join(dir, "probe.ts")));
    assert.deepEqual(imports, ["os/adapters.ts"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Words that only a given adapter's module contains (its factory and its tool's verbs). */
const MARKS = {
  pacman: ["function archPacman(", "function parsePacmanQuery("],
  apk: ["function alpineApk(", "function parseApkInfoExists("],
  systemd: ["function systemd(", "function parseShow("],
  openrc: ["function openrc(", "function parseRcUpdateShow("],
};

Deno.test("each OS build carries its own adapters only (packaging/<os>/adapters.ts)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-arch-" });
  try {
    const carries = async (os: "arch" | "alpine") => {
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
      systemd: true,
      openrc: false,
    });
    assert.deepEqual(await carries("alpine"), {
      pacman: false,
      apk: true,
      systemd: false,
      openrc: true,
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
