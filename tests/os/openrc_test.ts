/** The OpenRC adapter and the service kind against a real OpenRC (a lab machine booted with it). */
import assert from "node:assert/strict";
import { OwnServiceRefused } from "../../os/_own_service.ts";
import { openrc, parseRcUpdateShow } from "../../os/openrc/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { CAN_RAISE, machineTest, oneMachine } from "./_machine.ts";
import { file as fileResource } from "../_declarations.ts";

const SCRIPT = `#!/sbin/openrc-run
description="noxad test service"
command=/bin/sleep
command_args=infinity
command_background=yes
pidfile=/run/noxad-svc.pid
`;

Deno.test({
  name: machineTest("OpenRC adapter: state, rc-update add/del, rc-service start/stop, read back"),
  ignore: !CAN_RAISE,
  async fn(t) {
    await using m = await oneMachine("openrc");
    const services = openrc({ via: m.via });
    await t.step("a script that does not exist", async () => {
      assert.equal((await services.state("noxad-svc")).exists, false);
    });
    await m.machine.writeFile("/etc/init.d/noxad-svc", SCRIPT, "0755");
    await t.step("a new script: exists, not in the runlevel, stopped", async () => {
      const s = await services.state("noxad-svc");
      assert.deepEqual([s.exists, s.enabled, s.running], [true, false, false]);
      assert.equal(s.detail, "not in runlevel default, stopped");
    });
    await t.step("enable and start, read back by asking OpenRC", async () => {
      await services.enable("noxad-svc");
      await services.start("noxad-svc");
      const s = await services.state("noxad-svc");
      assert.deepEqual([s.enabled, s.running, s.reloadNeeded], [true, true, false]);
      const status = await m.machine.exec(["rc-service", "noxad-svc", "status"]);
      assert.equal(status.code, 0);
    });
    await t.step("stop and disable", async () => {
      await services.stop("noxad-svc");
      await services.disable("noxad-svc");
      const s = await services.state("noxad-svc");
      assert.deepEqual([s.enabled, s.running], [false, false]);
    });
    await t.step("a failing verb says what ran and what OpenRC said", async () => {
      await assert.rejects(
        services.start("noxad-none"),
        /`nsenter .* rc-service noxad-none start` exited 1: .*service `noxad-none' does not exist/,
      );
    });
  },
});

Deno.test("OpenRC adapter refuses the host's own service, before running anything", async () => {
  const services = openrc({
    rcService: "/nonexistent/rc-service",
    rcUpdate: "/nonexistent/rc-update",
  });
  await assert.rejects(services.state("nox-mesh-host"), OwnServiceRefused);
  await assert.rejects(services.enable("nox-mesh-host"), OwnServiceRefused);
  await assert.rejects(services.start("nox-mesh-host"), OwnServiceRefused);
});

Deno.test("rc-update show lines map services to runlevels", () => {
  const shown = parseRcUpdateShow(
    "              noxad-t | default\n                 sshd | boot default\n",
  );
  assert.deepEqual(shown.get("noxad-t"), ["default"]);
  assert.deepEqual(shown.get("sshd"), ["boot", "default"]);
});

Deno.test({
  name: machineTest("service kind on OpenRC: as declared, drift restored, dropped → forgotten"),
  ignore: !CAN_RAISE,
  async fn() {
    await using m = await oneMachine("openrc");
    await m.machine.writeFile("/etc/init.d/noxad-svc", SCRIPT, "0755");
    const services = openrc({ via: m.via });
    await using engine = await testEngine({ fs: posixFileSystem(), services });
    const svc = { type: "service", id: "svc", name: "noxad-svc", enabled: true, running: true };
    const first = await engine.apply([svc]);
    assert.equal(first.outcome, "converged", first.error);
    assert.deepEqual(first.results[0].changes, ["enable", "start"]);
    assert.deepEqual(outcomes(await engine.apply([svc])), ["svc:unchanged"]);
    await m.machine.exec(["rc-service", "noxad-svc", "stop"], { check: true }); // a person stops it
    assert.deepEqual((await engine.apply([svc])).results[0].changes, ["start"]);
    assert.equal((await services.state("noxad-svc")).running, true);
    assert.deepEqual(outcomes(await engine.apply([])), ["svc:forgotten"]);
    assert.equal((await services.state("noxad-svc")).running, true, "left as it was");
  },
});

/** A script whose stop does nothing and whose start keeps a running daemon: a restart "succeeds". */
const STUBBORN = `#!/sbin/openrc-run
description="noxad: a restart that keeps the same process"
pidfile=/run/noxad-stubborn.pid
start() {
	service_set_value pidfile "$pidfile"
	if [ -e "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then return 0; fi
	start-stop-daemon --start --background --make-pidfile --pidfile "$pidfile" --exec /bin/sleep -- infinity
}
stop() {
	return 0
}
`;

Deno.test({
  name: machineTest(
    "restart on change (OpenRC): a new pid read back; a restart that keeps the process fails the apply",
  ),
  ignore: !CAN_RAISE,
  async fn(t) {
    await using m = await oneMachine("openrc");
    await m.machine.writeFile("/etc/init.d/noxad-svc", SCRIPT, "0755");
    await m.machine.writeFile("/etc/init.d/noxad-stubborn", STUBBORN, "0755");
    const services = openrc({ via: m.via, root: `/proc/${m.machine.leader}/root` });
    await using engine = await testEngine({ fs: posixFileSystem(), services });
    const conf = await Deno.makeTempFile({ dir: "/tmp", prefix: "noxad-conf-" });
    const file = (content: string) => fileResource({ id: "conf", path: conf, content });
    const svc = (name: string, id = "svc") => ({
      type: "service",
      id,
      name,
      enabled: false,
      running: true,
      restartOn: ["conf"],
    });
    try {
      const first = await engine.apply([file("a\n"), svc("noxad-svc")]);
      assert.equal(first.outcome, "converged", first.error);
      const before = (await services.state("noxad-svc")).process;
      const pid = (await m.machine.exec(["cat", "/run/noxad-svc.pid"])).stdout.trim();
      await t.step("the process identity is the daemon's pid, from OpenRC's pidfile", () => {
        assert.equal(before, `pid ${pid}`);
      });
      await t.step("the config changed: restarted, a new pid", async () => {
        const r = await engine.apply([file("b\n"), svc("noxad-svc")]);
        assert.equal(r.outcome, "converged", r.error);
        assert.deepEqual(r.results[1].changes, ["restart (conf changed)"]);
        const after = (await services.state("noxad-svc")).process;
        assert.match(after ?? "", /^pid \d+$/);
        assert.notEqual(after, before);
      });
      await t.step(
        "reload on a script without reload: fails, saying what OpenRC said",
        async () => {
          const r = await engine.apply([file("c\n"), { ...svc("noxad-svc"), reload: true }]);
          assert.equal(r.outcome, "failed");
          assert.match(
            r.error ?? "",
            /reloading openrc service "noxad-svc" failed: .*rc-service noxad-svc reload` exited/,
          );
        },
      );
      await t.step(
        "a restart that leaves the same process fails the apply at the read-back",
        async () => {
          const started = await engine.apply([file("c\n"), svc("noxad-stubborn", "stubborn")]);
          assert.equal(started.outcome, "converged", started.error);
          const same = (await services.state("noxad-stubborn")).process;
          assert.match(same ?? "", /^pid \d+$/);
          const r = await engine.apply([file("d\n"), svc("noxad-stubborn", "stubborn")]);
          assert.equal(r.outcome, "failed");
          assert.deepEqual(outcomes(r), ["conf:changed", "stubborn:failed"]);
          assert.match(
            r.error ?? "",
            new RegExp(
              `read-back after applying still differs: restart: still the same process after the restart \\(${same}\\)`,
            ),
          );
        },
      );
    } finally {
      await Deno.remove(conf).catch(() => {});
    }
  },
});
