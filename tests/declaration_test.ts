/** Declaration v1: every refusal names its JSON path; nothing is ever skipped. */
import assert from "node:assert/strict";
import { loadConfig } from "../src/config.ts";
import { ALL_OWN_PATHS } from "../packaging/own_paths_by_os.ts";
import { DeclarationRefused } from "../src/declaration/envelope.ts";
import type { ParseOptions } from "../src/declaration/options.ts";
import { canonicalBody, parseDeclaration, parseTrustedDeclaration } from "../src/engine/parse.ts";
import { sha256Hex } from "../src/declaration/canonical.ts";
import { container, directory, file } from "./_declarations.ts";

const dir = await Deno.makeTempDir({ prefix: "nox-decl-" });
await Deno.writeTextFile(`${dir}/host.json`, "{}");
const config = await loadConfig({
  configPath: `${dir}/host.json`,
  env: () => undefined,
  ownPaths: ALL_OWN_PATHS,
});
const options: ParseOptions = {
  managedRoots: config.managedRoots,
  own: config.own,
  origin: "test.json",
};
await Deno.remove(dir, { recursive: true });

const action = {
  type: "action",
  id: "a",
  run: ["/usr/bin/true"],
  verify: ["/usr/bin/test", "-f", "/etc/x"],
};
const doc = (resources: unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({ version: 1, ...extra, resources });

/** Assert the text is refused with a problem at `path` whose message matches. */
async function refused(
  text: string,
  path: string,
  message: RegExp,
  parse = parseDeclaration,
  opts = options,
) {
  let error: unknown;
  try {
    await parse(text, opts);
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof DeclarationRefused, `expected a refusal, got ${error}`);
  const found = error.problems.find((p) => p.path === path && message.test(p.message));
  assert.ok(found, `no problem at ${path} matching ${message}; got:\n${error.message}`);
  assert.match(error.message, /nothing was applied/);
  return error;
}

Deno.test("a valid declaration of every safe kind parses, with a digest", async () => {
  const text = doc([
    { type: "package", id: "wg", name: "wireguard-tools", version: "1.0.20210914-2" },
    directory(),
    file(),
    file({ id: "b", path: "/etc/b.bin", content: undefined, contentBase64: "AAEC" }),
    { type: "service", id: "s", name: "wg-quick@wg0", enabled: true, running: true },
    container({
      mounts: [{ source: "/srv/data", target: "/data", readOnly: true }],
      env: { A_1: "x" },
    }),
  ], { node: "laptop-7", serial: 42 });
  const declaration = await parseDeclaration(text, options);
  assert.equal(declaration.resources.length, 6);
  assert.equal(declaration.node, "laptop-7");
  assert.equal(declaration.serial, 42);
  assert.match(declaration.digest, /^sha256:[0-9a-f]{64}$/);
  assert.equal((await parseDeclaration(text, options)).digest, declaration.digest);
});

Deno.test("unknown version is refused", async () => {
  await refused(JSON.stringify({ version: 2, resources: [] }), "version", /not supported/);
  await refused(JSON.stringify({ version: "1", resources: [] }), "version", /not supported/);
});

Deno.test("unknown type is refused, naming the known ones", async () => {
  await refused(
    doc([{ type: "crontab", id: "x" }]),
    "resources[0].type",
    /unknown type "crontab".*directory, file/,
  );
  await refused(doc([{ id: "x" }]), "resources[0].type", /missing/);
});

Deno.test("unknown fields are refused in the envelope and in resources", async () => {
  await refused(doc([], { extra: true }), "extra", /not a known field/);
  await refused(doc([file({ colour: "red" })]), "resources[0].colour", /not a known field/);
  await refused(
    doc([container({ mounts: [{ source: "/srv/x", target: "/x", rw: true }] })]),
    "resources[0].mounts[0].rw",
    /not a known field/,
  );
});

Deno.test("missing and wrongly typed fields are refused", async () => {
  await refused(JSON.stringify({ version: 1 }), "resources", /missing/);
  await refused(doc([file({ owner: undefined })]), "resources[0].owner", /missing/);
  await refused(doc([file({ mode: 420 })]), "resources[0].mode", /octal string/);
  await refused(
    doc([{ type: "service", id: "s", name: "x", enabled: "yes", running: true }]),
    "resources[0].enabled",
    /expected boolean/,
  );
  await refused(doc([file({ content: undefined })]), "resources[0]", /exactly one of content/);
  await refused(doc([file({ contentBase64: "AA==" })]), "resources[0]", /exactly one of content/);
  await refused(doc(["file"]), "resources[0]", /an object/);
});

Deno.test("duplicate ids are refused", async () => {
  await refused(
    doc([file(), directory({ id: "f" })]),
    "resources[1].id",
    /duplicate id "f".*resources\[0\]/,
  );
});

Deno.test("two resources managing the same thing are refused as a conflict", async () => {
  await refused(
    doc([file(), directory({ id: "d2", path: "/etc/example.conf" })]),
    "resources[1]",
    /conflicts with resources\[0\].*path \/etc\/example.conf/,
  );
  await refused(
    doc([{ type: "package", id: "p1", name: "vim" }, {
      type: "package",
      id: "p2",
      name: "vim",
      version: "9",
    }]),
    "resources[1]",
    /conflicts/,
  );
  await refused(
    doc([
      { type: "service", id: "s1", name: "sshd", enabled: true, running: true },
      { type: "service", id: "s2", name: "sshd.service", enabled: false, running: false },
    ]),
    "resources[1]",
    /conflicts/,
  );
  await refused(doc([container(), container({ id: "c2" })]), "resources[1]", /conflicts/);
});

Deno.test("bad paths are refused: relative, .., NUL, empty, not normalised, control characters", async () => {
  await refused(doc([file({ path: "etc/x" })]), "resources[0].path", /relative/);
  await refused(
    doc([file({ path: "/etc/../root/.ssh/authorized_keys" })]),
    "resources[0].path",
    /"\.\."/,
  );
  await refused(doc([file({ path: "/etc/x\u0000y" })]), "resources[0].path", /NUL/);
  await refused(doc([file({ path: "" })]), "resources[0].path", /empty/);
  await refused(
    doc([file({ path: "/etc/x/" })]),
    "resources[0].path",
    /not normalised; write "\/etc\/x"/,
  );
  await refused(doc([file({ path: "/etc//x" })]), "resources[0].path", /not normalised/);
  await refused(doc([file({ path: "/etc/./x" })]), "resources[0].path", /not normalised/);
  await refused(doc([file({ path: "/etc/x\ny" })]), "resources[0].path", /control character/);
  await refused(doc([file({ path: "/" })]), "resources[0].path", /root directory/);
});

Deno.test("trailing garbage and broken JSON are refused", async () => {
  await refused(doc([]) + " trailing", "", /not valid JSON/);
  await refused(doc([]).slice(0, -1), "", /not valid JSON/);
  await refused(new Uint8Array([0x7b, 0xff, 0x7d]) as unknown as string, "", /not valid JSON/);
});

Deno.test("a mode that is not an octal string is refused", async () => {
  for (const mode of ["644a", "0999", "rw-r--r--", "00644", "", "7"]) {
    await refused(doc([file({ mode })]), "resources[0].mode", /octal string/);
  }
});

Deno.test("owner and group must be a name or a numeric id", async () => {
  await refused(doc([file({ owner: "root; rm -rf /" })]), "resources[0].owner", /user\/group name/);
  await parseDeclaration(doc([file({ owner: "1000", group: "1000" })]), options);
});

Deno.test("file content over the limit is refused, for text and base64", async () => {
  const limits = { maxFileBytes: 8 };
  await refused(
    doc([file({ content: "123456789" })]),
    "resources[0].content",
    /9 bytes, over the limit of 8/,
    parseDeclaration,
    { ...options, limits },
  );
  await refused(
    doc([file({ content: undefined, contentBase64: btoa("123456789") })]),
    "resources[0].content",
    /9 bytes/,
    parseDeclaration,
    { ...options, limits },
  );
  await parseDeclaration(doc([file({ content: "12345678" })]), { ...options, limits });
  await refused(
    doc([file({ content: undefined, contentBase64: "not base64!" })]),
    "resources[0].contentBase64",
    /not valid base64/,
  );
});

Deno.test("contentBase64 is padded standard base64 and nothing else", async () => {
  for (const text of ["", "QQ==", "QUI=", "QUJD", "QUJDRA=="]) {
    const parsed = await parseDeclaration(
      doc([file({ content: undefined, contentBase64: text })]),
      options,
    );
    assert.equal(parsed.resources[0].type, "file");
  }
  // Missing padding, white space (which a decoder would skip), the url alphabet, padding
  // inside, too much padding.
  for (
    const text of [
      "QQ",
      "QQ=",
      "Q Q==",
      "QQ==\n",
      "QUJD\n\n\n\nQUJD",
      "-_==",
      "QQ==QUJD",
      "QUJD====",
    ]
  ) {
    await refused(
      doc([file({ content: undefined, contentBase64: text })]),
      "resources[0].contentBase64",
      /not valid base64/,
    );
  }
});

Deno.test("a declaration over the size or count limit is refused", async () => {
  await refused(doc([file()]), "", /bytes, over the limit of 100 bytes/, parseDeclaration, {
    ...options,
    limits: { maxBytes: 100 },
  });
  await refused(
    doc([file(), directory()]),
    "resources",
    /2 resources, over the limit of 1/,
    parseDeclaration,
    { ...options, limits: { maxResources: 1 } },
  );
});

Deno.test("a path outside the managed roots is refused, naming the roots", async () => {
  await refused(
    doc([file({ path: "/usr/bin/evil" })]),
    "resources[0].path",
    /outside the managed roots \(\/etc, \/srv/,
  );
  await refused(
    doc([file({ path: "/etcetera/x" })]),
    "resources[0].path",
    /outside the managed roots/,
  );
  await refused(
    doc([file({ path: "/root/.bashrc" })]),
    "resources[0].path",
    /outside the managed roots/,
  );
  await refused(
    doc([container({ mounts: [{ source: "/", target: "/host" }] })]),
    "resources[0].mounts[0].source",
    /root directory/,
  );
  await refused(
    doc([container({ mounts: [{ source: "/var/run/docker.sock", target: "/s" }] })]),
    "resources[0].mounts[0].source",
    /outside the managed roots/,
  );
});

Deno.test("the host's own unit, binary, launcher, state directory and config are refused by name", async () => {
  await refused(
    doc([{ type: "service", id: "s", name: "nox-mesh-host", enabled: false, running: false }]),
    "resources[0].name",
    /host's own service/,
  );
  await refused(
    doc([{
      type: "service",
      id: "s",
      name: "nox-mesh-host.service",
      enabled: true,
      running: true,
    }]),
    "resources[0].name",
    /host's own service/,
  );
  for (
    const path of [
      "/usr/local/bin/nox-mesh-host",
      "/usr/local/bin/nox-mesh-host-launch",
      "/etc/systemd/system/nox-mesh-host.service",
      "/etc/systemd/system/nox-mesh-host.service.d/override.conf",
      "/etc/init.d/nox-mesh-host",
      "/etc/conf.d/nox-mesh-host",
      "/var/lib/mesh-host",
      "/var/lib/mesh-host/state.db",
      "/var/lib/mesh-host/known-good",
    ]
  ) {
    await refused(doc([file({ path })]), "resources[0].path", /belongs to the host itself/);
  }
  await refused(
    doc([directory({ path: "/var/lib/mesh-host" })]),
    "resources[0].path",
    /belongs to the host itself/,
  );
  await refused(
    doc([container({ mounts: [{ source: "/var/lib/mesh-host", target: "/s" }] })]),
    "resources[0].mounts[0].source",
    /belongs to the host itself/,
  );
  // The host's own package may be declared: that is how a fleet upgrades the host.
  parseDeclaration(
    doc([{ type: "package", id: "host", name: "nox-mesh-host", version: "0.2.0-1" }]),
    options,
  );
});

Deno.test("the default configuration directory is the host's own", async () => {
  const defaults = await loadConfig({ env: () => undefined, ownPaths: ALL_OWN_PATHS });
  await refused(
    doc([file({ path: "/etc/mesh-host/host.json" })]),
    "resources[0].path",
    /belongs to the host itself/,
    parseDeclaration,
    { ...options, own: defaults.own },
  );
});

Deno.test("action is refused by the safe parse and accepted by the trusted parse", async () => {
  await refused(doc([action]), "resources[0].type", /only from the bundle/);
  const trusted = await parseTrustedDeclaration(doc([action]), options);
  assert.equal(trusted.resources[0].type, "action");
  await refused(
    doc([{ ...action, verify: [] }]),
    "resources[0].verify",
    /at least the program/,
    parseTrustedDeclaration,
  );
  await refused(
    doc([{ ...action, run: ["true"] }]),
    "resources[0].run",
    /absolute/,
    parseTrustedDeclaration,
  );
  await refused(
    doc([{ ...action, verify: undefined }]),
    "resources[0].verify",
    /missing/,
    parseTrustedDeclaration,
  );
});

Deno.test("container images must be pinned by digest; tags are refused", async () => {
  await refused(
    doc([container({ image: "registry:2" })]),
    "resources[0].image",
    /not pinned by digest.*tags are refused/,
  );
  await refused(
    doc([container({ image: `registry:2@sha256:${"A".repeat(64)}` })]),
    "resources[0].image",
    /not pinned/,
  );
  await refused(doc([container({ restart: "sometimes" })]), "resources[0].restart", /expected/);
  await refused(doc([container({ env: { "1BAD": "x" } })]), "resources[0].env.1BAD", /env name/);
});

Deno.test("node ids and serials are checked", async () => {
  await refused(doc([], { node: "Laptop_7" }), "node", /node id/);
  await refused(doc([], { node: "x".repeat(64) }), "node", /node id/);
  await refused(doc([], { serial: -1 }), "serial", />= 0/);
  await refused(doc([], { serial: 1.5 }), "serial", /integer/);
  await refused(doc([], { serial: "7" }), "serial", /expected number/);
});

Deno.test("every problem is reported at once, in document order", async () => {
  const error = await refused(
    doc([file({ path: "relative" }), { type: "nope", id: "n" }, file({ id: "f2", mode: "9" })]),
    "resources[0].path",
    /relative/,
  );
  assert.deepEqual(error.problems.map((p) => p.path), [
    "resources[0].path",
    "resources[1].type",
    "resources[2].mode",
  ]);
});

Deno.test("the canonical text of a parsed declaration is the one its digest is of, for the value and for a copy", async () => {
  const parsed = await parseDeclaration(
    doc([directory(), file()], { node: "node-a", serial: 4 }),
    options,
  );
  const text = canonicalBody(parsed);
  assert.equal(`sha256:${await sha256Hex(text)}`, parsed.digest);
  // A copy (not the parse's value, so made again), with a field the envelope does not have.
  assert.equal(canonicalBody({ ...parsed, extra: true } as typeof parsed), text);
  const { digest: _digest, ...body } = parsed;
  assert.deepEqual(JSON.parse(text), JSON.parse(JSON.stringify(body)));
});
