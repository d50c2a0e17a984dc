/** The systemd adapter and the service kind against a real systemd (PID 1 of a lab machine). */
import assert from "node:assert/strict";
import { OwnServiceRefused } from "../../os/_own_service.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { systemd } from "../../os/systemd/mod.ts";
import { newKindContext } from "../../src/resources/kind.ts";
import { serviceKind } from "../../src/resources/service.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { CAN_RAISE, machineTest, oneMachine } from "./_machine.ts";
import { file as fileResource } from "../_declarations.ts";

const UNIT = "/etc/systemd/system/noxad-svc.service";
const unitFile = (description: string) =>
  `[Unit]\nDescription=${description}\n[Service]\nExecStart=/bin/sleep infinity\n` +
  `[Install]\nWantedBy=multi-user.target\n`;

Deno.test({
  name: machineTest("systemd adapter: state, enable/start/stop/disable, reload when systemd asks"),
  ignore: !CAN_RAISE,
  async fn(t) {
    await using m = await oneMachine("systemd");
    const services = systemd({ via: m.via });
    await t.step("a unit that does not exist", async () => {
      assert.equal((await services.state("noxad-svc")).exists, false);
    });
    await m.machine.writeFile(UNIT, unitFile("first"));
    await t.step("a new unit file is seen without a reload", async () => {
      const s = await services.state("noxad-svc");
      assert.deepEqual([s.exists, s.enabled, s.running, s.reloadNeeded], [
        true,
        false,
        false,
        false,
      ]);
    });
    await t.step("enable and start, read back by asking systemd", async () => {
      await services.enable("noxad-svc");
      await services.start("noxad-svc.service");
      const s = await services.state("noxad-svc");
      assert.deepEqual([s.enabled, s.running], [true, true]);
      const active = await m.machine.exec(["systemctl", "is-active", "noxad-svc"]);
      assert.equal(active.stdout.trim(), "active");
    });
    await t.step("a changed unit file needs a reload; reload runs daemon-reload", async () => {
      await m.machine.writeFile(UNIT, unitFile("second"));
      assert.equal((await services.state("noxad-svc")).reloadNeeded, true);
      await services.reload("noxad-svc");
      assert.equal((await services.state("noxad-svc")).reloadNeeded, false);
      const d = await m.machine.exec(["systemctl", "show", "-p", "Description", "noxad-svc"]);
      assert.equal(d.stdout.trim(), "Description=second");
    });
    await t.step("stop and disable", async () => {
      await services.stop("noxad-svc");
      await services.disable("noxad-svc");
      const s = await services.state("noxad-svc");
      assert.deepEqual([s.enabled, s.running], [false, false]);
    });
    await t.step("a failing verb says what ran and what systemd said", async () => {
      await assert.rejects(
        services.start("noxad-none"),
        /`nsenter .* systemctl start -- noxad-none` exited 5: .*noxad-none.service not found/,
      );
    });
  },
});

Deno.test("systemd adapter refuses the host's own unit, before running anything", async () => {
  // A program that cannot run: if the adapter ran anything, the error would differ.
  const services = systemd({ program: "/nonexistent/systemctl" });
  for (const name of ["nox-mesh-host", "nox-mesh-host.service"]) {
    await assert.rejects(services.state(name), OwnServiceRefused);
    await assert.rejects(services.stop(name), OwnServiceRefused);
    await assert.rejects(services.disable(name), OwnServiceRefused);
  }
});

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
