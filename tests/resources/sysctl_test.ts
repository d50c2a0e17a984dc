/**
 * The sysctl kind for real, on a per-namespace setting (conntrack's TCP
 * established timeout) inside a network namespace this test makes: applied,
 * read back from the kernel, drift repaired, the value seen before restored
 * when no longer declared; unknown keys and bad values refused.
 */
import assert from "node:assert/strict";
import { checkKey, sysctl } from "../../os/sysctl/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { DeclarationRefused } from "../../src/declaration/envelope.ts";
import { parseDeclaration, parseTrustedDeclaration } from "../../src/engine/parse.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { weakens } from "../../src/resources/sysctl.ts";
import { type Netns, netns } from "./_netns.ts";

const KEY = "net.netfilter.nf_conntrack_tcp_timeout_established";
const PARSE = { managedRoots: ["/etc"], own: { paths: [], services: [] } };

function setting(value: string | number, key = KEY) {
  return { type: "sysctl", id: "conntrack", key, value };
}

async function engine(ns: Netns) {
  return await testEngine({ fs: posixFileSystem(), sysctl: sysctl({ via: ns.via }) });
}

Deno.test({
  name: "sysctl: applied and read back, drift repaired, the original value restored when dropped",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sc");
    await using e = await engine(ns);
    const read = async () => (await ns.must(["sysctl", "-n", KEY])).trim();
    const original = await read();
    assert.notEqual(original, "600");

    const plan = (await e.plan([setting(600)]))[0];
    assert.equal(plan.status, "change");
    assert.deepEqual(plan.changes, [`value ${original} -> 600`]);
    const r = await e.apply([setting(600)]);
    assert.equal(r.outcome, "converged", r.error);
    assert.equal(await read(), "600");
    assert.deepEqual(outcomes(await e.apply([setting("600")])), ["conntrack:unchanged"]);

    // A person changes it: repaired; the value recorded as original stays the first one.
    await ns.must(["sysctl", "-w", `${KEY}=1234`]);
    assert.deepEqual((await e.plan([setting(600)]))[0].changes, ["value 1234 -> 600"]);
    assert.deepEqual(outcomes(await e.apply([setting(600)])), ["conntrack:changed"]);
    assert.equal(await read(), "600");

    const planned = (await e.plan([]))[0];
    assert.equal(planned.status, "remove");
    assert.equal(planned.detail, `would restore ${original}`);
    const released = await e.apply([]);
    assert.deepEqual(outcomes(released), ["conntrack:removed"]);
    assert.equal(released.results[0].detail, `restored to ${original}`);
    assert.equal(await read(), original);
    // The machine's own namespace never changed.
    const outside = new TextDecoder().decode(
      (await new Deno.Command("sysctl", { args: ["-n", KEY], stdout: "piped" }).output()).stdout,
    ).trim();
    assert.equal(outside, original);
  },
});

Deno.test({
  name: "sysctl: values with several words compare as the kernel prints them",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sc2");
    await using e = await engine(ns);
    const key = "net.ipv4.ip_local_port_range";
    const r = await e.apply([setting("40000   50000", key)]);
    assert.equal(r.outcome, "converged", r.error);
    assert.match(await ns.must(["sysctl", "-n", key]), /^40000\s+50000\n$/);
    assert.deepEqual(outcomes(await e.apply([setting("40000 50000", key)])), [
      "conntrack:unchanged",
    ]);
  },
});

Deno.test({
  name: "sysctl: a setting whose name holds a dot (interface a.b) is named by its path, and " +
    "the two spellings of one setting are one resource",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sc4");
    await using e = await engine(ns);
    // An interface whose name holds a dot, as a VLAN's (eth0.100) does.
    await ns.must(["ip", "link", "add", "a.b", "type", "veth", "peer", "name", "vb"]);
    const key = "net/ipv4/conf/a.b/forwarding";
    const read = async () =>
      (await ns.must(["cat", "/proc/sys/net/ipv4/conf/a.b/forwarding"])).trim();
    assert.equal(await read(), "0");
    const r = await e.apply([setting(1, key)]);
    assert.equal(r.outcome, "converged", r.error);
    assert.equal(await read(), "1");
    assert.deepEqual(outcomes(await e.apply([setting(1, key)])), ["conntrack:unchanged"]);
    const released = await e.apply([]);
    assert.equal(released.results[0].detail, "restored to 0");
    assert.equal(await read(), "0");

    // Without a dot in any part, the path is the dotted name: one setting, one resource.
    const both = await parseDeclaration(
      JSON.stringify({
        version: 1,
        resources: [
          { type: "sysctl", id: "a", key: "net.ipv4.ip_forward", value: 1 },
          { type: "sysctl", id: "b", key: "net/ipv4/ip_forward", value: 0 },
        ],
      }),
      PARSE,
    ).then(() => "accepted", (error) => (error as Error).message);
    assert.match(
      both,
      /resources\[1\]: conflicts with resources\[0\]: both manage sysctl net\.ipv4\.ip_forward/,
    );
  },
});

Deno.test({
  name: "sysctl: a key the kernel does not have fails the apply, naming it",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sc3");
    await using e = await engine(ns);
    const r = await e.apply([setting(1, "net.ipv4.no_such_setting")]);
    assert.equal(r.outcome, "failed");
    assert.match(
      r.error ?? "",
      /"net\.ipv4\.no_such_setting" is not a kernel setting on this machine \(nothing at \/proc\/sys\/net\/ipv4\/no_such_setting\)/,
    );
  },
});

Deno.test("sysctl: keys that leave /proc/sys and values with newlines are refused with the JSON path", async () => {
  const refused = async (resource: Record<string, unknown>) => {
    try {
      await parseDeclaration(JSON.stringify({ version: 1, resources: [resource] }), PARSE);
    } catch (error) {
      return (error as Error).message;
    }
    assert.fail(`accepted: ${JSON.stringify(resource)}`);
  };
  for (
    const key of [
      "../../etc/passwd",
      "net/../../etc/passwd",
      "net/ipv4/./ip_forward",
      "net/ipv4/.../x",
      "net//ipv4",
      "/net/ipv4",
      "net/ipv4/",
      "net/ipv4.conf/a b",
      "net..ipv4",
      ".net",
      "net.",
      "",
      "-a", // options of sysctl (procps and busybox): the parse refuses them, not only the adapter
      "-p",
      "-p/etc/sysctl.conf",
      "-w/x",
      "--system",
    ]
  ) {
    assert.match(await refused(setting(1, key)), /resources\[0\]\.key: .* is not a setting name/);
  }
  assert.match(await refused(setting("1\n2")), /resources\[0\]\.value: a value is one line/);
  assert.match(await refused(setting(1.5)), /resources\[0\]\.value/);
  assert.match(await refused(setting("")), /resources\[0\]\.value/);
  // The adapter refuses them as well, whatever the parse let through.
  assert.throws(() => checkKey("-a"), /not a kernel setting name/);
  assert.throws(() => checkKey("net/../x"), /not a kernel setting name/);
  assert.throws(() => checkKey("net/ipv4/.."), /not a kernel setting name/);
  assert.throws(() => checkKey("-w/x"), /not a kernel setting name/);
  await assert.rejects(sysctl().write("net.ipv4.ip_forward", "1\nnet.x=2"), /one line/);
});

/** The problems a parse (safe unless `trusted`) refuses `resources` with, as "path: message". */
async function refusal(
  resources: unknown[],
  options: Record<string, unknown> = {},
  trusted = false,
): Promise<string[]> {
  const text = JSON.stringify({ version: 1, resources });
  try {
    await (trusted ? parseTrustedDeclaration : parseDeclaration)(text, { ...PARSE, ...options });
  } catch (error) {
    if (error instanceof DeclarationRefused) {
      return error.problems.map((p) => `${p.path}: ${p.message}`);
    }
    throw error;
  }
  return [];
}

Deno.test("sysctl: settings that make the kernel run a program as root are refused over the link, named by path", async () => {
  const cases: [string, string | number, string][] = [
    ["kernel.core_pattern", "|/srv/x %p", "resources[0].value"],
    ["kernel/core_pattern", "  |/srv/x %p", "resources[0].value"],
    ["kernel.core_pattern", "@/run/dump.sock", "resources[0].value"],
    ["kernel.modprobe", "/srv/x", "resources[0].key"],
    ["kernel.poweroff_cmd", "/srv/x", "resources[0].key"],
    ["kernel.hotplug", "/srv/x", "resources[0].key"],
    ["kernel.usermodehelper.bset", "4294967295 4294967295", "resources[0].key"],
    ["kernel/usermodehelper/inheritable", "4294967295 4294967295", "resources[0].key"],
    ["fs.binfmt_misc.register", ":x:E::x::/srv/x:C", "resources[0].key"],
  ];
  for (const [key, value, path] of cases) {
    const problems = await refusal([setting(value, key)]);
    assert.equal(problems.length, 1, `${key}: ${problems.join("; ")}`);
    assert.match(
      problems[0],
      new RegExp(
        `^${path.replace(/[[\].]/g, "\\$&")}: .* is refused: .*; a declaration from the ` +
          "link or a file may not make the kernel run programs: declare it in the bundle the host " +
          "carries, or name .* in the permit.sysctls of this machine's host.json$",
      ),
    );
    // The bundle may; so may this machine's host.json.
    assert.deepEqual(await refusal([setting(value, key)], {}, true), [], key);
    const name = key.replaceAll("/", ".");
    assert.deepEqual(
      await refusal([setting(value, key)], { permit: { sysctls: [name], services: [] } }),
      [],
      key,
    );
  }
  // A core pattern that names a file runs nothing.
  assert.deepEqual(await refusal([setting("core.%p", "kernel.core_pattern")]), []);
});

Deno.test("sysctl: values that turn a kernel protection off are refused over the link, named by path", async () => {
  const off: [string, string | number][] = [
    ["kernel.randomize_va_space", 0],
    ["kernel.randomize_va_space", 1],
    ["kernel.kptr_restrict", 0],
    ["kernel.dmesg_restrict", "0"],
    ["fs.suid_dumpable", 2],
    ["fs.suid_dumpable", 1],
    ["fs.protected_symlinks", 0],
    ["fs/protected_hardlinks", 0],
    ["fs.protected_fifos", "0x0"],
    ["fs.protected_regular", "00"],
    ["kernel.yama.ptrace_scope", 0],
    ["kernel.unprivileged_bpf_disabled", 0],
    // What an independent fuzzer found accepted (issue 33).
    ["kernel.perf_event_paranoid", "1"],
    ["vm.mmap_min_addr", 600],
    ["vm.unprivileged_userfaultfd", 1],
    // Not one integer: the kernel would read the first, and the parse cannot know it.
    ["kernel.kptr_restrict", "1 0"],
    ["kernel.kptr_restrict", "one"],
  ];
  for (const [key, value] of off) {
    const problems = await refusal([setting(value, key)]);
    assert.equal(problems.length, 1, `${key} = ${value}: ${problems.join("; ")}`);
    assert.match(
      problems[0],
      /^resources\[0\]\.value: \S+ = .* is refused: .*; a declaration from the link or a file may not turn a kernel protection off/,
    );
    assert.deepEqual(await refusal([setting(value, key)], {}, true), [], `${key} trusted`);
  }
  const on: [string, string | number][] = [
    ["kernel.randomize_va_space", 2],
    ["kernel.kptr_restrict", "0x2"],
    ["fs.suid_dumpable", 0],
    ["fs.protected_regular", 2],
    ["kernel.yama.ptrace_scope", 1],
    ["kernel.unprivileged_bpf_disabled", 2],
    ["kernel.perf_event_paranoid", 3],
    ["vm.mmap_min_addr", 65536],
  ];
  for (const [key, value] of on) assert.deepEqual(await refusal([setting(value, key)]), [], key);
});

Deno.test({
  name: "sysctl: over the link, a hardening setting moved the weaker way from what the kernel " +
    "holds is refused at the check, before anything is written; the bundle and host.json's " +
    "permit may (planned only: this machine's kernel is never weakened here)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using ns = await netns("sch");
    const read = async (key: string) => Number((await ns.must(["sysctl", "-n", key])).trim());
    // A kernel.* setting with no floor of its own at the parse: the family's rule decides.
    const KEY = "kernel.perf_event_max_sample_rate";
    const paranoid = await read(KEY);
    const namespaces = await read("user.max_user_namespaces");
    const lower = setting(paranoid - 1, KEY);
    const more = { ...setting(namespaces + 1, "user.max_user_namespaces"), id: "namespaces" };
    const providers = { fs: posixFileSystem(), sysctl: sysctl({ via: ns.via }) };
    {
      await using link = await testEngine(providers, { trusted: false });
      const lowered = await link.apply([lower]);
      assert.equal(lowered.outcome, "failed");
      assert.match(
        lowered.error!,
        new RegExp(
          `kernel\\.perf_event_max_sample_rate = ${paranoid - 1} is refused: it would lower ` +
            `kernel\\.perf_event_max_sample_rate from ${paranoid} to ${
              paranoid - 1
            }, and .* is a ` +
            "hardening setting \\(kernel\\.\\*, every one of which the host counts as such\\) " +
            "where a higher value is the harder one; a declaration from the link or a file may " +
            "not weaken the kernel\\. declare it in the bundle the host carries, or name " +
            '"kernel\\.perf_event_max_sample_rate" in the permit\\.sysctls of this machine\'s host\\.json',
        ),
      );
      const raised = await link.apply([more]);
      assert.match(
        raised.error!,
        /it would raise user\.max_user_namespaces from \d+ to \d+, .* where a lower value is the harder one/,
      );
      assert.equal((await link.plan([lower]))[0].status, "unknown");
      // Not weaker: accepted (planned).
      assert.equal(
        (await link.plan([setting(paranoid + 1, KEY)]))[0]
          .status,
        "change",
      );
    }
    assert.equal(await read(KEY), paranoid, "nothing written");
    assert.equal(await read("user.max_user_namespaces"), namespaces, "nothing written");
    // The bundle may, and so may a declaration host.json permits it for (planned only).
    await using bundle = await testEngine(providers);
    assert.equal((await bundle.plan([lower]))[0].status, "change");
    await using permitted = await testEngine(providers, {
      trusted: false,
      permit: {
        sysctls: [KEY, "user.max_user_namespaces"],
        services: [],
        groups: [],
        users: [],
      },
    });
    assert.deepEqual((await permitted.plan([lower, more])).map((e) => e.status), [
      "change",
      "change",
    ]);
  },
});

Deno.test("sysctl: which way is weaker, per family (no kernel asked)", () => {
  const cases: [string, string, string, boolean][] = [
    ["kernel.perf_event_paranoid", "3", "1", true],
    ["kernel.kptr_restrict", "1", "2", false],
    ["vm.mmap_min_addr", "65536", "600", true],
    ["fs.protected_regular", "2", "1", true],
    ["fs.suid_dumpable", "0", "2", true],
    ["kernel.sysrq", "0", "1", true],
    ["kernel.sysrq", "176", "0", false],
    ["net.core.bpf_jit_harden", "2", "0", true],
    ["dev.tty.ldisc_autoload", "0", "1", true],
    ["user.max_user_namespaces", "0", "100", true],
    ["kernel.hostname", "a", "b", false],
    ["kernel.printk", "4 4 1 7", "7 4 1 7", false],
    ["net.ipv4.ip_forward", "0", "1", false],
    ["vm.swappiness", "60", "10", false],
  ];
  for (const [name, now, want, weaker] of cases) {
    assert.equal(weakens(name, now, want) !== undefined, weaker, `${name} ${now} -> ${want}`);
  }
});

Deno.test("sysctl: one-way values are refused unless declared permanent, in every parse", async () => {
  const oneWay: [string, string | number][] = [
    ["kernel.modules_disabled", 1],
    ["kernel.kexec_load_disabled", "1"],
    ["kernel.io_uring_disabled", 2],
    ["kernel.yama.ptrace_scope", 3],
    ["kernel.unprivileged_bpf_disabled", "0x1"],
  ];
  for (const [key, value] of oneWay) {
    for (const trusted of [false, true]) {
      const problems = await refusal([setting(value, key)], {}, trusted);
      assert.equal(problems.length, 1, `${key}: ${problems.join("; ")}`);
      assert.match(
        problems[0],
        /^resources\[0\]\.value: .* is one-way: the kernel never lowers it again until it boots .*; add "permanent": true/,
      );
      assert.deepEqual(
        await refusal([{ ...setting(value, key), permanent: true }], {}, trusted),
        [],
        `${key} permanent`,
      );
    }
  }
  // permanent on a value the kernel lowers again would promise a restore it skips.
  const notOneWay: [string, number][] = [["net.ipv4.ip_forward", 1], [
    "kernel.modules_disabled",
    0,
  ]];
  for (const [key, value] of notOneWay) {
    const problems = await refusal([{ ...setting(value, key), permanent: true }]);
    assert.match(
      problems.join("\n"),
      /^resources\[0\]\.permanent: .* is not a one-way value \(those are kernel\.modules_disabled 1, /,
    );
  }
  assert.match(
    (await refusal([setting("1 1", "kernel.modules_disabled")])).join(),
    /resources\[0\]\.value: kernel\.modules_disabled = 1 1: the value of kernel\.modules_disabled is one integer/,
  );
});

Deno.test("sysctl: one setting spelled with dots and slashes is one resource (busybox resolves both)", async () => {
  // What busybox's sysctl does with the mixed spelling, for real, in a namespace of our own.
  await using ns = await netns("scbb");
  await ns.must(["busybox", "sysctl", "-w", "net/ipv4.ip_forward=1"]);
  assert.equal((await ns.must(["cat", "/proc/sys/net/ipv4/ip_forward"])).trim(), "1");

  for (
    const [a, b] of [
      ["net.ipv4.ip_forward", "net/ipv4.ip_forward"],
      ["net/ipv4/ip_forward", "net/ipv4.ip_forward"],
      ["net.ipv4.conf.a.b.forwarding", "net/ipv4/conf/a.b/forwarding"],
    ]
  ) {
    const problems = await refusal([
      { ...setting(1, a), id: "a" },
      { ...setting(0, b), id: "b" },
    ]);
    assert.deepEqual(problems, [
      `resources[1]: conflicts with resources[0]: both manage sysctl ${a.replaceAll("/", ".")}`,
    ]);
  }
  // The guards see through the spelling too.
  assert.match(
    (await refusal([setting(0, "kernel/yama.ptrace_scope")])).join(),
    /resources\[0\]\.value: kernel\.yama\.ptrace_scope = 0 is refused/,
  );
});

Deno.test({
  name:
    "sysctl: a permanent setting is left as it is when released (the real sysctl, on a stand-in file)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    // The setting's file is a file of ours, bound over /proc/sys/kernel/io_uring_disabled in
    // a mount namespace of each sysctl run's own; the run goes ahead only once the bind is
    // seen in place (device and inode), so the kernel's own setting is never written.
    const target = "/proc/sys/kernel/io_uring_disabled";
    const before = await Deno.readTextFile(target).catch(() => undefined);
    if (before === undefined) return; // a kernel without the setting: nothing to stand in for
    const stand = await Deno.makeTempFile({ prefix: "nox-sysctl-" });
    try {
      await Deno.writeTextFile(stand, "0\n");
      const via = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        `mount --bind "$0" ${target} && ` +
        `[ "$(stat -c %d:%i ${target})" = "$(stat -c %d:%i "$0")" ] && exec "$@"`,
        stand,
      ];
      await using e = await testEngine({ fs: posixFileSystem(), sysctl: sysctl({ via }) });
      const declared = { ...setting(2, "kernel.io_uring_disabled"), permanent: true };
      const r = await e.apply([declared]);
      assert.equal(r.outcome, "converged", r.error);
      assert.equal((await Deno.readTextFile(stand)).trim(), "2");
      const planned = (await e.plan([]))[0];
      assert.equal(planned.status, "forget");
      assert.match(planned.detail ?? "", /declared permanent/);
      const released = await e.apply([]);
      assert.deepEqual(outcomes(released), ["conntrack:forgotten"]);
      assert.match(released.results[0].detail ?? "", /declared permanent: .* left as it is/);
      assert.equal((await Deno.readTextFile(stand)).trim(), "2", "released: nothing written");
    } finally {
      await Deno.remove(stand);
      assert.equal(
        await Deno.readTextFile(target),
        before,
        "the kernel's own setting is as it was",
      );
    }
  },
});
