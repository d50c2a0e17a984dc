/** The systemd adapter and the service kind against a real systemd (PID 1 of a lab machine). */
import assert from "node:assert/strict";
import { OwnServiceRefused } from "../../os/_own_service.ts";
import { systemd } from "../../os/systemd/mod.ts";
import { CAN_RAISE, machineTest, oneMachine } from "./_machine.ts";
import { UNIT, unitFile } from "./_services.ts";

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
