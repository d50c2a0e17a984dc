/**
 * The host itself, installed in lab machines from its real package (built from
 * this checkout; systemd: the .deb via apt, or the Arch package via pacman on the
 * Arch-like machine; others: the tarball) and running under that package's permission
 * set: packages through pacman on the Arch-like machine (apt's are tests/os/debian_apt_test.ts
 * and scenario debian-install), and the profile each flavour of machine reports.
 */
import assert from "node:assert/strict";
import { Lab } from "../lab/lib/mod.ts";
import type { Machine } from "../lab/lib/machine.ts";
import { hostCommand } from "../lab/lib/host.ts";
import type { Profile } from "../src/profile.ts";
import { CAN_RAISE, machineTest } from "./os/_machine.ts";

const HELLO = "noxlab-hello";

async function host(m: Machine, args: string[], input?: string) {
  const r = await m.exec([hostCommand(m), ...args], { input });
  try {
    return { code: r.code, json: JSON.parse(r.stdout), stderr: r.stderr };
  } catch {
    throw new Error(`no JSON from ${args.join(" ")}: exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  }
}

/** `apply --json -` with the declaration on stdin (the set does not let the host read /root). */
function applyJson(m: Machine, resources: unknown[]) {
  return host(m, ["apply", "--json", "-"], JSON.stringify({ version: 1, resources }));
}

const installed = async (m: Machine) =>
  (await m.exec(["pacman", "-Q", HELLO])).stdout.trim().split(" ")[1];

Deno.test({
  name: machineTest("host in the Arch-like machine: pacman installs, pins, up/downgrades, forgets"),
  ignore: !CAN_RAISE,
  async fn(t) {
    await using lab = await Lab.start({ prefix: "noxad" });
    const m = await lab.raise({
      name: "arch1",
      flavour: "systemd",
      hostFrom: "pacman",
      network: false,
    });
    await lab.installHost(m);
    const pkg = (version?: string) => ({
      type: "package",
      id: "hello",
      name: HELLO,
      ...(version ? { version } : {}),
    });
    await t.step(
      "installed from the lab repository (the stale index is refreshed once)",
      async () => {
        const r = await applyJson(m, [pkg()]);
        assert.equal(r.json.outcome, "converged", JSON.stringify(r.json));
        assert.equal(await installed(m), "1.1-1");
        assert.equal((await applyJson(m, [pkg()])).json.counts.unchanged, 1);
      },
    );
    await t.step(
      "downgraded to an exact version from a package file in pacman's cache",
      async () => {
        await m.exec(["cp", `/lab/repo/${HELLO}-1.0-1-any.pkg.tar.gz`, "/var/cache/pacman/pkg/"], {
          check: true,
        });
        const r = await applyJson(m, [pkg("1.0-1")]);
        assert.equal(r.json.outcome, "converged", JSON.stringify(r.json));
        assert.deepEqual(r.json.results[0].changes, ["version 1.1-1 → 1.0-1"]);
        assert.equal(await installed(m), "1.0-1");
        assert.equal((await m.exec([HELLO])).stdout.trim(), `${HELLO} 1.0-1`);
      },
    );
    await t.step("upgraded to an exact version from the repository", async () => {
      const r = await applyJson(m, [pkg("1.1-1")]);
      assert.equal(r.json.outcome, "converged", JSON.stringify(r.json));
      assert.equal(await installed(m), "1.1-1");
    });
    await t.step("no longer declared: forgotten, still installed", async () => {
      const r = await applyJson(m, []);
      assert.deepEqual(r.json.results.map((x: { outcome: string }) => x.outcome), ["forgotten"]);
      assert.equal(await installed(m), "1.1-1");
    });
  },
});

Deno.test({
  name: machineTest("profile in lab machines: systemd, OpenRC and plain report what they have"),
  ignore: !CAN_RAISE,
  async fn(t) {
    await using lab = await Lab.start({ prefix: "noxad" });
    const [sd, rc, plain] = await Promise.all([
      lab.raise({ name: "sd", flavour: "systemd" }),
      lab.raise({ name: "rc", flavour: "openrc" }),
      lab.raise({ name: "plain", flavour: "plain", network: false }),
    ]);
    await Promise.all([sd, rc, plain].map((m) => lab.installHost(m)));
    const profileOf = async (m: Machine) => (await host(m, ["profile", "--json"])).json as Profile;
    await t.step(
      "systemd machine (Debian): systemd and apt working, podman answers, on the lab net",
      async () => {
        const p = await profileOf(sd);
        assert.equal(p.os.id, "debian");
        assert.equal(p.hostname, "sd");
        assert.deepEqual([p.capabilities.init.state, p.capabilities.init.provider], [
          "working",
          "systemd",
        ]);
        assert.deepEqual([p.capabilities.packages.state, p.capabilities.packages.provider], [
          "working",
          "apt",
        ]);
        assert.deepEqual(
          [p.capabilities.containers.state, p.capabilities.containers.provider],
          ["working", "podman"],
        );
        assert.equal(p.capabilities.graphical.state, "absent");
        const net = p.capabilities.network;
        const addresses = JSON.stringify(net.details?.interfaces);
        assert.ok(addresses.includes(sd.address!), addresses);
        assert.equal(net.details?.position, net.state === "running" ? "private" : "isolated");
      },
    );
    await t.step(
      "OpenRC machine: OpenRC working (it answered); apt present, Debian's own, which the tarball does not run",
      async () => {
        const p = await profileOf(rc);
        assert.deepEqual([p.capabilities.init.state, p.capabilities.init.provider], [
          "working",
          "openrc",
        ]);
        // The tarball carries no apt provider and may not run dpkg-query: present, not working.
        assert.deepEqual([p.capabilities.packages.state, p.capabilities.packages.provider], [
          "present",
          "apt",
        ]);
        const evidence = p.capabilities.packages.evidence.join(" ");
        assert.match(evidence, /apt is installed; this build does not run it/);
        assert.match(evidence, /apt is debian's own package manager/);
      },
    );
    await t.step("plain machine: no init system running, no network but loopback", async () => {
      const p = await profileOf(plain);
      assert.ok(
        ["present", "absent"].includes(p.capabilities.init.state),
        p.capabilities.init.state,
      );
      assert.equal(p.capabilities.network.state, "absent");
    });
  },
});
