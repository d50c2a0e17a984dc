// The launcher's apt path (launcher/pkg/apt.sh) tested as a program, inside a lab machine
// with the real apt and dpkg of Debian 12: the stand-in host packaged as .debs in a signed
// repository that apt copies into its cache (a copy: source, as it downloads from an
// http: one), the launcher and its include installed where the Debian package puts them.
import assert from "node:assert/strict";
import { join } from "node:path";
import { APT_KEYRING, aptKeyring, buildDeb, signedAptRepo } from "../lab/lib/apt_repo.ts";
import type { Machine } from "../lab/lib/machine.ts";
import { CAN_RAISE, machineTest, oneMachine } from "./os/_machine.ts";
import { count, LAUNCH_LIB, LAUNCHER } from "./_launcher_world.ts";

const STAND_IN = new URL("./fixtures/stand-in-host", import.meta.url).pathname;
const STATE = "/var/lib/mesh-host";
const PLAN = "/root/plan";
const CACHE = "/var/cache/apt/archives";

/** The stand-in host at `version`, packaged as nox-mesh-host VERSION-1 (Architecture: all). */
async function standInDeb(dir: string, version: string): Promise<string> {
  const file = await buildDeb(dir, { name: "nox-mesh-host", version: `${version}-1` });
  // Its /usr/bin/nox-mesh-host is the stand-in: rebuild the tree with it.
  const tree = join(dir, `tree-${version}`);
  await new Deno.Command("dpkg-deb", { args: ["-R", file, tree] }).output();
  const text = (await Deno.readTextFile(STAND_IN)).replace("@VERSION@", version);
  await Deno.writeTextFile(join(tree, "usr/bin/nox-mesh-host"), text);
  const out = await new Deno.Command("dpkg-deb", {
    args: ["--root-owner-group", "-Zgzip", "--build", tree, file],
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  await Deno.remove(tree, { recursive: true });
  return file;
}

/** Runs `argv` in the machine; asserts its exit code; returns its stdout. */
async function sh(m: Machine, script: string, code = 0): Promise<string> {
  const r = await m.exec(["sh", "-c", script]);
  assert.equal(r.code, code, `${script}: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** The launcher in the machine, started in the background; its stderr in a file there. */
async function startLauncher(m: Machine, steps: string[]): Promise<void> {
  await m.writeFile(`${PLAN}/steps`, steps.map((s) => `${s}\n`).join(""));
  await sh(m, `rm -f ${PLAN}/log ${PLAN}/next ${PLAN}/rc ${PLAN}/launcher`);
  const env = [
    `NOXPK_PLAN=${PLAN}`,
    `NOX_MESH_HOST_STATE_DIR=${STATE}`,
    "NOX_MESH_HOST_BIN=/usr/bin/nox-mesh-host",
    "NOX_MESH_HOST_PKG=apt",
    "NOX_MESH_HOST_BACKOFF=0",
    "PATH=/usr/bin:/usr/sbin:/bin:/sbin",
  ].join(" ");
  // A subshell in the background starts the launcher, notes its pid, and records its exit.
  await sh(
    m,
    `(env -i ${env} /usr/bin/nox-mesh-host-launch 2>${PLAN}/stderr & ` +
      `echo $! > ${PLAN}/launcher; wait $!; echo $? > ${PLAN}/rc) </dev/null >/dev/null 2>&1 &`,
  );
}

/** Waits until `check` holds (polling). */
async function until(what: string, check: () => Promise<boolean>, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The host's log lines in the machine. */
async function hostLog(m: Machine): Promise<string[]> {
  const r = await m.exec(["cat", `${PLAN}/log`]);
  return r.code === 0 ? r.stdout.trim().split("\n") : [];
}

/** The versions the host was started as. */
async function starts(m: Machine): Promise<string[]> {
  return (await hostLog(m)).filter((l) => l.startsWith("start ")).map((l) => l.split(" ")[1]);
}

/** Waits for the launcher to end by itself, or stops it with TERM once `readyCount` hosts were ready. */
async function finish(m: Machine, readyCount?: number): Promise<{ code: number; stderr: string }> {
  if (readyCount !== undefined) {
    await until(
      "the host to be ready",
      async () => (await hostLog(m)).filter((l) => l.startsWith("ready")).length >= readyCount,
    );
    await until(
      "its pid",
      async () => (await m.exec(["test", "-s", `${PLAN}/launcher`])).code === 0,
    );
    await sh(m, `kill -TERM "$(cat ${PLAN}/launcher)"`);
  }
  await until(
    "the launcher to exit",
    async () => (await m.exec(["test", "-s", `${PLAN}/rc`])).code === 0,
  );
  return {
    code: Number((await m.readFile(`${PLAN}/rc`)).trim()),
    stderr: await m.readFile(`${PLAN}/stderr`),
  };
}

Deno.test(
  {
    name: machineTest("launcher (apt): rollback with the real apt and dpkg of Debian 12"),
    ignore: !CAN_RAISE,
  },
  async (t) => {
    const work = await Deno.makeTempDir({ prefix: "noxpk-apt-" });
    try {
      const v1 = await standInDeb(work, "1.0");
      const v2 = await standInDeb(work, "2.0");
      const sha = async (f: string) =>
        Array.from(
          new Uint8Array(await crypto.subtle.digest("SHA-256", await Deno.readFile(f))),
          (b) => b.toString(16).padStart(2, "0"),
        ).join("");

      /** A fresh machine: the repository offering both versions, 1.0-1 installed from it. */
      const aptWorld = async () => {
        const one = await oneMachine("plain");
        const m = one.machine;
        await signedAptRepo(join(one.lab.shareDir, "apt"), [v1, v2]);
        await m.copyIn(await aptKeyring(), APT_KEYRING);
        // copy: (not file:) so apt puts what it installs in its cache, as from http:.
        await m.writeFile(
          "/etc/apt/sources.list",
          `deb [signed-by=${APT_KEYRING}] copy:/lab/apt stable main\n`,
        );
        await sh(m, "rm -f /etc/apt/sources.list.d/*; apt-get -q update >/dev/null");
        await sh(m, "DEBIAN_FRONTEND=noninteractive apt-get -q -y install nox-mesh-host=1.0-1");
        await m.copyIn(LAUNCHER, "/usr/bin/nox-mesh-host-launch", "0755");
        await m.copyIn(join(LAUNCH_LIB, "apt.sh"), "/usr/lib/nox-mesh-host/launch/apt.sh");
        await m.writeFile(
          "/root/upgrade",
          "#!/bin/sh\nset -e\nDEBIAN_FRONTEND=noninteractive apt-get -q -y install " +
            "nox-mesh-host=2.0-1 >&2\n",
          "0755",
        );
        return one;
      };
      const upgradeThenCrash = ["confirm run /root/upgrade exit 0", "exit 1", "exit 1", "exit 1"];
      const installed = async (m: Machine) =>
        (await sh(m, "dpkg-query -W -f '${Version}' nox-mesh-host")).trim();

      await t.step(
        "three crashes roll back exactly once, to exactly the kept 1.0 .deb",
        async () => {
          await using one = await aptWorld();
          const m = one.machine;
          await startLauncher(m, [...upgradeThenCrash, "confirm wait"]);
          const r = await finish(m, 1);
          assert.equal(r.code, 0, r.stderr);
          assert.deepEqual(await starts(m), ["1.0", "2.0", "2.0", "2.0", "1.0"], r.stderr);
          assert.equal(await installed(m), "1.0-1");
          assert.equal(count(r.stderr, "rolling back to known-good 1.0"), 1);
          const kept = `${STATE}/rollback/1.0/nox-mesh-host_1.0-1_all.deb`;
          assert.equal(
            (await sh(m, `sha256sum ${kept}`)).split(" ")[0],
            await sha(v1),
            "the kept file is the 1.0 package",
          );
          assert.equal(
            await m.readFile(`${STATE}/rollback/1.0/checksum`),
            `${await sha(v1)}\n`,
            "kept with the SHA-256 apt's signed indexes record for it",
          );
          const log = await m.readFile("/var/log/dpkg.log");
          assert.equal(count(log, "upgrade nox-mesh-host:all 2.0-1 1.0-1"), 1, "one downgrade");
          assert.equal((await m.readFile(`${STATE}/rolled-back-from`)).trim(), "2.0");
          assert.equal((await m.readFile(`${STATE}/failures`)).trim(), "0");
        },
      );

      await t.step(
        "a kept .deb swapped after it was kept is refused: the rollback halts",
        async () => {
          await using one = await aptWorld();
          const m = one.machine;
          const kept = `${STATE}/rollback/1.0/nox-mesh-host_1.0-1_all.deb`;
          // Whoever writes into rollback/ puts another (validly built) package there.
          await m.writeFile(
            "/root/upgrade",
            (await m.readFile("/root/upgrade")) +
              `cp ${CACHE}/nox-mesh-host_2.0-1_all.deb ${kept}\n`,
            "0755",
          );
          await startLauncher(m, [...upgradeThenCrash, "wait"]);
          const r = await finish(m);
          assert.equal(r.code, 78, r.stderr);
          assert.match(
            await m.readFile(`${STATE}/halted`),
            /kept package file .*nox-mesh-host_1\.0-1_all\.deb does not match the checksum recorded when it was kept .*refusing to install it/,
          );
          assert.equal(await installed(m), "2.0-1", "nothing was installed");
        },
      );

      await t.step("a cached file that differs from apt's record is never kept", async () => {
        await using one = await aptWorld();
        const m = one.machine;
        await m.copyIn(v2, `${CACHE}/nox-mesh-host_1.0-1_all.deb`);
        await startLauncher(m, ["wait"]);
        const r = await finish(m, 1);
        assert.equal(r.code, 0, r.stderr);
        assert.match(
          r.stderr,
          /found no package file of nox-mesh-host 1\.0 with the checksum apt recorded/,
        );
        assert.match(r.stderr, /WARNING: no package file of nox-mesh-host 1\.0 found to keep/);
        assert.equal((await m.exec(["test", "-e", `${STATE}/rollback/1.0/checksum`])).code, 1);
      });
    } finally {
      await Deno.remove(work, { recursive: true });
    }
  },
);
