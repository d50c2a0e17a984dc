/**
 * What parses can be applied and may be applied (DESIGN.md §4, §18; issues 9, 10):
 * each rule refused with its JSON path and a message that says what to do.
 */
import assert from "node:assert/strict";
import { loadConfig } from "../src/config.ts";
import { DeclarationRefused, type ParseOptions } from "../src/declaration/envelope.ts";
import { parseDeclaration } from "../src/engine/parse.ts";
import { applyText } from "../src/engine/mod.ts";
import { ALL_OWN_PATHS, OWN_PATHS_BY_OS } from "../packaging/own_paths_by_os.ts";
import { hostOn, modeOf, runHost, scratch } from "./_helpers.ts";
import { container, directory, file } from "./_declarations.ts";

const options: ParseOptions = {
  managedRoots: ["/etc", "/srv", "/opt", "/var/lib", "/var/log", "/usr/local", "/home"],
  own: (await loadConfig({
    env: () => undefined,
    ownPaths: ALL_OWN_PATHS,
  })).own,
  origin: "test.json",
};

const service = (name: string) => ({
  type: "service",
  id: "s",
  name,
  enabled: true,
  running: true,
});
const mount = (source: string, target = "/data") => container({ mounts: [{ source, target }] });
const doc = (resources: unknown[]) => JSON.stringify({ version: 1, resources });

/** Assert the text is refused with a problem at `path` whose message matches. */
async function refused(text: string, path: string, message: RegExp, opts = options) {
  let error: unknown;
  try {
    await parseDeclaration(text, opts);
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof DeclarationRefused, `expected a refusal of ${text}, got ${error}`);
  const found = error.problems.find((p) => p.path === path && message.test(p.message));
  assert.ok(found, `no problem at ${path} matching ${message}; got:\n${error.message}`);
}

const accepted = (text: string, opts = options) => parseDeclaration(text, opts);

Deno.test("a type naming an Object.prototype member is refused as unknown, not a crash", async () => {
  for (const type of ["toString", "valueOf", "constructor", "__proto__", "hasOwnProperty"]) {
    await refused(doc([{ type, id: "x" }]), "resources[0].type", /unknown type .*this host knows/);
  }
});

Deno.test("the command line exits 2 (refused), not 70, on such a type", async () => {
  await using s = await scratch();
  const path = await s.declaration([{ type: "constructor", id: "x" }]);
  const run = await runHost(["apply", path], { env: s.env });
  assert.equal(run.code, 2, run.stderr);
  assert.match(run.stderr, /resources\[0\]\.type: unknown type "constructor"/);
});

Deno.test("JSON with a duplicate key is refused, naming the key and its JSON path", async () => {
  const text = doc([file()]).replace('"mode":"0644"', '"mode":"0644","mode":"0777"');
  await refused(text, "resources[0].mode", /duplicate key "mode".*write each key once/);
  await refused(
    '{"version":1,"resources":[],"resources":[{"type":"action"}]}',
    "resources",
    /duplicate key "resources"/,
  );
  await refused(
    doc([container({ env: { A: "1" } })]).replace('"A":"1"', '"A":"1","\\u0041":"2"'),
    "resources[0].env.A",
    /duplicate key "A"/,
  );
  // The same key in two objects is no duplicate.
  await accepted(doc([file(), file({ id: "g", path: "/etc/other.conf" })]));
});

Deno.test("__proto__ keys are refused, not dropped, however they are spelled", async () => {
  await refused(
    '{"version":1,"__proto__":{},"resources":[]}',
    "__proto__",
    /"__proto__" is not a key/,
  );
  await refused(
    doc([file()]).replace('"id":"f"', '"id":"f","__proto__":{"mode":"4777"}'),
    "resources[0].__proto__",
    /"__proto__" is not a key.*remove it/,
  );
  await refused(
    doc([file()]).replace('"id":"f"', '"id":"f","\\u005f_proto__":null'),
    "resources[0].__proto__",
    /"__proto__" is not a key/,
  );
});

Deno.test("strings that are not well-formed Unicode are refused: paths and content", async () => {
  // As JSON escapes: /etc/a\ud800 and /etc/a\udc00 would be one file on disk (both U+FFFD).
  await refused(
    doc([file({ path: "/etc/a" })]).replace('"/etc/a"', '"/etc/a\\ud800"'),
    "resources[0].path",
    /not well-formed Unicode/,
  );
  await refused(
    doc([file({ content: "x" })]).replace('"content":"x"', '"content":"x\\udc00y"'),
    "resources[0].content",
    /not well-formed Unicode.*write the characters it means/,
  );
  // As a JavaScript string handed to the parse.
  await refused(doc([file({ path: "/etc/b\ud800" })]), "resources[0].path", /well-formed/);
  // A proper pair is fine.
  await accepted(doc([file({ path: "/etc/\ud83d\ude00", content: "\ud83d\ude00" })]));
});

Deno.test("C1 controls and bidirectional controls in paths are refused", async () => {
  await refused(
    doc([file({ path: "/etc/a\u0085b" })]),
    "resources[0].path",
    /control character \(U\+0085/,
  );
  await refused(doc([file({ path: "/etc/a\u009bb" })]), "resources[0].path", /control character/);
  for (const c of ["\u202a", "\u202e", "\u2066", "\u2069"]) {
    await refused(
      doc([file({ path: `/etc/x${c}fdp.conf` })]),
      "resources[0].path",
      /bidirectional control character .*display other than it is/,
    );
  }
  await refused(mountDoc("/srv/a\u202eb"), "resources[0].mounts[0].source", /bidirectional/);
  await refused(mountDoc("/srv/ok", "/x\u0090"), "resources[0].mounts[0].target", /control/);
});

function mountDoc(source: string, target = "/data") {
  return doc([mount(source, target)]);
}

Deno.test("path byte limits: components ≤ 255 bytes, paths ≤ 4095 bytes (UTF-8)", async () => {
  await accepted(doc([file({ path: `/etc/${"a".repeat(255)}` })]));
  await refused(
    doc([file({ path: `/etc/${"a".repeat(256)}` })]),
    "resources[0].path",
    /component of 256 bytes .*limit of 255 bytes per name/,
  );
  // 128 two-byte characters: 128 characters, 256 bytes.
  await refused(doc([file({ path: `/etc/${"é".repeat(128)}` })]), "resources[0].path", /256 bytes/);
  // A 4.2 KB path of multi-byte characters: 2,104 UTF-16 units, 4,225 bytes.
  const long = "/etc" + `/${"é".repeat(100)}`.repeat(21);
  assert.ok(long.length < 4096);
  await refused(doc([file({ path: long })]), "resources[0].path", /4225 bytes long .*4095/);
  await refused(mountDoc(long), "resources[0].mounts[0].source", /bytes long/);
  await refused(
    mountDoc("/srv/x", `/${"z".repeat(256)}`),
    "resources[0].mounts[0].target",
    /256 bytes/,
  );
});

Deno.test("a comma (or a double quote) in a mount source or target is refused at parse", async () => {
  await refused(mountDoc("/srv/a,b"), "resources[0].mounts[0].source", /comma .*--mount/);
  await refused(
    mountDoc("/srv/a", "/data,readonly=false"),
    "resources[0].mounts[0].target",
    /comma/,
  );
  await refused(mountDoc('/srv/a"b'), "resources[0].mounts[0].source", /double quote/);
});

Deno.test("NUL and line breaks in container args and env values are refused", async () => {
  await refused(doc([container({ args: ["ok", "a\u0000b"] })]), "resources[0].args[1]", /NUL/);
  await refused(doc([container({ args: ["a\nb"] })]), "resources[0].args[0]", /line break/);
  await refused(doc([container({ env: { A: "x\u0000" } })]), "resources[0].env.A", /NUL/);
  await refused(doc([container({ env: { A: "x\ny=1" } })]), "resources[0].env.A", /line break/);
  await refused(doc([container({ env: { A: "x\r" } })]), "resources[0].env.A", /line break/);
  await accepted(doc([container({ args: ["--flag", "a b", "tab\there"], env: { A: "" } })]));
});

Deno.test("owner and group ids are 0…4294967294", async () => {
  await accepted(doc([file({ owner: "0", group: "4294967294" })]));
  await refused(
    doc([file({ owner: "4294967295" })]),
    "resources[0].owner",
    /0…4294967294.*leave unchanged/,
  );
  await refused(doc([directory({ group: "9999999999" })]), "resources[0].group", /0…4294967294/);
});

Deno.test("a service names a service, socket, timer or path unit; never a target or the like", async () => {
  for (const name of ["reboot.target", "poweroff.target", "emergency.target"]) {
    await refused(
      doc([service(name)]),
      "resources[0].name",
      /is a \.target unit; .*never a target/,
    );
  }
  for (
    const name of [
      "home.mount",
      "dev-sda.device",
      "swapfile.swap",
      "user.slice",
      "x.scope",
      "a.automount",
    ]
  ) {
    await refused(
      doc([service(name)]),
      "resources[0].name",
      /unit; a service resource names a service/,
    );
  }
  for (
    const name of [
      "sshd",
      "sshd.service",
      "sshd.socket",
      "backup.timer",
      "spool.path",
      "wg-quick@wg0",
      "net.eth0",
    ]
  ) {
    await accepted(doc([service(name)]));
  }
});

Deno.test("every unit of the host's own name is refused", async () => {
  for (
    const name of [
      "nox-mesh-host",
      "nox-mesh-host.service",
      "nox-mesh-host.socket",
      "nox-mesh-host.timer",
      "nox-mesh-host.path",
      "nox-mesh-host@x.service",
      "nox-mesh-host.other",
    ]
  ) {
    await refused(doc([service(name)]), "resources[0].name", /host's own service nox-mesh-host/);
  }
  await accepted(doc([service("nox-mesh-hostile")]));
});

Deno.test("mode: four octal digits with a leading 0; special bits only as fields", async () => {
  for (const mode of ["644", "755"]) {
    await refused(doc([file({ mode })]), "resources[0].mode", /documented form.*"0644"/);
  }
  await refused(
    doc([file({ mode: "4755" })]),
    "resources[0].mode",
    /special bits; write "0755" .*setuid: true/,
  );
  await refused(
    doc([directory({ mode: "7777" })]),
    "resources[0].mode",
    /special bits; write "0777"/,
  );
  await refused(doc([directory({ mode: "1777" })]), "resources[0].mode", /sticky: true/);
  await accepted(doc([file({ mode: "0755", setuid: true, setgid: false })]));
  await accepted(doc([directory({ mode: "0775", setgid: true, sticky: true })]));
  // Only the bits that mean something on each kind.
  await refused(doc([directory({ setuid: true })]), "resources[0].setuid", /not a known field/);
  await refused(doc([file({ sticky: true })]), "resources[0].sticky", /not a known field/);
  await refused(doc([file({ setuid: "yes" })]), "resources[0].setuid", /true or false/);
});

Deno.test("a setgid directory and a setuid file are applied and read back for real", async () => {
  await using s = await scratch();
  using host = await hostOn(s);
  const resources = [
    { ...directory({ path: `${s.root}/shared`, mode: "0775" }), setgid: true, sticky: true },
    { ...file({ path: `${s.root}/shared/tool`, mode: "0750" }), setuid: true },
  ];
  const apply = () => applyText(host, doc(resources), { source: "file", origin: "test" });
  const first = await apply();
  assert.equal(first.outcome, "converged", JSON.stringify(first));
  assert.equal(await modeOf(`${s.root}/shared`), "3775");
  assert.equal(await modeOf(`${s.root}/shared/tool`), "4750");
  // Read back: a second apply finds nothing to change.
  const second = await apply();
  assert.equal(second.outcome, "converged");
  assert.equal(second.counts.changed, 0, JSON.stringify(second));
  // Drift: the bit cleared by hand is set again.
  await Deno.chmod(`${s.root}/shared`, 0o775);
  await apply();
  assert.equal(await modeOf(`${s.root}/shared`), "3775");
});

Deno.test("the host's own files are refused where the init and the shell find them", async () => {
  for (
    const path of [
      "/etc/systemd/system/nox-mesh-.service.d/x.conf",
      "/etc/systemd/system/nox-.service.d/x.conf",
      "/etc/systemd/system/service.d/x.conf",
      "/etc/systemd/system.control/nox-mesh-host.service.d/x.conf",
      "/etc/systemd/system.attached/nox-mesh-host.service",
      "/etc/systemd/system/multi-user.target.wants/nox-mesh-host.service",
      "/etc/systemd/system/graphical.target.requires/nox-mesh-host.service",
      "/etc/systemd/system.conf.d/env.conf",
      "/usr/local/lib/systemd/system/nox-mesh-host.service",
      "/usr/local/lib/systemd/system/nox-mesh-host.service.d/x.conf",
      "/usr/local/sbin/nox-mesh-host",
      "/usr/local/bin/nox-mesh-host",
      "/usr/local/bin/nox-mesh-host-launch",
      "/etc/conf.d/nox-mesh-host.default",
      "/etc/conf.d/nox-mesh-host.boot",
      "/etc/rc.conf",
      "/etc/rc.conf.d/x.conf",
      "/etc/runlevels/boot/nox-mesh-host",
      "/etc/runlevels/mine/nox-mesh-host",
      "/etc/init.d/nox-mesh-host",
      "/usr/local/etc/init.d/nox-mesh-host",
      "/var/log/nox-mesh-host.log",
      "/etc/mesh-host/launch.env",
    ]
  ) {
    await refused(doc([file({ path })]), "resources[0].path", /belongs to the host itself/);
  }
  // Neighbours that are not the host's are fine.
  for (
    const path of [
      "/etc/systemd/system/sshd.service.d/x.conf",
      "/usr/local/bin/nox",
      "/var/lib/mesh",
    ]
  ) {
    await accepted(doc([file({ path })]));
  }
});

Deno.test("managed roots and directories above the host's files are never resources nor mount sources", async () => {
  await refused(
    doc([directory({ path: "/var/lib", mode: "0777" })]),
    "resources[0].path",
    /managed root itself/,
  );
  await refused(doc([file({ path: "/etc" })]), "resources[0].path", /managed root itself/);
  await refused(doc([directory({ path: "/home" })]), "resources[0].path", /managed root itself/);
  for (
    const path of [
      "/etc/systemd/system",
      "/etc/systemd",
      "/usr/local/bin",
      "/etc/conf.d",
      "/etc/runlevels/default",
    ]
  ) {
    await refused(
      doc([directory({ path })]),
      "resources[0].path",
      /contains the host's own .*declare a path below it/,
    );
  }
  await refused(
    doc([file({ path: "/usr/local/lib/systemd" })]),
    "resources[0].path",
    /contains the host's own/,
  );
  for (const source of ["/var/lib", "/etc", "/usr/local"]) {
    await refused(mountDoc(source), "resources[0].mounts[0].source", /managed root itself/);
  }
  for (const source of ["/etc/systemd", "/usr/local/lib"]) {
    await refused(mountDoc(source), "resources[0].mounts[0].source", /contains the host's own/);
  }
  await accepted(doc([mount("/var/lib/registry"), directory({ path: "/usr/local/share/x" })]));
});

Deno.test("each OS refuses its own paths: Arch's list has no OpenRC files, Alpine's no systemd units", async () => {
  const withOs = (os: keyof typeof OWN_PATHS_BY_OS) => ({
    ...options,
    own: { paths: OWN_PATHS_BY_OS[os], services: ["nox-mesh-host"] },
  });
  const openrc = doc([file({ path: "/etc/conf.d/nox-mesh-host" })]);
  const systemd = doc([file({ path: "/etc/systemd/system/nox-mesh-host.service.d/x.conf" })]);
  await accepted(openrc, withOs("arch"));
  await refused(openrc, "resources[0].path", /belongs to the host itself/, withOs("alpine"));
  await refused(systemd, "resources[0].path", /belongs to the host itself/, withOs("arch"));
  await accepted(systemd, withOs("alpine"));
  // The tarball's own files in /usr/local, both ways: a path inside them, and a directory
  // or mount source above them.
  for (
    const path of [
      "/usr/local/lib/nox-mesh-host/deno",
      "/usr/local/lib/nox-mesh-host/nox-mesh-host.js",
      "/usr/local/share/nox-mesh-host/substrate.lock",
      "/usr/local/bin/nox-mesh-host-install-init",
    ]
  ) {
    await refused(doc([file({ path })]), "resources[0].path", /belongs to the host itself/, {
      ...withOs("tarball"),
    });
  }
  await refused(
    doc([directory({ path: "/usr/local/share" })]),
    "resources[0].path",
    /contains the host's own/,
    withOs("tarball"),
  );
  await refused(
    mountDoc("/usr/local/share"),
    "resources[0].mounts[0].source",
    /contains the host's own/,
    withOs("tarball"),
  );
  await accepted(doc([directory({ path: "/usr/local/share/x" })]), withOs("tarball"));
  for (const os of ["arch", "alpine", "tarball"] as const) {
    await refused(
      doc([file({ path: "/usr/local/bin/nox-mesh-host" })]),
      "resources[0].path",
      /host itself/,
      withOs(os),
    );
  }
});

Deno.test("the program run from the checkout refuses every OS's own paths (mod.ts hands them in)", async () => {
  await using s = await scratch();
  const path = await s.declaration([file({ path: "/usr/local/sbin/nox-mesh-host" })]);
  const run = await runHost(["apply", path], { env: s.env });
  assert.equal(run.code, 2, run.stderr);
  assert.match(
    run.stderr,
    /resources\[0\]\.path: \/usr\/local\/sbin\/nox-mesh-host belongs to the host itself/,
  );
});

Deno.test("restartOn names resources declared before it: unknown, later, itself and twice are refused", async () => {
  const svc = (extra: Record<string, unknown>) => ({ ...service("noxlab-hello"), ...extra });
  // Accepted: the file comes first; the container names the file it mounts.
  const ok = await accepted(doc([
    file(),
    svc({ restartOn: ["f"], reload: true }),
    container({ restartOn: ["f", "s"] }),
  ]));
  assert.deepEqual(ok.resources.map((r) => "restartOn" in r ? r.restartOn : undefined), [
    undefined,
    ["f"],
    ["f", "s"],
  ]);
  await refused(
    doc([file(), svc({ restartOn: ["f", "nope"] })]),
    "resources[1].restartOn[1]",
    /names no resource of this declaration \("nope"\)/,
  );
  await refused(
    doc([svc({ restartOn: ["f"] }), file()]),
    "resources[0].restartOn[0]",
    /"f" \(resources\[1\]\), declared after this one; .*declare that resource first/,
  );
  await refused(doc([svc({ restartOn: ["s"] })]), "resources[0].restartOn[0]", /itself/);
  await refused(
    doc([file(), svc({ restartOn: ["f", "f"] })]),
    "resources[1].restartOn[1]",
    /twice/,
  );
  await refused(
    doc([file(), svc({ restartOn: ["bad id"] })]),
    "resources[1].restartOn[0]",
    /an id/,
  );
  await refused(
    doc([file(), container({ restartOn: ["later"] }), directory({ id: "later" })]),
    "resources[1].restartOn[0]",
    /declared after this one/,
  );
  await refused(doc([file(), svc({ reload: "yes" })]), "resources[1].reload", /boolean/);
});
