// The documentation's promises that a reader follows: every relative link in the README, in
// docs/ and in the folder READMEs points at a file that exists; the README names every command;
// lab/README.md names every scenario; the README stays short (issue 25: a newcomer finishes it).
import assert from "node:assert/strict";
import { dirname, join, normalize } from "node:path";
import { COMMANDS } from "../src/cli/main.ts";
import { SCENARIOS } from "../lab/scenarios/index.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const text = (path: string) => Deno.readTextFileSync(join(ROOT, path));

/** The Markdown files whose links are checked: the README, docs/, and every folder README. */
function markdownFiles(): string[] {
  const files = ["README.md", "CHANGELOG.md"];
  for (const e of Deno.readDirSync(join(ROOT, "docs"))) {
    if (e.isFile && e.name.endsWith(".md")) files.push(`docs/${e.name}`);
  }
  const skip = new Set([".git", "node_modules", "dist", ".lab", "docs"]);
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(join(ROOT, dir))) {
      if (skip.has(e.name)) continue;
      const path = dir === "" ? e.name : `${dir}/${e.name}`;
      if (e.isDirectory) walk(path);
      else if (dir !== "" && e.isFile && (e.name === "README.md" || e.name === "RESULTS.md")) {
        files.push(path);
      }
    }
  };
  walk("");
  return files;
}

/** Every `[text](target)` whose target is relative (no scheme, not only an anchor). */
function relativeLinks(markdown: string): string[] {
  const withoutCode = markdown.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  const links: string[] = [];
  for (const m of withoutCode.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1];
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("#")) continue;
    links.push(target.split("#")[0]);
  }
  return links;
}

Deno.test("docs: every relative link in the README, docs/ and the folder READMEs points at a file that exists", () => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of markdownFiles()) {
    for (const target of relativeLinks(text(file))) {
      const path = normalize(join(dirname(file), target));
      checked++;
      try {
        Deno.statSync(join(ROOT, path));
      } catch {
        broken.push(`${file}: ${target}`);
      }
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(checked > 40, `only ${checked} links found: the link pattern no longer matches`);
});

Deno.test("docs: a broken relative link is found (the check above can fail)", () => {
  assert.deepEqual(relativeLinks("see [x](docs/nowhere.md#a), [y](https://e.org), `[z](q)`"), [
    "docs/nowhere.md",
  ]);
});

Deno.test("docs: the README is short and names every command of the CLI", () => {
  const readme = text("README.md");
  assert.ok(readme.split("\n").length <= 270, "README.md grew past about 250 lines (issue 25)");
  const section = readme.slice(readme.indexOf("## The command line"));
  for (const c of COMMANDS) assert.match(section, new RegExp("\\| `" + c.name + "` "), c.name);
  assert.match(section, /\| `help` /);
});

Deno.test("docs: lab/README.md names every scenario in its table of every scenario", () => {
  const lab = text("lab/README.md");
  for (const s of SCENARIOS) {
    assert.match(
      lab,
      new RegExp(`^\\| ${s.name} +\\|`, "m"),
      `${s.name} missing from lab/README.md`,
    );
  }
});

Deno.test("docs: every manual page the packages carry is linked from the README", () => {
  const readme = text("README.md");
  for (const page of Deno.readDirSync(join(ROOT, "packaging/man"))) {
    assert.ok(readme.includes(`(packaging/man/${page.name})`), page.name);
  }
});
