/**
 * Signed declarations (DESIGN.md §18, issue 21): a signature of the declaration
 * statement (purpose, node, not-after, bytes) by the pinned key, or by a key the
 * pinned key rotated to, is checked before admission; the serial is pinned per
 * (signing key, node) across re-enrolments; an old token is refused.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { DatabaseSync } from "node:sqlite";
import type { KeyPair } from "@nats-io/nkeys";
import {
  createSigningKey,
  declarationStatement,
  isSignatureProblem,
  NOT_AFTER_SKEW_MS,
  rotationHeader,
  rotationStatement,
  SIGNATURE_HEADER,
  signDeclaration,
  signRotation,
  verifyDeclaration,
} from "../src/link/signature.ts";
import { base64url } from "../src/link/_base64url.ts";
import { META } from "../src/store/meta.ts";
import { MIGRATIONS } from "../src/store/migrations.ts";
import { Store } from "../src/store/store.ts";
import { TokenError } from "../src/link/errors.ts";
import { decodeToken } from "../src/link/token.ts";
import { type Identity, writeIdentity } from "../src/link/identity.ts";
import { type Admission, admitFromLink, recordAdmitted } from "../src/trust/admission.ts";
import type { Engine } from "../src/engine/mod.ts";
import { hostOn, scratch } from "./_helpers.ts";

const control = createSigningKey();
const stranger = createSigningKey();
const bytes = (d: unknown) => new TextEncoder().encode(JSON.stringify(d));
const declaration = bytes({ version: 1, node: "node-7", serial: 3, resources: [] });
const P = control.getPublicKey();

/** `key`'s signature of `statement`, as a `Mesh-Signature` header naming `as`. */
function header(key: KeyPair, statement: Uint8Array, as = key.getPublicKey()): string {
  return `v1 key=${as} sig=${base64url(key.sign(statement))}`;
}

Deno.test("verifyDeclaration: the pinned key's signature of the statement for this node, nothing else", () => {
  const signature = signDeclaration(control, "node-7", declaration);
  assert.match(signature, new RegExp(`^v1 key=${P} sig=[A-Za-z0-9_-]{86}$`));
  assert.deepEqual(verifyDeclaration(P, "node-7", declaration, signature), {
    signer: P,
    path: [P],
  });
  const problem = (...args: Parameters<typeof verifyDeclaration>) => {
    const result = verifyDeclaration(...args);
    return isSignatureProblem(result) ? result : undefined;
  };

  assert.equal(problem(P, "node-7", declaration, undefined)?.reason, "unsigned");
  assert.equal(problem(P, "node-7", declaration, "")?.reason, "unsigned");
  assert.match(problem(P, "node-7", declaration, undefined)!.message, /no Mesh-Signature/);

  // One byte changed after signing.
  for (const at of [0, 20, declaration.length - 1]) {
    const tampered = declaration.slice();
    tampered[at] ^= 0x01;
    const p = problem(P, "node-7", tampered, signature);
    assert.equal(p?.reason, "bad-signature", `byte ${at}`);
    assert.match(p!.message, new RegExp(`does not verify against the pinned signing key ${P}`));
  }
  // Signed for another node: the same bytes, delivered to node-7.
  const forB = signDeclaration(control, "node-b", declaration);
  assert.equal(problem(P, "node-7", declaration, forB)?.reason, "bad-signature");
  assert.equal(problem(P, "node-b", declaration, forB), undefined);
  // Signed for another purpose: the key's rotation statement, or the bare bytes (the
  // format before statements), presented as a declaration's signature.
  const asRotation = header(control, rotationStatement(P, stranger.getPublicKey()));
  assert.equal(problem(P, "node-7", declaration, asRotation)?.reason, "bad-signature");
  const bare = base64url(control.sign(declaration));
  assert.match(problem(P, "node-7", declaration, bare)!.message, /bare signature of the bytes/);
  assert.equal(
    problem(P, "node-7", declaration, header(control, declaration)!)?.reason,
    "bad-signature",
  );
  // Signed by another key, which names itself or claims to be the pinned one.
  assert.match(
    problem(P, "node-7", declaration, signDeclaration(stranger, "node-7", declaration))!.message,
    /signed by O[A-Z2-7]+, not by the pinned signing key .* carries no rotation/,
  );
  const claimed = header(stranger, declarationStatement("node-7", undefined, declaration), P);
  assert.equal(problem(P, "node-7", declaration, claimed)?.reason, "bad-signature");
  // Not a signature header at all, or a malformed one.
  for (
    const bad of [
      "not base64!",
      `v2 key=${P} sig=${signature.split("sig=")[1]}`,
      `v1 key=${P}`,
      `v1 key=${P} sig=${signature.split("sig=")[1].slice(0, 40)}`,
      `${signature} extra=1`,
      `${signature} sig=AAAA`,
      `v1 key=${P} not-after=tomorrow sig=${signature.split("sig=")[1]}`,
    ]
  ) {
    assert.equal(problem(P, "node-7", declaration, bad)?.reason, "bad-signature", bad);
  }
  assert.equal(SIGNATURE_HEADER, "Mesh-Signature");
});

Deno.test("verifyDeclaration: after its not-after (and the clock skew allowed) a declaration is expired; its not-after is signed", () => {
  const now = Date.parse("2030-01-01T00:00:00Z");
  const until = new Date(now - NOT_AFTER_SKEW_MS - 1000);
  const expired = signDeclaration(control, "node-7", declaration, { notAfter: until });
  assert.match(expired, /^v1 key=O\S+ not-after=2029-12-31T23:54:59\.000Z sig=/);
  const result = verifyDeclaration(P, "node-7", declaration, expired, undefined, now);
  assert.ok(isSignatureProblem(result));
  assert.equal(result.reason, "expired");
  assert.match(
    result.message,
    /taken until 2029-12-31T23:54:59\.000Z, and this node's clock reads 2030-01-01T00:00:00\.000Z; if that clock is wrong, set it right/,
  );
  // Within the skew, or later: taken.
  const skewed = signDeclaration(control, "node-7", declaration, {
    notAfter: new Date(now - 1000),
  });
  assert.deepEqual(verifyDeclaration(P, "node-7", declaration, skewed, undefined, now), {
    signer: P,
    path: [P],
    notAfter: new Date(now - 1000).toISOString(),
  });
  assert.deepEqual(
    verifyDeclaration(P, "node-7", declaration, expired, undefined, now - 3600_000),
    {
      signer: P,
      path: [P],
      notAfter: "2029-12-31T23:54:59.000Z",
    },
  );
  // A later not-after written into the header breaks the signature.
  const extended = expired.replace("2029-12-31T23:54:59.000Z", "2031-01-01T00:00:00.000Z");
  const moved = verifyDeclaration(P, "node-7", declaration, extended, undefined, now);
  assert.ok(isSignatureProblem(moved) && moved.reason === "bad-signature");
});

Deno.test("verifyDeclaration: a rotation signed by the pinned key leads to the new key; one signed otherwise is refused", () => {
  const next = createSigningKey();
  const third = createSigningKey();
  const N = next.getPublicKey();
  const T = third.getPublicKey();
  const byNext = signDeclaration(next, "node-7", declaration);
  const P_N = signRotation(control, N);
  const N_T = signRotation(next, T);
  assert.deepEqual(
    verifyDeclaration(P, "node-7", declaration, byNext, rotationHeader([P_N])),
    { signer: N, path: [P, N] },
  );
  // Two rotations, both sent: a node at P follows both, one at N the second only.
  const byThird = signDeclaration(third, "node-7", declaration);
  const both = rotationHeader([P_N, N_T]);
  assert.deepEqual(verifyDeclaration(P, "node-7", declaration, byThird, both), {
    signer: T,
    path: [P, N, T],
  });
  assert.deepEqual(verifyDeclaration(N, "node-7", declaration, byThird, both), {
    signer: T,
    path: [N, T],
  });

  const refused = (pinned: string, signature: string, rotation: string) => {
    const result = verifyDeclaration(pinned, "node-7", declaration, signature, rotation);
    assert.ok(isSignatureProblem(result), `refused: ${rotation}`);
    return result;
  };
  // A rotation from the pinned key signed by another key (the new key itself, a stranger).
  const forged = `${P}:${N}:${base64url(next.sign(rotationStatement(P, N)))}`;
  assert.equal(refused(P, byNext, rotationHeader([forged])).reason, "bad-rotation");
  assert.match(
    refused(P, byNext, rotationHeader([forged])).message,
    /breaks at rotation 1: the rotation from O\S+ to O\S+ is not signed by O/,
  );
  // The pinned key's signature of something else (a declaration statement) as a rotation.
  const otherPurpose = `${P}:${N}:${
    base64url(control.sign(declarationStatement("node-7", undefined, declaration)))
  }`;
  assert.equal(refused(P, byNext, rotationHeader([otherPurpose])).reason, "bad-rotation");
  // A valid rotation from a key this node does not trust.
  assert.match(
    refused(P, byThird, rotationHeader([N_T])).message,
    /names no rotation from the pinned key/,
  );
  // The chain leads elsewhere than the key that signed.
  assert.match(
    refused(P, byThird, rotationHeader([P_N])).message,
    /leads from O\S+ to O\S+, never to O/,
  );
  // After a node moved to N: the old key's declarations are refused, with its own
  // history or without.
  const byOld = signDeclaration(control, "node-7", declaration);
  assert.equal(refused(N, byOld, rotationHeader([P_N])).reason, "bad-rotation");
  assert.equal(
    (verifyDeclaration(N, "node-7", declaration, byOld) as { reason: string }).reason,
    "bad-signature",
  );
  // Malformed rotation headers.
  for (const bad of ["v1", `v2 ${P_N}`, `v1 ${P_N}:x`, `v1 ${P}:${N}`, "v1 " + "x ".repeat(40)]) {
    assert.equal(refused(P, byNext, bad).reason, "bad-rotation", bad);
  }
});

/** An engine on a scratch store enrolled as `node` with signing key `signer`. */
function enrolAs(host: Engine, node: string, signer: string): void {
  const identity: Identity = {
    node,
    brokers: [{ url: "tls://broker:4222" }],
    ca: "PEM",
    trust: { serial: 0, cas: [{ pem: "PEM" }] },
    seedFile: "/nonexistent/node.nk",
    jwtFile: "/nonexistent/node.jwt",
    publicKey: "UNODE",
    enrolledAt: new Date().toISOString(),
    signer,
  };
  writeIdentity(host.store, identity);
}

/** A declaration to `node` with `serial`, signed for it by `key` (with `rotation`, if any). */
function signed(key: KeyPair, node: string, serial: number, rotation?: string[]) {
  const data = bytes({ version: 1, node, serial, resources: [] });
  return {
    data,
    headers: {
      signature: signDeclaration(key, node, data),
      ...(rotation ? { rotation: rotationHeader(rotation) } : {}),
    },
  };
}

async function admitSigned(host: Engine, d: ReturnType<typeof signed>): Promise<Admission> {
  const node = host.store.meta(META.node);
  return await admitFromLink(host, d.data, `mesh.decl.${node}`, d.headers);
}

async function acceptSigned(host: Engine, d: ReturnType<typeof signed>): Promise<Admission> {
  const admission = await admitSigned(host, d);
  assert.ok(admission.verdict === "apply" || admission.verdict === "known", admission.verdict);
  recordAdmitted(host, admission);
  return admission;
}

Deno.test("admission checks the signature first: unsigned, tampered, another key or no pinned key are refused", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  host.store.setMeta(META.node, "node-7");
  const subject = "mesh.decl.node-7";
  const sign = (data: Uint8Array) => ({ signature: signDeclaration(control, "node-7", data) });

  // Enrolled with a version 1 token (no pinned key): nothing is admitted.
  const unpinned = await admitFromLink(host, declaration, subject, sign(declaration));
  assert.equal(unpinned.verdict, "refused");
  assert.ok(unpinned.verdict === "refused" && unpinned.reason === "unpinned");
  assert.match(unpinned.message, /holds no signing key .* make a new token and enrol again/);

  host.store.setMeta(META.signer, P);
  const ok = await admitFromLink(host, declaration, subject, sign(declaration));
  assert.ok(ok.verdict === "apply");
  assert.deepEqual([ok.serial, ok.declaration.serial, ok.signer, ok.node], [3, 3, P, "node-7"]);
  assert.equal(ok.rotatedFrom, undefined);

  const cases: [string, Uint8Array, string | undefined, string][] = [
    ["unsigned", declaration, undefined, "unsigned"],
    [
      "another key",
      declaration,
      signDeclaration(stranger, "node-7", declaration),
      "bad-signature",
    ],
    [
      "a changed serial",
      bytes({ version: 1, node: "node-7", serial: 4, resources: [] }),
      sign(declaration).signature,
      "bad-signature",
    ],
    [
      "signed for another node",
      declaration,
      signDeclaration(control, "node-8", declaration),
      "bad-signature",
    ],
    [
      "expired",
      declaration,
      signDeclaration(control, "node-7", declaration, { notAfter: new Date(Date.now() - 3600e3) }),
      "expired",
    ],
  ];
  for (const [what, data, signature, reason] of cases) {
    const verdict = await admitFromLink(host, data, subject, { signature });
    assert.equal(verdict.verdict, "refused", what);
    if (verdict.verdict !== "refused") continue;
    assert.equal(verdict.reason, reason, what);
    assert.match(verdict.message, /^mesh\.decl\.node-7 refused, nothing was applied: /, what);
    assert.deepEqual(verdict.problems.map((p) => p.path), ["(signature)"], what);
  }
  // An unsigned declaration that would not even parse is refused for its signature, unparsed.
  const junk = await admitFromLink(host, new TextEncoder().encode("{not json"), subject, {});
  assert.ok(junk.verdict === "refused" && junk.reason === "unsigned");
});

Deno.test("a node enrolled again under a name it had before refuses that name's old declarations (serial pinned per key and node)", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  enrolAs(host, "node-a", P);
  const old = signed(control, "node-a", 1);
  await acceptSigned(host, old);
  await acceptSigned(host, signed(control, "node-a", 5));
  // Enrolled as node-b (a serial of its own), then as node-a again with a new token.
  enrolAs(host, "node-b", P);
  assert.equal(host.store.lastLinkSerial(), undefined);
  await acceptSigned(host, signed(control, "node-b", 2));
  enrolAs(host, "node-a", P);
  assert.deepEqual(host.store.lastLinkSerial()?.serial, 5);
  // A broker replays node-a's old, validly signed declaration: refused.
  const replay = await admitSigned(host, old);
  assert.ok(replay.verdict === "refused");
  assert.equal(replay.reason, "replay");
  assert.match(replay.message, /serial 1 is not newer than the last accepted serial 5/);
  assert.equal((await admitSigned(host, signed(control, "node-a", 5))).verdict, "known");
  assert.equal((await admitSigned(host, signed(control, "node-a", 4))).verdict, "refused");
  assert.equal((await admitSigned(host, signed(control, "node-a", 6))).verdict, "apply");

  // Another control plane (another key) has serials of its own for the same name.
  const otherMesh = createSigningKey();
  enrolAs(host, "node-a", otherMesh.getPublicKey());
  assert.equal((await admitSigned(host, signed(otherMesh, "node-a", 1))).verdict, "apply");
  assert.equal((await admitSigned(host, old)).verdict, "refused", "the old key is not trusted");
});

Deno.test("a signed key rotation moves the pinned key (recorded in the store); the old key's declarations are refused after it", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  enrolAs(host, "node-a", P);
  await acceptSigned(host, signed(control, "node-a", 3));

  const next = createSigningKey();
  const N = next.getPublicKey();
  const rotation = signRotation(control, N);
  // A rotation not signed by the pinned key: refused, the pinned key stays.
  const forged = `${P}:${N}:${base64url(next.sign(rotationStatement(P, N)))}`;
  const refused = await admitSigned(host, signed(next, "node-a", 4, [forged]));
  assert.ok(refused.verdict === "refused" && refused.reason === "bad-rotation");
  const byStranger = await admitSigned(
    host,
    signed(next, "node-a", 4, [signRotation(stranger, N)]),
  );
  assert.ok(byStranger.verdict === "refused" && byStranger.reason === "bad-rotation");
  assert.equal(host.store.meta(META.signer), P);

  // Signed by the new key with a serial not above the old key's: a replay still.
  const stale = await admitSigned(host, signed(next, "node-a", 2, [rotation]));
  assert.ok(stale.verdict === "refused" && stale.reason === "replay");
  assert.equal(host.store.meta(META.signer), P, "nothing is recorded for a refusal");

  const rotated = await acceptSigned(host, signed(next, "node-a", 4, [rotation]));
  assert.ok(rotated.verdict === "apply");
  assert.equal(rotated.rotatedFrom, P);
  assert.equal(host.store.meta(META.signer), N);
  assert.equal(JSON.parse(host.store.meta(META.signerRotated)!).from, P);
  assert.deepEqual(host.store.lastLinkSerial()?.serial, 4);

  // The old key's new declarations: refused, with its old rotation or without.
  for (const rot of [undefined, [rotation]]) {
    const old = await admitSigned(host, signed(control, "node-a", 9, rot));
    assert.ok(old.verdict === "refused", JSON.stringify(rot));
    assert.match(old.reason, /^bad-(signature|rotation)$/);
  }
  // The new key's next ones, with or without the rotation (already followed): applied.
  assert.equal((await admitSigned(host, signed(next, "node-a", 5, [rotation]))).verdict, "apply");
  assert.equal((await admitSigned(host, signed(next, "node-a", 5))).verdict, "apply");
});

Deno.test("the same declaration signed again by the rotated-to key is held, and moves the pinned key", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  enrolAs(host, "node-a", P);
  await acceptSigned(host, signed(control, "node-a", 7));
  const next = createSigningKey();
  const again = await acceptSigned(
    host,
    signed(next, "node-a", 7, [signRotation(control, next.getPublicKey())]),
  );
  assert.equal(again.verdict, "known");
  assert.equal(host.store.meta(META.signer), next.getPublicKey());
});

Deno.test("expiry is judged for a declaration to take: the one held stays held after its not-after, a new one is refused", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  enrolAs(host, "node-a", P);
  const data = bytes({ version: 1, node: "node-a", serial: 4, resources: [] });
  const signature = signDeclaration(control, "node-a", data, {
    notAfter: new Date(Date.now() + 3600e3),
  });
  const taken = await admitFromLink(host, data, "mesh.decl.node-a", { signature });
  assert.ok(taken.verdict === "apply");
  recordAdmitted(host, taken);
  const later = Date.now() + 2 * 3600e3;
  const again = await admitFromLink(host, data, "mesh.decl.node-a", { signature }, later);
  assert.equal(
    again.verdict,
    "known",
    "the catch-up of the declaration it has, after its not-after",
  );
  const next = bytes({ version: 1, node: "node-a", serial: 5, resources: [] });
  const expired = await admitFromLink(host, next, "mesh.decl.node-a", {
    signature: signDeclaration(control, "node-a", next, {
      notAfter: new Date(Date.now() + 3600e3),
    }),
  }, later);
  assert.ok(expired.verdict === "refused" && expired.reason === "expired");
  assert.equal(expired.serial, 5);
});

Deno.test("a store of schema 2 keeps its last serial as the pinned key's, for its node", async () => {
  await using s = await scratch();
  await Deno.mkdir(s.stateDir, { recursive: true });
  const db = new DatabaseSync(posix.join(s.stateDir, "state.db"));
  for (const migration of MIGRATIONS.slice(0, 2)) db.exec(migration);
  db.exec(`PRAGMA user_version = 2`);
  const meta = db.prepare(`INSERT INTO meta (key, value) VALUES (?, ?)`);
  for (
    const [k, v] of [["node_id", "node-a"], ["link_signer", P], ["link_serial", "8"], [
      "link_digest",
      "sha256:x",
    ]]
  ) meta.run(k, v);
  db.close();
  using store = Store.open(s.stateDir);
  assert.deepEqual(store.linkSerial(P, "node-a"), { serial: 8, digest: "sha256:x" });
  assert.equal(store.meta("link_serial"), undefined);
  assert.equal(store.meta("link_digest"), undefined);
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
