import assert from "node:assert/strict";
import { commandRunner } from "../../os/command-runner/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { DeclarationRefused } from "../../src/declaration/envelope.ts";
import { parseDeclaration } from "../../src/engine/parse.ts";
import { outcomes, testEngine } from "../_engine.ts";

const providers = () => ({ fs: posixFileSystem(), commands: commandRunner() });

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "noxad-action-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const action = (dir: string, run: string[], verify = ["/usr/bin/test", "-f", `${dir}/done`]) => ({
  type: "action",
  id: "init",
  run,
  verify,
});

Deno.test("action: verify satisfied → run is not run", () =>
  withDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/done`, "");
    await using engine = await testEngine(providers());
    const report = await engine.apply([action(dir, ["/usr/bin/touch", `${dir}/ran`])]);
    assert.deepEqual(outcomes(report), ["init:unchanged"]);
    await assert.rejects(Deno.stat(`${dir}/ran`), Deno.errors.NotFound);
  }));

Deno.test("action: verify unsatisfied → run, then verify passes; the next apply runs nothing", () =>
  withDir(async (dir) => {
    await using engine = await testEngine(providers());
    const run = ["/bin/sh", "-c", 'echo x >> "$0/ran"; : > "$0/done"', dir];
    const first = await engine.apply([action(dir, run)]);
    assert.equal(first.outcome, "converged", first.error);
    assert.deepEqual(outcomes(first), ["init:changed"]);
    assert.match(
      first.results[0].changes[0],
      /^verify `\/usr\/bin\/test -f .*\/done` exited 1: run$/,
    );
    await engine.apply([action(dir, run)]);
    assert.equal(await Deno.readTextFile(`${dir}/ran`), "x\n");
  }));

Deno.test("action: run succeeds but verify still fails → the apply fails (read-back)", () =>
  withDir(async (dir) => {
    await using engine = await testEngine(providers());
    const report = await engine.apply([action(dir, ["/usr/bin/touch", `${dir}/elsewhere`])]);
    assert.equal(report.outcome, "failed");
    assert.match(report.error ?? "", /read-back after applying still differs: verify .* exited 1/);
    assert.equal(engine.store.managed().length, 0);
  }));

Deno.test("action: run exits non-zero → the apply fails with its exit code and stderr", () =>
  withDir(async (dir) => {
    await using engine = await testEngine(providers());
    const report = await engine.apply([
      action(dir, ["/bin/sh", "-c", "echo broken >&2; exit 7"]),
      {
        type: "directory",
        id: "after",
        path: `${dir}/after`,
        mode: "0755",
        owner: "root",
        group: "root",
      },
    ]);
    assert.equal(report.outcome, "failed");
    assert.match(report.error ?? "", /action "init" failed: `\/bin\/sh -c .*` exited 7: broken/);
    assert.deepEqual(outcomes(report), ["init:failed", "after:skipped"]);
  }));

Deno.test("action: a program that does not exist fails the apply, naming it", () =>
  withDir(async (dir) => {
    await using engine = await testEngine(providers());
    const report = await engine.apply([
      action(dir, ["/usr/bin/true"], ["/nonexistent/noxad-check"]),
    ]);
    assert.equal(report.outcome, "failed");
    assert.match(report.error ?? "", /\/nonexistent\/noxad-check is not installed/);
  }));

Deno.test("action: no longer declared is forgotten (nothing to remove)", () =>
  withDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/done`, "");
    await using engine = await testEngine(providers());
    await engine.apply([action(dir, ["/usr/bin/true"])]);
    assert.deepEqual(outcomes(await engine.apply([])), ["init:forgotten"]);
  }));

Deno.test("action: refused by the safe parse (link and files)", async () => {
  const text = JSON.stringify({
    version: 1,
    resources: [{ type: "action", id: "x", run: ["/usr/bin/true"], verify: ["/usr/bin/true"] }],
  });
  await assert.rejects(
    () => parseDeclaration(text, { managedRoots: ["/etc"], own: { paths: [], services: [] } }),
    (e: unknown) =>
      e instanceof DeclarationRefused && /accepted only from the bundle/.test(e.message),
  );
});

Deno.test("action: without a command runner the apply fails with NoProviderError's sentence", async () => {
  await using engine = await testEngine({ fs: posixFileSystem() });
  const report = await engine.apply([action("/tmp", ["/usr/bin/true"])]);
  assert.match(report.results[0].detail ?? "", /no provider on this machine for action resources/);
});
