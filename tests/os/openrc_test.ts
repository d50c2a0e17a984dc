/**
 * The OpenRC adapter against a real OpenRC (a lab machine booted with it); the service kind
 * on it is tested in tests/resources/service_test.ts.
 */
import assert from "node:assert/strict";
import { OwnServiceRefused } from "../../os/_own_service.ts";
import { openrc, parseRcUpdateShow } from "../../os/openrc/mod.ts";
import { CAN_RAISE, machineTest, oneMachine } from "./_machine.ts";
import { SCRIPT } from "./_services.ts";

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
