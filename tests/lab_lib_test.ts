// The lab library against the real OS: machines of every flavour (a systemd machine is
// Debian, or Arch-like when raised for the Arch package), exec and files, the lab's apt and
// pacman repositories, the TLS broker and cutting a link.
import assert from "node:assert/strict";
import { Lab } from "../lab/lib/mod.ts";

const root = Deno.uid() === 0;
const prefix = () => "noxlt" + crypto.randomUUID().slice(0, 3);

Deno.test({
  name: root
    ? "lab: every flavour boots with its own namespaces; exec, files, apt and pacman repos"
    : "lab: machines (skipped: needs root)",
  ignore: !root,
  async fn(t) {
    await using lab = await Lab.start({ prefix: prefix() });
    const [sd, arch, rc, plain, lonely] = await Promise.all([
      lab.raise({ name: "sd", flavour: "systemd" }),
      lab.raise({ name: "arch", flavour: "systemd", hostFrom: "pacman" }),
      lab.raise({ name: "rc", flavour: "openrc" }),
      lab.raise({ name: "plain", flavour: "plain" }),
      lab.raise({ name: "lonely", flavour: "plain", network: false, files: { "/etc/x": "y\n" } }),
    ]);
    await t.step("PID 1 is the flavour's init, host name is the machine's", async () => {
      assert.equal((await sd.exec(["cat", "/proc/1/comm"])).stdout.trim(), "systemd");
      assert.equal((await arch.exec(["cat", "/proc/1/comm"])).stdout.trim(), "systemd");
      assert.equal((await rc.exec(["rc-status", "--runlevel"])).stdout.trim(), "default");
      for (const m of [sd, rc, plain]) {
        assert.equal((await m.exec(["cat", "/proc/sys/kernel/hostname"])).stdout.trim(), m.name);
      }
      assert.notEqual(sd.leader, rc.leader);
    });
    await t.step("exec: exit codes, stdin, clean environment", async () => {
      const r = await plain.exec(["sh", "-c", 'cat; echo "[$FOO][$HOSTNAME_LEAK]"; exit 3'], {
        input: "in\n",
        env: { FOO: "bar" },
      });
      assert.deepEqual([r.code, r.stdout], [3, "in\n[bar][]\n"]);
      await assert.rejects(plain.exec(["false"], { check: true }), /exited 1/);
    });
    await t.step("files: write, read, copy in; placed before boot", async () => {
      await rc.writeFile("/srv/a/b.txt", "hello\n", "0600");
      assert.equal(await rc.readFile("/srv/a/b.txt"), "hello\n");
      assert.equal((await rc.exec(["stat", "-c", "%a", "/srv/a/b.txt"])).stdout.trim(), "600");
      const host = await Deno.makeTempFile();
      await Deno.writeTextFile(host, "from the host\n");
      await sd.copyIn(host, "/opt/copied");
      await Deno.remove(host);
      assert.equal(await sd.readFile("/opt/copied"), "from the host\n");
      assert.equal(await lonely.readFile("/etc/x"), "y\n");
      await assert.rejects(plain.readFile("/etc/x"), /exited 1/, "machines share no files");
    });
    await t.step("network: own namespace; without network only lo", async () => {
      const links = (await lonely.exec(["ip", "-o", "link"])).stdout;
      assert.match(links, /lo:/);
      assert.doesNotMatch(links, /eth0/);
      assert.match((await sd.exec(["ip", "-o", "addr"])).stdout, new RegExp(sd.address!));
    });
    await t.step(
      "a systemd machine is Debian: apt, its only source the lab repository",
      async () => {
        assert.equal((await sd.exec(["test", "-e", "/usr/bin/pacman"])).code, 1, "no pacman");
        await sd.exec(["apt-get", "-q", "update"], { check: true });
        await sd.exec(["apt-get", "-q", "-y", "install", "noxlab-hello"], { check: true });
        assert.equal((await sd.exec(["noxlab-hello"])).stdout.trim(), "noxlab-hello 1.1-1");
        await sd.exec([
          "apt-get",
          "-q",
          "-y",
          "--allow-downgrades",
          "install",
          "noxlab-hello=1.0-1",
        ], {
          check: true,
        });
        assert.equal(
          (await sd.exec(["dpkg-query", "-W", "noxlab-hello"])).stdout.trim(),
          "noxlab-hello\t1.0-1",
        );
      },
    );
    await t.step("the lab pacman repository is reachable from the Arch-like machine", async () => {
      await arch.exec(["pacman", "-Sy", "--noconfirm", "noxlab-hello"], { check: true });
      assert.equal((await arch.exec(["noxlab-hello"])).stdout.trim(), "noxlab-hello 1.1-1");
      await arch.exec(
        ["pacman", "-U", "--noconfirm", "/lab/repo/noxlab-hello-1.0-1-any.pkg.tar.gz"],
        { check: true },
      );
      assert.equal(
        (await arch.exec(["pacman", "-Q", "noxlab-hello"])).stdout.trim(),
        "noxlab-hello 1.0-1",
      );
    });
    await t.step("memory of an idle machine is readable from its cgroup", async () => {
      const bytes = await sd.memoryBytes();
      assert.ok(bytes !== undefined && bytes > 0);
    });
  },
});

Deno.test({
  name: root
    ? "lab: broker over TLS from machines and its namespace; cut and restore a link"
    : "lab: broker (skipped: needs root)",
  ignore: !root,
  async fn(t) {
    await using lab = await Lab.start({ prefix: prefix() });
    const broker = await lab.broker();
    const [a, b] = await Promise.all([
      lab.raise({ name: "a", flavour: "systemd" }),
      lab.raise({ name: "b", flavour: "openrc" }),
    ]);
    await t.step("reachable with the lab CA and the pinned fingerprint", async () => {
      assert.deepEqual((await lab.probeBroker("broker")).ok, true);
      assert.deepEqual((await lab.probeBroker(a)).ok, true);
      assert.deepEqual((await lab.probeBroker(b)).ok, true);
    });
    await t.step("a wrong fingerprint is refused", async () => {
      const wrong = broker.fingerprint256.replace(
        /^../,
        broker.fingerprint256.startsWith("00") ? "11" : "00",
      );
      const r = await a.exec([
        "/usr/local/bin/deno",
        "run",
        "--allow-net",
        "--allow-read",
        "--allow-env",
        "/lab/nats-probe.js",
        broker.url,
        "/lab/broker-ca.pem",
        wrong,
      ]);
      assert.equal(r.code, 1);
      assert.match(r.stdout, /not the pinned/);
    });
    await t.step("cut link: a loses the broker, b keeps it; restore brings a back", async () => {
      await lab.cutLink(a);
      assert.equal((await lab.probeBroker(a)).ok, false);
      assert.equal((await lab.probeBroker(b)).ok, true);
      await lab.restoreLink(a);
      assert.equal((await lab.probeBroker(a)).ok, true);
    });
    await t.step("extra configuration is reloaded", async () => {
      await broker.reload("debug: true");
      assert.match(await broker.logText(), /Reloaded server configuration/);
      assert.equal((await lab.probeBroker(b)).ok, true);
    });
  },
});
