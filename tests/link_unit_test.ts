/** The link's pure parts: token format, backoff, heartbeat size, launcher files, upgrade detection. */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { createUser } from "@nats-io/nkeys";
import { makeCertificates } from "../lab/lib/certs.ts";
import { backoffDelay } from "../src/link/backoff.ts";
import { classifyLinkError, LinkError, NameMismatch, TokenError } from "../src/link/errors.ts";
import { heartbeatMessage, heldSummary } from "../src/link/messages.ts";
import { decodeToken, encodeToken, type EnrolmentToken } from "../src/link/token.ts";
import { unbase64url } from "../src/link/_base64url.ts";
import { readIdentity, writeIdentity } from "../src/link/identity.ts";
import { META } from "../src/store/meta.ts";
import { jitteredDelay } from "../src/run/timers.ts";
import { MemoryCeiling } from "../src/run/memory_ceiling.ts";
import { createSigningKey } from "../src/link/signature.ts";
import { confirmGood } from "../src/launcher_files.ts";
import { locateProgram, ProgramWatch } from "../src/run/upgrade_watch.ts";
import { applyText } from "../src/engine/mod.ts";
import { hostOn, scratch } from "./_helpers.ts";
import { fileResource } from "./_mesh.ts";

async function sampleToken(): Promise<EnrolmentToken> {
  const dir = await Deno.makeTempDir({ prefix: "noxln-certs-" });
  try {
    const certs = await makeCertificates(dir);
    return {
      v: 4,
      node: "node-7",
      brokers: ["tls://broker.example:4222", "tls://broker-2.example:4222"],
      ca: certs.caPem,
      join: new TextDecoder().decode(createUser().getSeed()),
      signer: createSigningKey().getPublicKey(),
      expires: new Date(Date.now() + 3600_000).toISOString(),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function b64url(value: unknown): string {
  return btoa(JSON.stringify(value)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function refusal(text: string, code: string): void {
  assert.throws(() => decodeToken(text), (error: unknown) => {
    assert.ok(error instanceof TokenError, String(error));
    assert.equal(error.code, code, error.message);
    return true;
  });
}

Deno.test("a token round-trips: base64url JSON, version 4, several brokers, the mesh's CA, no pin", async () => {
  const token = await sampleToken();
  const text = encodeToken(token);
  assert.match(text, /^[A-Za-z0-9_-]+$/);
  const json = JSON.parse(new TextDecoder().decode(unbase64url(text)));
  assert.equal(json.v, 4);
  assert.deepEqual(json.brokers, ["tls://broker.example:4222", "tls://broker-2.example:4222"]);
  assert.equal(json.signer, token.signer);
  assert.deepEqual(decodeToken(text), token);
  assert.deepEqual(decodeToken(`  ${text}\n`), token, "surrounding whitespace is ignored");
});

Deno.test("a token is refused when it is not one, of another version, malformed or expired", async () => {
  const token = await sampleToken();
  refusal("not a token!", "token.format");
  refusal(b64url([1, 2]), "token.version");
  refusal(b64url({ ...token, v: 5 }), "token.version");
  // Versions 2 and 3 pinned each broker's own certificate: refused with what to do and
  // why, not parsed as half a token.
  const { brokers, ...rest } = token;
  const v2 = { ...rest, v: 2, url: brokers[0], pin: "AB:CD" };
  const v3 = { ...rest, v: 3, brokers: brokers.map((url) => ({ url, pin: "AB:CD" })) };
  for (const [old, version] of [[v2, 2], [v3, 3]] as const) {
    assert.throws(() => decodeToken(b64url(old)), (error: unknown) => {
      assert.ok(error instanceof TokenError);
      assert.equal(error.code, "token.version");
      assert.match(
        error.message,
        new RegExp(
          `version ${version}, which pins .* own certificate: every node enrolled with it is cut off when that certificate is renewed`,
        ),
      );
      assert.match(error.hint ?? "", /make a new token .* version 4/);
      return true;
    });
  }
  refusal(b64url({ ...token, brokers: [] }), "token.invalid");
  refusal(b64url({ ...token, brokers: [brokers[0], brokers[0]] }), "token.invalid");
  refusal(
    b64url({ ...token, brokers: Array(17).fill(0).map((_, i) => `tls://b${i}:1`) }),
    "token.invalid",
  );
  refusal(b64url({ ...token, brokers: [{ url: brokers[0] }] }), "token.invalid");
  refusal(b64url({ ...token, url: brokers[0] }), "token.invalid");
  refusal(b64url({ ...token, signer: createUser().getPublicKey() }), "token.invalid");
  const { signer: _, ...withoutSigner } = token;
  refusal(b64url(withoutSigner), "token.invalid");
  refusal(b64url({ ...token, extra: true }), "token.invalid");
  refusal(b64url({ ...token, brokers: [brokers[0], "nats://broker:4222"] }), "token.invalid");
  refusal(
    b64url({ ...token, ca: "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----" }),
    "token.invalid",
  );
  // A server's certificate is no trust anchor: the token must carry a CA.
  const dir = await Deno.makeTempDir({ prefix: "noxln-certs-" });
  try {
    const certs = await makeCertificates(dir);
    assert.throws(
      () => decodeToken(b64url({ ...token, ca: Deno.readTextFileSync(certs.certFile) })),
      /ca: a CA certificate/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  refusal(b64url({ ...token, join: "SAnotaseed" }), "token.invalid");
  refusal(b64url({ ...token, node: "Bad_Node" }), "token.invalid");
  refusal(
    b64url({ ...token, expires: new Date(Date.now() - 1000).toISOString() }),
    "token.expired",
  );
  assert.throws(
    () => decodeToken(b64url({ ...token, brokers: ["nats://broker:4222"], extra: 1 })),
    /brokers\.0: .*must use tls:\/\/[^]*extra: is not a token field|extra: is not a token field[^]*brokers\.0: .*must use tls:\/\//,
  );
});

Deno.test("backoff doubles from 0.5 s to a 30 s cap, with jitter between half and all of each step", () => {
  const low = (n: number) => backoffDelay(n, undefined, () => 0);
  const high = (n: number) => backoffDelay(n, undefined, () => 1);
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7, 8].map(high), [
    500,
    1000,
    2000,
    4000,
    8000,
    16000,
    30000,
    30000,
    30000,
  ]);
  assert.deepEqual([0, 1, 2, 6, 100].map(low), [250, 500, 1000, 15000, 15000]);
  for (let attempt = 0; attempt < 50; attempt++) {
    const d = backoffDelay(attempt);
    assert.ok(d >= low(attempt) && d <= high(attempt), `attempt ${attempt}: ${d}`);
  }
  const spread = new Set(Array.from({ length: 50 }, () => backoffDelay(5)));
  assert.ok(spread.size > 10, "jitter spreads the delays");
});

Deno.test("heartbeat ticks are jittered: 80 % to 120 % of the interval, spread", () => {
  assert.equal(jitteredDelay(30_000, 0.2, () => 0), 24_000);
  assert.equal(jitteredDelay(30_000, 0.2, () => 1), 36_000);
  const delays = Array.from({ length: 200 }, () => jitteredDelay(30_000));
  assert.ok(delays.every((d) => d >= 24_000 && d <= 36_000));
  assert.ok(new Set(delays.map((d) => Math.floor(d / 1000))).size > 8, "spread over the window");
});

Deno.test("the memory ceiling: only above it, only after the minimum uptime, with the numbers", () => {
  let rss = 300 * 1024 * 1024;
  const ceiling = new MemoryCeiling(256, 60_000, () => rss);
  assert.equal(ceiling.exceeded(59_999), undefined, "too young to restart");
  const over = ceiling.exceeded(60_000);
  assert.equal(over?.rssBytes, rss);
  assert.match(over!.message, /resident memory 300 MiB is above the ceiling of 256 MiB/);
  rss = 256 * 1024 * 1024;
  assert.equal(ceiling.exceeded(120_000), undefined, "at the ceiling is not above it");
  const m = ceiling.message("n1", 1, "why");
  assert.deepEqual([m.kind, m.reason, m.ceilingBytes], ["restart", "memory", 256 * 1024 * 1024]);
});

Deno.test("an identity enrolled before token version 4 (a url and pin, or brokers with pins) is read with its pins", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  host.store.setMeta(META.url, "tls://old.example:4222");
  host.store.setMeta(META.pin, "AB:CD");
  host.store.setMeta(META.ca, "PEM");
  host.store.setMeta(META.seedFile, "/x/node.nk");
  host.store.setMeta(META.publicKey, "UABC");
  host.store.setMeta(META.node, "n1");
  assert.deepEqual(readIdentity(host.store)?.brokers, [
    { url: "tls://old.example:4222", pin: "AB:CD" },
  ]);
  const identity = readIdentity(host.store)!;
  assert.deepEqual(identity.trust, { serial: 0, cas: [{ pem: "PEM" }] }, "the token's CA");
  writeIdentity(host.store, {
    ...identity,
    brokers: [{ url: "tls://a:1", pin: "P1" }, { url: "tls://b:2", pin: "P2" }],
  });
  assert.equal(host.store.meta(META.url), undefined);
  assert.deepEqual(readIdentity(host.store)?.brokers, [
    { url: "tls://a:1", pin: "P1" },
    { url: "tls://b:2", pin: "P2" },
  ]);
  writeIdentity(host.store, { ...identity, brokers: [{ url: "tls://c:3" }] });
  assert.deepEqual(readIdentity(host.store)?.brokers, [{ url: "tls://c:3" }], "version 4: no pin");
});

Deno.test("link failures name the side and the reason", () => {
  const target = { url: "tls://broker.lab:4222", publicKey: "UKEY" };
  const cases: [unknown, string, string, RegExp][] = [
    [
      Object.assign(new Error("getaddrinfo ENOTFOUND broker.lab"), { code: "ENOTFOUND" }),
      "link.dns",
      "node",
      /DNS: .*"broker\.lab"/,
    ],
    [
      Object.assign(new Error("connection refused"), { cause: { code: "ECONNREFUSED" } }),
      "link.tcp",
      "network",
      /TCP: broker\.lab:4222 refused/,
    ],
    [
      new NameMismatch("broker.lab", "Host: broker.lab. is not in the cert's altnames: DNS:other"),
      "link.tls-name",
      "broker",
      /certificate of the mesh's CA that does not name broker\.lab .*; refused before sending any credential/,
    ],
    [
      Object.assign(new Error("unable to verify the first certificate"), {
        code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
      }),
      "link.tls-ca",
      "broker",
      /enrolled CA does not vouch/,
    ],
    [
      Object.assign(new Error("Authorization Violation"), { name: "AuthorizationError" }),
      "link.auth",
      "broker",
      /refused this node's key UKEY/,
    ],
    [
      Object.assign(new Error('Permissions Violation for Subscription to "mesh.decl.b"'), {
        name: "PermissionViolationError",
      }),
      "link.permission",
      "broker",
      /refused Subscription to "mesh\.decl\.b"/,
    ],
  ];
  for (const [error, code, side, message] of cases) {
    const classified = classifyLinkError(error, target);
    assert.ok(classified instanceof LinkError);
    assert.equal(classified.code, code);
    assert.equal(classified.side, side);
    assert.match(classified.message, message);
  }
});

Deno.test("a heartbeat carries id, running version and runtime, last serial and outcome, uptime, memory; under 1 KiB without the held list", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const resources = Array.from(
    { length: 300 },
    (_, i) => fileResource(`f${i}`, `${s.root}/f${i}`, `${i}\n`),
  );
  const report = await applyText(
    host,
    JSON.stringify({
      version: 1,
      node: "node-with-a-long-name-0123456789",
      serial: 123456,
      resources,
    }),
    {
      source: "file",
      origin: "test",
    },
  );
  assert.equal(report.outcome, "converged");
  const held = heldSummary(host.store);
  const facts = {
    startedAt: performance.now() - 5000,
    serial: 123456,
    nextDriftAt: new Date().toISOString(),
  };
  const beat = heartbeatMessage("node-with-a-long-name-0123456789", host.store, facts, held, false);
  const size = new TextEncoder().encode(JSON.stringify(beat)).length;
  assert.ok(size < 1024, `heartbeat is ${size} bytes`);
  assert.equal(beat.node, "node-with-a-long-name-0123456789");
  assert.equal(beat.version, (await import("../src/version.ts")).VERSION);
  assert.equal(beat.deno, Deno.version.deno, "the runtime it runs on");
  assert.deepEqual(beat.last && { serial: beat.last.serial, outcome: beat.last.outcome }, {
    serial: 123456,
    outcome: "converged",
  });
  assert.ok(beat.uptimeS >= 4);
  assert.ok(beat.rssBytes > 1_000_000);
  assert.equal(beat.held.count, 300);
  assert.equal(beat.heldList, undefined);
  const withList = heartbeatMessage("n", host.store, facts, held, true);
  assert.equal(withList.heldList?.length, 300);
  assert.deepEqual(withList.heldList?.[0], [`path:${s.root}/f0`, held.list[0][1]]);
});

Deno.test("known-good gets the running version atomically and the failure counter is cleared", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxln-state-" });
  try {
    await Deno.writeTextFile(posix.join(dir, "failures"), "2\n");
    await Deno.writeTextFile(posix.join(dir, "known-good"), "0.0.9\n");
    await confirmGood(dir, "1.2.3");
    assert.equal(await Deno.readTextFile(posix.join(dir, "known-good")), "1.2.3\n");
    await assert.rejects(Deno.stat(posix.join(dir, "failures")), Deno.errors.NotFound);
    await confirmGood(dir, "1.2.3"); // no counter: still fine
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["known-good"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the program file counts as replaced after rename-over, rewrite or removal, never when untouched", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxln-prog-" });
  try {
    const path = posix.join(dir, "host.js");
    await Deno.writeTextFile(path, "// v1\n");
    const watch = await ProgramWatch.of(path, "bundled");
    for (let i = 0; i < 20; i++) {
      await Deno.readTextFile(path);
      assert.equal(await watch.changed(), undefined);
    }
    await Deno.writeTextFile(`${path}.new`, "// v1\n"); // same size, same content, new inode
    await Deno.rename(`${path}.new`, path);
    assert.match(String(await watch.changed()), /replaced/);

    const second = await ProgramWatch.of(path, "bundled");
    await Deno.writeTextFile(path, "// version 2, longer\n");
    assert.match(String(await second.changed()), /changed size|modified/);
    await Deno.remove(path);
    assert.match(String(await second.changed()), /removed/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the bundled program's parts beside its entry count too: one replaced, removed or added is a change; reading them is not", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxln-parts-" });
  try {
    const entry = posix.join(dir, "nox-mesh-host.js");
    const part = posix.join(dir, "chunk-ABCDEFGH.js");
    await Deno.writeTextFile(entry, 'import("./chunk-ABCDEFGH.js");\n');
    await Deno.writeTextFile(part, "// part v1\n");
    await Deno.writeTextFile(posix.join(dir, "state.db"), "not a part\n");
    const watch = await ProgramWatch.of(entry, "bundled");
    for (let i = 0; i < 5; i++) {
      await Deno.readTextFile(part);
      await Deno.writeTextFile(posix.join(dir, "state.db"), `still not a part ${i}\n`);
      assert.equal(await watch.changed(), undefined);
    }
    // The package manager renames a new part over the old one; the entry untouched.
    await Deno.writeTextFile(`${part}.new`, "// part v1\n");
    await Deno.rename(`${part}.new`, part);
    assert.match(String(await watch.changed()), /parts of the program beside .* changed/);

    const second = await ProgramWatch.of(entry, "bundled");
    await Deno.remove(part);
    assert.match(String(await second.changed()), /parts of the program/);
    const third = await ProgramWatch.of(entry, "bundled");
    await Deno.writeTextFile(posix.join(dir, "loop-ZYXWVUTS.js"), "// a new part\n");
    assert.match(String(await third.changed()), /parts of the program/);
    // The source form has no parts: a file of that shape beside it is nothing to it.
    const source = await ProgramWatch.of(entry, "source");
    await Deno.writeTextFile(posix.join(dir, "chunk-QRSTUVWX.js"), "// beside a source\n");
    assert.equal(await source.changed(), undefined);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the program file is the bundle or source in those forms and the executable when compiled", () => {
  assert.deepEqual(
    locateProgram("file:///usr/lib/nox-mesh-host/nox-mesh-host.js", () => "/usr/bin/deno"),
    {
      path: "/usr/lib/nox-mesh-host/nox-mesh-host.js",
      form: "bundled",
    },
  );
  assert.deepEqual(locateProgram("file:///src/mod.ts", () => "/usr/bin/deno"), {
    path: "/src/mod.ts",
    form: "source",
  });
  assert.deepEqual(
    locateProgram("file:///tmp/deno-compile-nox-mesh-host/mod.ts", () => "/usr/bin/nox-mesh-host"),
    { path: "/usr/bin/nox-mesh-host", form: "compiled" },
  );
  assert.equal(locateProgram("https://example.com/mod.ts"), undefined);
});

Deno.test("the stand-in control plane runs with the same explicit flags from the task and the lab (never -A)", async () => {
  const { MESH_FLAGS } = await import("../lab/mesh_steps/link_steps.ts");
  const config = JSON.parse(await Deno.readTextFile(new URL("../deno.json", import.meta.url)));
  const task = (config.tasks.mesh as string).split(/\s+/).filter((w) => w.startsWith("--"));
  assert.deepEqual(task, MESH_FLAGS);
  assert.ok(!task.some((f) => f === "-A" || f === "--allow-all"));
});
