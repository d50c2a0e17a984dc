/**
 * Signed declarations (DESIGN.md §18): the signature over the exact bytes, by the
 * key the token pinned, is checked before admission; an old token is refused.
 */
import assert from "node:assert/strict";
import {
  createSigningKey,
  SIGNATURE_HEADER,
  signDeclaration,
  verifyDeclaration,
} from "../src/link/signature.ts";
import { META } from "../src/store/meta.ts";
import { TokenError } from "../src/link/errors.ts";
import { decodeToken } from "../src/link/token.ts";
import { admitFromLink } from "../src/engine/admit.ts";
import { hostOn, scratch } from "./_helpers.ts";

const control = createSigningKey();
const stranger = createSigningKey();
const bytes = (d: unknown) => new TextEncoder().encode(JSON.stringify(d));
const declaration = bytes({ version: 1, node: "node-7", serial: 3, resources: [] });

Deno.test("verifyDeclaration: the pinned key's signature of the exact bytes, nothing else", () => {
  const signer = control.getPublicKey();
  const signature = signDeclaration(control, declaration);
  assert.equal(verifyDeclaration(signer, declaration, signature), undefined);

  assert.equal(verifyDeclaration(signer, declaration, undefined)?.reason, "unsigned");
  assert.equal(verifyDeclaration(signer, declaration, "")?.reason, "unsigned");
  assert.match(verifyDeclaration(signer, declaration, undefined)!.message, /no Mesh-Signature/);

  // One byte changed after signing.
  for (const at of [0, 20, declaration.length - 1]) {
    const tampered = declaration.slice();
    tampered[at] ^= 0x01;
    const problem = verifyDeclaration(signer, tampered, signature);
    assert.equal(problem?.reason, "bad-signature", `byte ${at}`);
    assert.match(
      problem!.message,
      new RegExp(`does not verify against the pinned signing key ${signer}`),
    );
  }
  // Signed by another key.
  assert.equal(
    verifyDeclaration(signer, declaration, signDeclaration(stranger, declaration))?.reason,
    "bad-signature",
  );
  // Not a signature at all, or a truncated one.
  assert.equal(verifyDeclaration(signer, declaration, "not base64!")?.reason, "bad-signature");
  assert.equal(
    verifyDeclaration(signer, declaration, signature.slice(0, 40))?.reason,
    "bad-signature",
  );
  assert.equal(SIGNATURE_HEADER, "Mesh-Signature");
});

Deno.test("admission checks the signature first: unsigned, tampered, another key or no pinned key are refused", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  host.store.setMeta(META.node, "node-7");
  const subject = "mesh.decl.node-7";

  // Enrolled with a version 1 token (no pinned key): nothing is admitted.
  const unpinned = await admitFromLink(
    host,
    declaration,
    subject,
    signDeclaration(control, declaration),
  );
  assert.equal(unpinned.verdict, "refused");
  assert.ok(unpinned.verdict === "refused" && unpinned.reason === "unpinned");
  assert.match(unpinned.message, /holds no signing key .* make a new token and enrol again/);

  host.store.setMeta(META.signer, control.getPublicKey());
  const ok = await admitFromLink(host, declaration, subject, signDeclaration(control, declaration));
  assert.deepEqual({ ...ok, digest: undefined, declaration: undefined }, {
    verdict: "apply",
    serial: 3,
    digest: undefined,
    declaration: undefined,
  });
  assert.ok(ok.verdict === "apply" && ok.declaration.serial === 3, "admitted once, parsed");

  const cases: [string, Uint8Array, string | undefined, string][] = [
    ["unsigned", declaration, undefined, "unsigned"],
    ["another key", declaration, signDeclaration(stranger, declaration), "bad-signature"],
    [
      "a changed serial",
      bytes({ version: 1, node: "node-7", serial: 4, resources: [] }),
      signDeclaration(control, declaration),
      "bad-signature",
    ],
  ];
  for (const [what, data, signature, reason] of cases) {
    const verdict = await admitFromLink(host, data, subject, signature);
    assert.equal(verdict.verdict, "refused", what);
    if (verdict.verdict !== "refused") continue;
    assert.equal(verdict.reason, reason, what);
    assert.match(verdict.message, /^mesh\.decl\.node-7 refused, nothing was applied: /, what);
    assert.deepEqual(verdict.problems.map((p) => p.path), ["(signature)"], what);
  }
  // An unsigned declaration that would not even parse is refused for its signature, unparsed.
  const junk = await admitFromLink(host, new TextEncoder().encode("{not json"), subject, undefined);
  assert.ok(junk.verdict === "refused" && junk.reason === "unsigned");
});

Deno.test("a version 1 token (no pinned signing key) is refused: make a new token", () => {
  const old = btoa(JSON.stringify({ v: 1, node: "node-7" })).replace(/=+$/, "");
  assert.throws(() => decodeToken(old), (error: unknown) => {
    assert.ok(error instanceof TokenError);
    assert.equal(error.code, "token.version");
    assert.match(error.message, /version 1, which does not pin the control plane's signing key/);
    assert.match(error.hint ?? "", /make a new token/);
    return true;
  });
});
