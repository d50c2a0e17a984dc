/** Detection on this machine, with real programs, compared with what the programs say. */
import assert from "node:assert/strict";
import { detectInit } from "../../os/detect/init.ts";
import { detectGraphical } from "../../os/detect/graphical.ts";
import { detectRuntime } from "../../os/detect/containers.ts";
import { detectPackages } from "../../os/detect/packages.ts";
import { detectOs } from "../../os/detect/os_release.ts";
import { providersFor } from "../../os/mod.ts";
import { detectProfile } from "../../os/detect/mod.ts";
import { runProgram } from "../../os/_run.ts";
import { hostFlags } from "../../lab/lib/host.ts";
import { CAPABILITY_NAMES, type Profile } from "../../src/profile.ts";
import { privatePodman } from "../os/_podman.ts";

const exists = (path: string) => Deno.lstat(path).then(() => true, () => false);

Deno.test("containers: podman that answers `podman info` is working, with its version", async () => {
  await using p = await privatePodman();
  const cap = await detectRuntime("podman", { env: p.env });
  assert.equal(cap.state, "working");
  assert.match(cap.version ?? "", /^\d+\.\d+/);
});

Deno.test("containers: docker is working only if its daemon answered", async () => {
  const cap = await detectRuntime("docker");
  const r = await runProgram(["docker", "version", "--format", "json"]).catch(() => null);
  const answered = r !== null && r.code === 0 && JSON.parse(r.stdout).Server != null;
  assert.equal(cap.state === "working", answered, cap.evidence.join("; "));
  if (!r) assert.equal(cap.state, "absent");
});

Deno.test("init: working only when booted with it and it answered; else present or absent", async () => {
  const cap = await detectInit();
  if (await exists("/run/systemd/system")) {
    assert.ok(cap.state === "working" || cap.state === "running");
    assert.equal(cap.provider, "systemd");
  } else if (await exists("/run/openrc/softlevel")) {
    assert.equal(cap.provider, "openrc");
  } else {
    assert.ok(cap.state === "present" || cap.state === "absent", cap.state);
  }
});

Deno.test("packages: the managers answer a query of their database; the OS's own manager is preferred", async () => {
  const os = await detectOs();
  const cap = await detectPackages(os);
  const answered = async (argv: string[]) => (await runProgram(argv).catch(() => null))?.code === 0;
  const isDebian = os.id === "debian" || os.like.includes("debian");
  if (isDebian && await answered(["dpkg-query", "-W"])) {
    // This machine (Debian 12): dpkg answers and is the OS's own, preferred to a pacman
    // that may be installed beside it.
    assert.equal(cap.provider, "apt", cap.evidence.join("; "));
    assert.equal(cap.state, "working");
    assert.equal(cap.details?.native, true);
    assert.match(cap.evidence[0], /^apt answered a query of its database \(\d+ packages/);
    return;
  }
  if (!await answered(["pacman", "-Q"])) return; // no manager here to compare with
  assert.equal(cap.provider, "pacman");
  assert.equal(cap.state, "working");
  assert.equal(cap.details?.native, os.id === "arch" || os.like.includes("arch"));
});

Deno.test("providers follow the profile: only what it proved working is used", () => {
  const cap = (state: "present" | "working", provider: string) => ({
    state,
    provider,
    evidence: [],
  });
  const profile: Profile = {
    detectedAt: "",
    os: { id: "arch", like: [] },
    architecture: "x86_64",
    capabilities: {
      init: cap("present", "systemd"),
      packages: cap("working", "pacman"),
      containers: cap("working", "podman"),
      graphical: cap("present", "Xorg"),
      network: cap("present", "ip"),
      wireguard: cap("working", "userspace"),
      nftables: cap("present", "nftables"),
      accounts: cap("present", "shadow"),
    },
  };
  const p = providersFor(profile);
  assert.equal(p.packages?.name, "pacman");
  assert.equal(p.services, undefined);
  assert.equal(p.containers?.name, "podman");
  assert.ok(p.commands);
  // WireGuard is used only when proven working, in the mode proven; nftables only when working.
  assert.equal(p.overlay?.mode, "userspace");
  assert.equal(p.firewall, undefined);
  // Account tools only when one answered.
  assert.equal(p.accounts, undefined);
  assert.ok(p.sysctl);
  const alpineBuild = providersFor(profile, { adapters: { packages: ["apk"], containers: [] } });
  assert.equal(alpineBuild.packages, undefined);
  assert.equal(alpineBuild.containers, undefined);

  // pacman on a Debian machine is not the OS's package manager: used only when configured.
  const debian: Profile = { ...profile, os: { id: "debian", like: [] } };
  assert.equal(providersFor(debian).packages, undefined);
  assert.equal(providersFor(debian, { packageManager: "pacman" }).packages?.name, "pacman");
  assert.equal(providersFor(debian, { packageManager: "apk" }).packages, undefined);
  // apt that answered is Debian's own, and Ubuntu's (ID_LIKE=debian); not Arch's.
  const withApt = (os: Profile["os"]): Profile => ({
    ...profile,
    os,
    capabilities: { ...profile.capabilities, packages: cap("working", "apt") },
  });
  assert.equal(providersFor(withApt({ id: "debian", like: [] })).packages?.name, "apt");
  assert.equal(providersFor(withApt({ id: "ubuntu", like: ["debian"] })).packages?.name, "apt");
  assert.equal(providersFor(withApt({ id: "arch", like: [] })).packages, undefined);
  // A name this build does not carry is a configuration error, said as such.
  assert.throws(
    () => providersFor(debian, { packageManager: "dnf" }),
    /packageManager "dnf" is not one this build carries \(pacman, apk, apt\)/,
  );
});

Deno.test("profile --json under the host's own permission set: every capability, nothing refused", async () => {
  const flags = await hostFlags();
  const mod = new URL("../../mod.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, mod, "profile", "--json"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const profile = JSON.parse(text) as Profile;
  assert.deepEqual(Object.keys(profile.capabilities).sort(), [...CAPABILITY_NAMES].sort());
  assert.equal(profile.os.id, (await detectOs()).id);
  assert.doesNotMatch(text, /does not allow running/);
  assert.ok(profile.kernel && profile.hostname, "kernel and hostname via --allow-sys");
  assert.notEqual(profile.capabilities.network.state, "absent");
});

Deno.test("detectProfile on this machine: states are among the four, with evidence", async () => {
  const profile = await detectProfile();
  for (const name of CAPABILITY_NAMES) {
    const cap = profile.capabilities[name];
    assert.ok(["absent", "present", "running", "working"].includes(cap.state), name);
    assert.ok(cap.evidence.length > 0, name);
  }
  assert.notEqual(profile.capabilities.network.state, "working"); // never claimed without traffic
});

Deno.test("graphical: names any local user can make never make a machine graphical; root's socket and logind's sessions do", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxgr-" });
  try {
    const x11 = `${dir}/x11`;
    const sessions = `${dir}/sessions`;
    await Deno.mkdir(x11);
    await Deno.chmod(x11, 0o1777);
    await Deno.mkdir(sessions, { mode: 0o755 });
    // A socket nobody made in a directory everyone may write: said, not counted.
    using _listener = Deno.listen({ transport: "unix", path: `${x11}/X0` });
    await Deno.chown(`${x11}/X0`, 65534, 65534);
    const theirs = await detectGraphical({ x11Dir: x11, sessionsDir: sessions });
    assert.ok(!["running", "working"].includes(theirs.state), JSON.stringify(theirs));
    assert.match(theirs.evidence.join("; "), /X0 is not root's socket: not counted/);
    // The directory itself made by a user first: nothing in it counts.
    await Deno.chown(`${x11}/X0`, 0, 0);
    await Deno.chown(x11, 65534, 65534);
    const made = await detectGraphical({ x11Dir: x11, sessionsDir: sessions });
    assert.ok(!["running", "working"].includes(made.state), JSON.stringify(made));
    assert.match(made.evidence.join("; "), /x11 is not root's: its sockets are not counted/);
    // Root's socket in root's directory: a display server of root's runs.
    await Deno.chown(x11, 0, 0);
    const root = await detectGraphical({ x11Dir: x11, sessionsDir: sessions });
    assert.equal(root.state, "running", JSON.stringify(root));
    // A session file in a directory others may write is not logind's word.
    await Deno.writeTextFile(`${sessions}/c1`, "TYPE=wayland\nSTATE=active\nACTIVE=1\n");
    await Deno.chmod(sessions, 0o777);
    const planted = await detectGraphical({ x11Dir: `${dir}/none`, sessionsDir: sessions });
    assert.notEqual(planted.state, "working", JSON.stringify(planted));
    assert.match(
      planted.evidence.join("; "),
      /sessions is not logind's alone \(others may write it\)/,
    );
    await Deno.chmod(sessions, 0o755);
    const logind = await detectGraphical({ x11Dir: `${dir}/none`, sessionsDir: sessions });
    assert.equal(logind.state, "working", JSON.stringify(logind));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
