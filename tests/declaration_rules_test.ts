/**
 * What parses can be applied and may be applied (DESIGN.md §4, §18; issues 9, 10):
 * each rule refused with its JSON path and a message that says what to do.
 */
import assert from "node:assert/strict";
import { loadConfig } from "../src/config.ts";
import { DeclarationRefused } from "../src/declaration/envelope.ts";
import type { ParseOptions } from "../src/declaration/options.ts";
import { parseDeclaration, parseTrustedDeclaration } from "../src/engine/parse.ts";
import { admit, applyText } from "../src/engine/mod.ts";
import { ALL_OWN_PATHS, OWN_PATHS_BY_OS } from "../packaging/own_paths_by_os.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { hostOn, modeOf, runHost, scratch } from "./_helpers.ts";
import { container, directory, file } from "./_declarations.ts";
import { outcomes, testEngine } from "./_engine.ts";
import { privatePodman, SERVE } from "./os/_podman.ts";

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
  // A target that stops the node says so (the one list of service.ts, both inits).
  for (
    const [name, does] of [
      ["reboot.target", "reboots the node"],
      ["poweroff.target", "powers the node off"],
      ["emergency.target", "isolates the node in emergency mode"],
    ]
  ) {
    await refused(
      doc([service(name)]),
      "resources[0].name",
      new RegExp(`is a \\.target unit \\(it ${does}.*\\); .*never a target`),
    );
  }
  await refused(doc([service("multi-user.target")]), "resources[0].name", /unit; a service/);
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
  // Writable by root alone (a directory its group may write, root's group too, is one the
  // host does not act in: docs/trust.md).
  const resources = [
    { ...directory({ path: `${s.root}/shared`, mode: "0755" }), setgid: true, sticky: true },
    { ...file({ path: `${s.root}/shared/tool`, mode: "0750" }), setuid: true },
  ];
  const apply = () => applyText(host, doc(resources), { source: "file", origin: "test" });
  const first = await apply();
  assert.equal(first.outcome, "converged", JSON.stringify(first));
  assert.equal(await modeOf(`${s.root}/shared`), "3755");
  assert.equal(await modeOf(`${s.root}/shared/tool`), "4750");
  // Read back: a second apply finds nothing to change.
  const second = await apply();
  assert.equal(second.outcome, "converged");
  assert.equal(second.counts.changed, 0, JSON.stringify(second));
  // Drift: the bit cleared by hand is set again.
  await Deno.chmod(`${s.root}/shared`, 0o755);
  await apply();
  assert.equal(await modeOf(`${s.root}/shared`), "3755");
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

Deno.test("services that reboot, power off or isolate the node are refused started or enabled over the link (both inits)", async () => {
  const names = [
    "systemd-reboot.service",
    "systemd-kexec.service",
    "systemd-poweroff",
    "systemd-halt.service",
    "systemd-soft-reboot.service",
    "systemd-suspend.service",
    "emergency.service",
    "rescue.service",
    "rescue.socket",
    "debug-shell.service",
    "killprocs",
    "mount-ro",
    "savecache",
    "killprocs.x",
  ];
  for (const name of names) {
    for (const [enabled, running, field] of [[false, true, "running"], [true, false, "enabled"]]) {
      await refused(
        doc([{ ...service(name), enabled, running }]),
        `resources[0].${field}`,
        /"[^"]+" (reboots|restarts|powers|halts|suspends|isolates|opens|\(OpenRC\)).*; a declaration from the link or a file may not start or enable it .*declare it in the bundle the host carries, or name "[^"]+" in the permit\.services of this machine's host\.json/,
      );
    }
    // Stopped and disabled: nothing happens to the node.
    await accepted(doc([{ ...service(name), enabled: false, running: false }]));
    // The bundle may; so may a machine whose host.json names the service.
    await parseTrustedDeclaration(doc([service(name)]), options);
    await accepted(doc([service(name)]), {
      ...options,
      permit: { sysctls: [], services: [name.split(/[.@]/)[0]], groups: [], users: [] },
    });
  }
  for (const name of ["sshd", "reboot-notifier.service", "rescue-tools", "system-reboot"]) {
    await accepted(doc([service(name)]));
  }
});

Deno.test("host.json's permit: what it names is accepted from a file on this machine, nothing else; unknown names are refused", async () => {
  const core = { type: "sysctl", id: "core", key: "kernel.core_pattern", value: "|/srv/dump %p" };
  {
    await using s = await scratch();
    await using host = await hostOn(s);
    await assert.rejects(
      admit(host, doc([core]), { source: "file", origin: "core.json" }),
      /resources\[0\]\.value: kernel\.core_pattern = \|\/srv\/dump %p is refused/,
    );
  }
  {
    await using s = await scratch({
      permit: { sysctls: ["kernel/core_pattern"], services: ["systemd-reboot.service"] },
    });
    await using host = await hostOn(s);
    await admit(host, doc([core, service("systemd-reboot")]), { source: "file", origin: "x" });
    // Only what it names.
    await assert.rejects(
      admit(host, doc([{ ...core, key: "kernel.modprobe", value: "/srv/x" }]), {
        source: "file",
        origin: "x",
      }),
      /resources\[0\]\.key: kernel\.modprobe is refused/,
    );
  }
  // A name the parse never refuses is a mistake in host.json, said at once (exit 78).
  for (
    const [permit, says] of [
      [
        { sysctls: ["net.ipv4.ip_forward"] },
        /permit\.sysctls\.0: "net\.ipv4\.ip_forward" is not a kernel setting the safe parse refuses .* nothing to permit/,
      ],
      [{ groups: ["video"] }, /permit\.groups\.0: "video" is not a group the safe parse refuses/],
      [
        { groups: ["root"] },
        /permit\.groups\.0: "root" is not a group .*root's own is never given/,
      ],
      [{ users: ["root"] }, /permit\.users\.0: "root" is not an account a declaration may adopt/],
    ] as const
  ) {
    await using s = await scratch({ permit });
    const run = await runHost(["apply", await s.declaration([])], { env: s.env });
    assert.equal(run.code, 78, run.stderr);
    assert.match(run.stderr, says);
  }
  // Any setting of the hardening families may be permitted (the check refuses lowering them).
  await using s = await scratch({
    permit: {
      sysctls: ["kernel.perf_event_max_sample_rate"],
      groups: ["docker"],
      users: ["postgres"],
    },
  });
  assert.equal((await runHost(["apply", await s.declaration([])], { env: s.env })).code, 0);
});

Deno.test("env names that are Object.prototype's (constructor, prototype, valueOf) are kept, not dropped", async () => {
  const env = { constructor: "x", prototype: "y", valueOf: "z", hasOwnProperty: "w", A: "1" };
  const parsed = await accepted(doc([container({ env })]));
  const kept = (parsed.resources[0] as { env: Record<string, string> }).env;
  assert.deepEqual(Object.entries(kept), Object.entries(env));
  // The digest covers every name: it is not the digest of the shortened map.
  const shortened = await accepted(
    doc([container({ env: { valueOf: "z", hasOwnProperty: "w", A: "1" } })]),
  );
  assert.notEqual(parsed.digest, shortened.digest);
  // Still checked, each by its JSON path.
  await refused(
    doc([container({ env: { constructor: "a\nb" } })]),
    "resources[0].env.constructor",
    /line break/,
  );
  await refused(
    doc([container({ env: { "bad-name": "x" } })]),
    "resources[0].env.bad-name",
    /env name/,
  );
  await refused(doc([container({ env: [] })]), "resources[0].env", /object of names and values/);
});

Deno.test({
  name: "env names that are Object.prototype's reach the container's process (podman)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using p = await privatePodman();
    await using engine = await testEngine({ fs: posixFileSystem(), containers: p.runtime });
    const r = {
      ...container({ name: "noxad-env", image: p.image, args: SERVE }),
      env: { constructor: "x", prototype: "y" },
    };
    const applied = await engine.apply([r]);
    assert.equal(applied.outcome, "converged", applied.error);
    const env = await p.podman(
      "container",
      "inspect",
      "--format",
      "{{json .Config.Env}}",
      "noxad-env",
    );
    assert.ok(JSON.parse(env).includes("constructor=x"), env);
    assert.ok(JSON.parse(env).includes("prototype=y"), env);
    assert.deepEqual(outcomes(await engine.apply([r])), ["c:unchanged"]);
  },
});

Deno.test("a file by reference whose size and digest cannot both hold is refused (size 0 is the empty digest)", async () => {
  const ref = (contentSha256: string, size: number) => {
    const { content: _, ...rest } = file();
    return { ...rest, contentSha256, size };
  };
  const EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  await refused(
    doc([ref("a".repeat(64), 0)]),
    "resources[0].contentSha256",
    new RegExp(
      `size 0 is the empty content, whose SHA-256 is ${EMPTY}, not a{64}: no content matches both`,
    ),
  );
  await refused(
    doc([ref(EMPTY, 5)]),
    "resources[0].size",
    /is the SHA-256 of the empty content, which is 0 bytes, not 5/,
  );
  await accepted(doc([ref(EMPTY, 0)]));
  await accepted(doc([ref("a".repeat(64), 5)]));
});

Deno.test("JSON nested deeper than a declaration needs, or an object of more keys, is refused before it is parsed", async () => {
  const deep = `{"version":1,"resources":[{"type":"file","id":"f","content":${"[".repeat(65)}${
    "]".repeat(65)
  }}]}`;
  await refused(deep, "", /nests objects and arrays deeper than 64 levels/);
  const env = Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`E${i}`, "x"]));
  await refused(doc([container({ env })]), "", /an object of more than 10000 keys/);
  // Colons and brackets inside strings are text, not structure.
  await accepted(doc([file({ content: "[".repeat(100) + ":".repeat(20_000) })]));
  delete env.E10000;
  await accepted(doc([container({ env })]));
});

Deno.test("a refusal lists at most 1000 problems and counts the rest", async () => {
  const many = Array.from({ length: 3000 }, (_, i) => ({ ...service(`s${i}`), id: "same" }));
  let error: unknown;
  try {
    await parseDeclaration(doc(many), options);
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof DeclarationRefused);
  assert.equal(error.problems.length, 1000);
  assert.equal(error.omitted, 1999);
  assert.equal(error.problems[0].path, "resources[1].id");
  assert.match(error.message, /… and 2979 more$/);
});
