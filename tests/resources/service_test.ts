/**
 * The service kind: on a real systemd and a real OpenRC (lab machines booted with them),
 * as declared, drift restored, dropped → forgotten, restarted when what it names in
 * `restartOn` changed; and the host's own service refused. Moved from
 * tests/os/systemd_test.ts and tests/os/openrc_test.ts (issue 25: tests mirror src/).
 */
import assert from "node:assert/strict";
import { openrc } from "../../os/openrc/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { systemd } from "../../os/systemd/mod.ts";
import { newKindContext } from "../../src/resources/kind.ts";
import { serviceKind } from "../../src/resources/service.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { file as fileResource } from "../_declarations.ts";
import { CAN_RAISE, machineTest, oneMachine } from "../os/_machine.ts";
import { SCRIPT, UNIT, unitFile } from "../os/_services.ts";

Deno.test("service kind refuses the host's own unit too, even from a resource that skipped the parse", async () => {
  const services = systemd({ program: "/nonexistent/systemctl" });
  const ctx = newKindContext({ fs: posixFileSystem(), services }, ["/etc"]);
  const own = {
    type: "service" as const,
    id: "me",
    name: "nox-mesh-host",
    enabled: false,
    running: false,
  };
  await assert.rejects(serviceKind.check(ctx, own), /host's own service/);
});

Deno.test({
  name: machineTest(
    "service kind on systemd: enabled and running as declared, drift restored, dropped → forgotten",
  ),
  ignore: !CAN_RAISE,
  async fn() {
    await using m = await oneMachine("systemd");
    await m.machine.writeFile(UNIT, unitFile("kind"));
    const services = systemd({ via: m.via });
    await using engine = await testEngine({ fs: posixFileSystem(), services });
    const svc = { type: "service", id: "svc", name: "noxad-svc", enabled: true, running: true };
    const first = await engine.apply([svc]);
    assert.equal(first.outcome, "converged", first.error);
    assert.deepEqual(first.results[0].changes, ["enable", "start"]);
    assert.deepEqual(outcomes(await engine.apply([svc])), ["svc:unchanged"]);
    await m.machine.exec(["systemctl", "stop", "noxad-svc"], { check: true }); // a person stops it
    const restored = await engine.apply([svc]);
    assert.deepEqual(restored.results[0].changes, ["start"]);
    assert.equal((await services.state("noxad-svc")).running, true);
    const off = await engine.apply([{ ...svc, enabled: false, running: false }]);
    assert.deepEqual(off.results[0].changes, ["disable", "stop"]);
    await engine.apply([svc]);
    const dropped = await engine.apply([]);
    assert.deepEqual(outcomes(dropped), ["svc:forgotten"]);
    const s = await services.state("noxad-svc");
    assert.deepEqual([s.enabled, s.running], [true, true], "left as it was");
    const missing = await engine.apply([{ ...svc, id: "x", name: "noxad-none" }]);
    assert.equal(missing.outcome, "failed");
    assert.match(missing.error ?? "", /systemd has no service named "noxad-none"/);
  },
});

Deno.test({
  name: machineTest(
    "restart on change (systemd): restartOn restarts once with a new InvocationID; plan says why; " +
      "a changed unit restarts; nothing changed restarts nothing; a failed restart fails the apply",
  ),
  ignore: !CAN_RAISE,
  async fn(t) {
    await using m = await oneMachine("systemd");
    // Its start fails while /run/noxad-block exists (a restart the init refuses).
    const unit = (description: string) =>
      `[Unit]\nDescription=${description}\n[Service]\n` +
      `ExecStartPre=/bin/sh -c '! test -e /run/noxad-block'\nExecStart=/bin/sleep infinity\n` +
      `[Install]\nWantedBy=multi-user.target\n`;
    await m.machine.writeFile(UNIT, unit("first"));
    const services = systemd({ via: m.via });
    await using engine = await testEngine({ fs: posixFileSystem(), services });
    const conf = await Deno.makeTempFile({ dir: "/tmp", prefix: "noxad-conf-" });
    const file = (content: string) => fileResource({ id: "conf", path: conf, content });
    const svc = {
      type: "service",
      id: "svc",
      name: "noxad-svc",
      enabled: true,
      running: true,
      restartOn: ["conf"],
    };
    const invocation = async () => (await services.state("noxad-svc")).process;
    try {
      const first = await engine.apply([file("a\n"), svc]);
      assert.equal(first.outcome, "converged", first.error);
      // Started by this apply: a start, never a second restart on top.
      assert.deepEqual(first.results[1].changes, ["enable", "start"]);
      const started = await invocation();
      assert.match(started ?? "", /^InvocationID [0-9a-f]{32}$/);

      await t.step("nothing changed: nothing restarts (the same InvocationID)", async () => {
        assert.deepEqual(outcomes(await engine.apply([file("a\n"), svc])), [
          "conf:unchanged",
          "svc:unchanged",
        ]);
        assert.equal(await invocation(), started);
      });
      await t.step("plan says the service would be restarted, and why", async () => {
        const plan = await engine.plan([file("b\n"), svc]);
        assert.deepEqual(plan.map((e) => [e.id, e.status, e.changes]), [
          ["conf", "change", ["content"]],
          ["svc", "change", ["restart (conf changed)"]],
        ]);
        assert.equal(await invocation(), started, "a plan restarts nothing");
      });
      let second: string | null = null;
      await t.step("the config changed: restarted once, a new InvocationID", async () => {
        const r = await engine.apply([file("b\n"), svc]);
        assert.equal(r.outcome, "converged", r.error);
        assert.deepEqual(r.results[1].changes, ["restart (conf changed)"]);
        second = await invocation();
        assert.ok(second !== null && second !== started, `${second} is new (was ${started})`);
      });
      await t.step(
        "the unit file changed under a running service: daemon-reload, restart",
        async () => {
          await m.machine.writeFile(UNIT, unit("second"));
          const r = await engine.apply([file("b\n"), svc]);
          assert.equal(r.outcome, "converged", r.error);
          assert.deepEqual(r.results[1].changes, [
            "reload the changed definition",
            "restart (its definition changed on disk)",
          ]);
          const third = await invocation();
          assert.ok(third !== null && third !== second);
          const d = await m.machine.exec(["systemctl", "show", "-p", "Description", "noxad-svc"]);
          assert.equal(d.stdout.trim(), "Description=second");
        },
      );
      await t.step(
        "a restart systemd refuses fails the apply, naming the service and why",
        async () => {
          await m.machine.writeFile("/run/noxad-block", "");
          const r = await engine.apply([file("c\n"), svc]);
          assert.equal(r.outcome, "failed");
          assert.deepEqual(outcomes(r), ["conf:changed", "svc:failed"]);
          assert.match(
            r.error ?? "",
            /service "svc" failed: restarting systemd service "noxad-svc" failed: .*systemctl restart -- noxad-svc` exited 1: Job for noxad-svc.service failed/,
          );
        },
      );
    } finally {
      await Deno.remove(conf).catch(() => {});
    }
  },
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
