/**
 * src/posix_path.ts answers as node:path's posix does: the same string for every call the
 * host makes, on the paths a declaration can hold and on seeded random strings of slashes,
 * dots and names (the parse's checks lean on normalize and dirname).
 */
import assert from "node:assert/strict";
import { posix as node } from "node:path";
import { posix as ours } from "../src/posix_path.ts";

const PIECES = ["/", "//", ".", "..", "...", "a", "b", "é", ".a", "a.", " ", "\\", "x/y", "", "/."];

function random(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
}

function strings(count: number, seed: number): string[] {
  const next = random(seed);
  const out = ["", "/", "//", "///", ".", "..", "/..", "../..", "a/../..", "/etc/x/", "/etc//x"];
  for (let n = 0; n < count; n++) {
    const length = Math.floor(next() * 8);
    out.push(Array.from({ length }, () => PIECES[Math.floor(next() * PIECES.length)]).join(""));
  }
  return out;
}

Deno.test("posix path: dirname, basename and normalize answer as node:path's (40,000 strings)", () => {
  for (const path of strings(40_000, 28)) {
    assert.equal(ours.dirname(path), node.dirname(path), `dirname ${JSON.stringify(path)}`);
    assert.equal(ours.basename(path), node.basename(path), `basename ${JSON.stringify(path)}`);
    assert.equal(ours.normalize(path), node.normalize(path), `normalize ${JSON.stringify(path)}`);
  }
});

Deno.test("posix path: join and resolve answer as node:path's (pairs and triples)", () => {
  const all = strings(3_000, 6);
  for (let i = 0; i < all.length; i++) {
    const a = all[i], b = all[(i * 7 + 3) % all.length], c = all[(i * 13 + 5) % all.length];
    assert.equal(ours.join(a, b), node.join(a, b), `join ${JSON.stringify([a, b])}`);
    assert.equal(ours.join(a, b, c), node.join(a, b, c), `join ${JSON.stringify([a, b, c])}`);
    assert.equal(ours.resolve(a, b), node.resolve(a, b), `resolve ${JSON.stringify([a, b])}`);
    assert.equal(ours.resolve(a), node.resolve(a), `resolve ${JSON.stringify(a)}`);
  }
  assert.equal(ours.join(), node.join());
  assert.equal(ours.resolve(), node.resolve());
});
