// The release order (src/engine/release.ts insideFirst) over store records a person or a
// bug could have edited: paths that are prefixes of each other, a root, a huge path, a
// deep chain, records that name each other in a circle. It must end, release every record
// exactly once, and put what is inside first: below a directory, below a mount, the mount
// before the directory it is mounted on, a bind before what holds its source.
import assert from "node:assert/strict";
import { insideFirst } from "../src/engine/release.ts";

/** A held record as the release order sees it: "dir:/x", "file:/x", "mount:/x", "bind:/x<-/y", "package:x". */
function record(text: string): { key: string; spec: Record<string, unknown> & { type: string } } {
  const [kind, rest] = [text.slice(0, text.indexOf(":")), text.slice(text.indexOf(":") + 1)];
  const spec = kind === "dir"
    ? { type: "directory", path: rest }
    : kind === "file"
    ? { type: "file", path: rest }
    : kind === "mount"
    ? { type: "mount", target: rest, fstype: "tmpfs", source: "tmpfs" }
    : kind === "bind"
    ? { type: "mount", target: rest.split("<-")[0], fstype: "bind", source: rest.split("<-")[1] }
    : { type: kind, name: rest };
  return { key: text, spec: { id: text, ...spec } };
}
const order = (texts: string[]) => insideFirst(texts.map(record)).map((i) => i.key);

function before(out: string[], inner: string, outer: string) {
  assert.ok(out.indexOf(inner) < out.indexOf(outer), `${inner} before ${outer}: ${out}`);
}

Deno.test("release order: paths that are prefixes of each other as text are not nested; / and others end", () => {
  const texts = [
    "dir:/",
    "dir:/etc/a",
    "file:/etc/ab",
    "file:/etc/a/b",
    "dir:/etc",
    "package:x",
    "dir:/etc/a/",
  ];
  const out = order(texts);
  assert.deepEqual([...out].sort(), [...texts].sort(), "each once");
  before(out, "file:/etc/a/b", "dir:/etc/a");
  before(out, "dir:/etc/a", "dir:/etc");
  before(out, "file:/etc/ab", "dir:/etc");
});

Deno.test("release order: a record whose path is far longer than any path ends at once, and each record comes once", () => {
  // 1 MiB of "/a": its prefixes alone would be 2.5e11 characters.
  const huge = "file:/etc" + "/a".repeat(512 * 1024);
  const out = order(["dir:/etc", huge, "dir:/etc/a"]);
  assert.equal(out.length, 3);
  assert.deepEqual(new Set(out).size, 3);
  before(out, "dir:/etc/a", "dir:/etc");
});

Deno.test("release order: a deep chain of nested records, outermost first, comes out innermost first", () => {
  // As deep as a path the parse accepts allows (4095 bytes: "/a" 2000 times), plus many
  // unrelated records: no recursion per level, and nothing dropped or repeated.
  const chain: string[] = [];
  for (let p = "/etc", i = 0; i < 2000; i++) chain.push(`dir:${p = `${p}/a`}`);
  const others = Array.from({ length: 50_000 }, (_, i) => `file:/srv/r${i}`);
  const out = order([...chain, ...others]);
  assert.equal(out.length, chain.length + others.length);
  const chainOut = out.filter((k) => k.startsWith("dir:/etc"));
  assert.deepEqual(chainOut, [...chain].reverse());
});

Deno.test("release order: a mount goes after what is inside it and before the directory it is mounted on", () => {
  // Last declared first, as the engine hands them over: here the reverse of what is needed.
  const out = order([
    "dir:/srv",
    "dir:/srv/data",
    "mount:/srv/data",
    "dir:/srv/data/www",
    "mount:/srv/data/www",
    "file:/srv/data/www/index.html",
    "file:/srv/data/log",
  ]);
  before(out, "file:/srv/data/www/index.html", "mount:/srv/data/www");
  before(out, "mount:/srv/data/www", "dir:/srv/data/www");
  before(out, "dir:/srv/data/www", "mount:/srv/data");
  before(out, "file:/srv/data/log", "mount:/srv/data");
  before(out, "mount:/srv/data", "dir:/srv/data");
  before(out, "dir:/srv/data", "dir:/srv");
});

Deno.test("release order: a bind goes before what holds its source (the directory, a mount above it)", () => {
  const out = order([
    "mount:/srv/disk",
    "dir:/srv/disk/www",
    "dir:/srv/www",
    "bind:/srv/www<-/srv/disk/www",
  ]);
  before(out, "bind:/srv/www<-/srv/disk/www", "dir:/srv/disk/www");
  before(out, "bind:/srv/www<-/srv/disk/www", "mount:/srv/disk");
  before(out, "bind:/srv/www<-/srv/disk/www", "dir:/srv/www");
});

Deno.test("release order: records that name each other in a circle (a store edited by hand) each come once", () => {
  const out = order(["bind:/srv/a<-/srv/b/x", "bind:/srv/b<-/srv/a/x", "file:/srv/c"]);
  assert.deepEqual([...out].sort(), [
    "bind:/srv/a<-/srv/b/x",
    "bind:/srv/b<-/srv/a/x",
    "file:/srv/c",
  ]);
});
