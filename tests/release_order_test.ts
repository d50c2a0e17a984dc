// The release order (src/engine/release.ts insideFirst) over store records a person or a
// bug could have edited: keys that are prefixes of each other, a root, a huge key, a deep
// chain. It must end, release every record exactly once, and put what is inside first.
import assert from "node:assert/strict";
import { insideFirst } from "../src/engine/release.ts";

const items = (keys: string[]) => keys.map((key) => ({ key }));
const order = (keys: string[]) => insideFirst(items(keys)).map((i) => i.key);

Deno.test("release order: keys that are prefixes of each other as text are not nested; path:/ and others end", () => {
  const keys = [
    "path:/",
    "path:/etc/a",
    "path:/etc/ab",
    "path:/etc/a/b",
    "path:/etc",
    "package:x",
    "path:/etc/a/",
  ];
  const out = order(keys);
  assert.deepEqual([...out].sort(), [...keys].sort(), "each once");
  const before = (inner: string, outer: string) =>
    assert.ok(out.indexOf(inner) < out.indexOf(outer), `${inner} before ${outer}: ${out}`);
  before("path:/etc/a/b", "path:/etc/a");
  before("path:/etc/a", "path:/etc");
  before("path:/etc/ab", "path:/etc");
});

Deno.test("release order: a record whose key is far longer than any path ends at once, and each record comes once", () => {
  // 1 MiB of "/a": its prefixes alone would be 2.5e11 characters.
  const huge = "path:/etc" + "/a".repeat(512 * 1024);
  const out = order(["path:/etc", huge, "path:/etc/a"]);
  assert.equal(out.length, 3);
  assert.deepEqual(new Set(out).size, 3);
  assert.ok(out.indexOf("path:/etc/a") < out.indexOf("path:/etc"));
});

Deno.test("release order: a deep chain of nested records, outermost first, comes out innermost first", () => {
  // As deep as a path the parse accepts allows (4095 bytes: "/a" 2000 times), plus many
  // unrelated records: no recursion per level, and nothing dropped or repeated.
  const chain: string[] = [];
  for (let p = "path:/etc", i = 0; i < 2000; i++) chain.push(p = `${p}/a`);
  const others = Array.from({ length: 50_000 }, (_, i) => `path:/srv/r${i}`);
  const out = order([...chain, ...others]);
  assert.equal(out.length, chain.length + others.length);
  const chainOut = out.filter((k) => k.startsWith("path:/etc"));
  assert.deepEqual(chainOut, [...chain].reverse());
});
