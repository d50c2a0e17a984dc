// What adding a kind takes (issue 25): its module under src/resources/, its adapter folder
// under os/ (with its provider.ts: tests/providers_test.ts adds a stub provider), one line
// in the kinds list, its docs and its tests. Here: no file of src/ or os/ outside the kind's
// module and the list imports a kind's module, the engine never names one
// (tests/architecture_test.ts), and a kind defined in this test alone, put in the list, is
// parsed, applied, read back, planned and released by the real engine on a real directory.
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import * as v from "valibot";
import { applyText, planText } from "../src/engine/mod.ts";
import { type Diff, passState, type ResourceKind } from "../src/resources/kind.ts";
import { KINDS, type Resource } from "../src/resources/mod.ts";
import { hostOn, scratch } from "./_helpers.ts";

const root = new URL("../", import.meta.url).pathname;

/** Every .ts file under `dir` (relative to the repository). */
async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (at: string) => {
    for await (const entry of Deno.readDir(at)) {
      const path = join(at, entry.name);
      if (entry.isDirectory) await walk(path);
      else if (entry.name.endsWith(".ts")) out.push(relative(root, path));
    }
  };
  await walk(join(root, dir));
  return out.sort();
}

/** The kinds' own modules (src/resources/<type>.ts), by the list. */
function kindModules(): string[] {
  return [...KINDS.keys()].map((type) => `src/resources/${type}.ts`);
}

/** Which files import which kind modules, outside the kind modules themselves. */
async function importersOfKinds(): Promise<string[]> {
  const modules = kindModules();
  const found: string[] = [];
  for (const file of [...await sources("src"), ...await sources("os")]) {
    if (modules.includes(file)) continue;
    const text = await Deno.readTextFile(join(root, file));
    for (const m of text.matchAll(/^\s*(?:import|export)\b[^;]*?from\s+"(\.[^"]+)"/gms)) {
      const target = relative(root, new URL(m[1], `file://${join(root, file)}`).pathname);
      if (modules.includes(target)) found.push(`${file} -> ${target}`);
    }
  }
  return found.sort();
}

Deno.test("stub kind: each kind is its own module, and only the list imports it", async () => {
  for (const module of kindModules()) {
    assert.ok((await Deno.stat(join(root, module))).isFile, `${module} holds its kind`);
  }
  const list = await Deno.readTextFile(join(root, "src/resources/mod.ts"));
  const all = list.slice(list.indexOf("const ALL"), list.indexOf("] as const"));
  assert.equal(all.match(/^\s+\w+Kind,$/gm)?.length, KINDS.size, "one line per kind in ALL");
  // Besides its line in ALL, the list names a kind only in its import (`Resource` follows).
  for (const name of all.match(/^\s+\w+Kind,$/gm)!.map((line) => line.trim().slice(0, -1))) {
    const lines = list.split("\n").filter((line) => new RegExp(`\\b${name}\\b`).test(line));
    assert.equal(lines.length, 2, `${name} is named on ${lines.length} lines of the list`);
    assert.match(lines[0], new RegExp(`^import \\{ ${name} \\} from "\\./[a-z]+\\.ts";$`));
  }
  const importers = await importersOfKinds();
  const outsideTheList = importers.filter((i) => !i.startsWith("src/resources/mod.ts -> "));
  // Known, and not needed by a new kind: host.json's `permit` names the kernel settings
  // and services a safe declaration may touch, checked with those kinds' own rules.
  assert.deepEqual(outsideTheList, [
    "src/config.ts -> src/resources/service.ts",
    "src/config.ts -> src/resources/sysctl.ts",
  ]);
  assert.equal(importers.length - outsideTheList.length, KINDS.size, "the list imports each");
});

/** A note: a line of text in a file under a managed root (the stub kind's resource). */
const NoteSchema = v.strictObject({
  type: v.literal("stub-note"),
  id: v.string(),
  path: v.string(),
  text: v.string(),
});
type Note = v.InferOutput<typeof NoteSchema>;

/** What the stub's read-backs saw of its own pass state: the ids written in the same pass. */
const seen: string[][] = [];
const written = passState(() => new Set<string>());

const stubKind: ResourceKind<Note> = {
  type: "stub-note",
  schema: NoteSchema,
  needs: "fs",
  key: (note) => `path:${note.path}`,
  place: (note) => ({ path: note.path }),
  rules(note, at, scope) {
    if (!scope.roots.some((r) => note.path.startsWith(`${r}/`))) {
      scope.problems.push({ path: `${at}.path`, message: "is outside the managed roots" });
    }
  },
  async check(ctx, note): Promise<Diff> {
    seen.push([...written(ctx)]);
    const text = await Deno.readTextFile(note.path).catch(() => null);
    if (text === null) return { exists: false, changes: [{ what: "create", text: "create" }] };
    return { exists: true, changes: text === note.text ? [] : [{ what: "text", text: "text" }] };
  },
  async apply(ctx, note) {
    await Deno.writeTextFile(note.path, note.text);
    written(ctx).add(note.id);
  },
  async release(_ctx, note, { created, dryRun }) {
    if (!created) return { outcome: "forgotten" };
    if (!dryRun) await Deno.remove(note.path);
    return { outcome: "removed" };
  },
};

Deno.test("stub kind: a kind put in the list is applied, read back, planned and released by the engine", async () => {
  const list = KINDS as Map<string, ResourceKind<Resource>>;
  list.set(stubKind.type, stubKind as unknown as ResourceKind<Resource>);
  try {
    await using s = await scratch();
    using host = await hostOn(s);
    const note = { type: "stub-note", id: "motd", path: `${s.root}/motd`, text: "hello\n" };
    const apply = (resources: unknown[]) =>
      applyText(host, JSON.stringify({ version: 1, resources }), { source: "file", origin: "t" });

    seen.length = 0;
    const first = await apply([note]);
    assert.equal(first.outcome, "converged", first.error);
    assert.deepEqual(first.results.map((r) => [r.id, r.key, r.outcome]), [
      ["motd", `path:${s.root}/motd`, "changed"],
    ]);
    assert.equal(await Deno.readTextFile(`${s.root}/motd`), "hello\n");
    // The check, then the read-back, which sees what its own apply kept for the pass.
    assert.deepEqual(seen, [[], ["motd"]]);

    seen.length = 0;
    const second = await apply([note]);
    assert.deepEqual(second.results.map((r) => r.outcome), ["unchanged"]);
    assert.deepEqual(seen, [[]], "a new pass starts with fresh state");

    const plan = await planText(
      host,
      JSON.stringify({ version: 1, resources: [{ ...note, text: "bye\n" }] }),
      { source: "file", origin: "t" },
    );
    assert.deepEqual(plan.map((p) => [p.id, p.status, p.changes]), [["motd", "change", ["text"]]]);

    const outside = await apply([{ ...note, path: "/etc/motd-stub" }]).catch((e) => e);
    assert.match(String(outside), /outside the managed roots/);

    const released = await apply([]);
    assert.deepEqual(released.results.map((r) => [r.id, r.outcome]), [["motd", "removed"]]);
    assert.equal(await Deno.stat(`${s.root}/motd`).catch(() => null), null);
  } finally {
    list.delete(stubKind.type);
  }
});
