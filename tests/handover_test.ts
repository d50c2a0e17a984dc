/**
 * The first node's handover (seed 001: "its specialness is temporary and self-erasing"):
 * what the bundle raised is held by key, whichever source declared it, so the control
 * plane's first declaration of the same substrate changes nothing and removes nothing.
 * The bundle's action, which only a bundle may declare, is forgotten, and counted as
 * forgotten, not as removed. A later declaration that drops the rest releases it by the
 * rules: what the host created is removed, a package or a service forgotten.
 */
import assert from "node:assert/strict";
import { commandRunner } from "../os/command-runner/mod.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { applyDeclaration } from "../src/engine/apply.ts";
import { parseDeclaration, parseTrustedDeclaration } from "../src/engine/parse.ts";
import type { ApplyReport } from "../src/engine/types.ts";
import type { Source } from "../src/store/records.ts";
import type { Providers } from "../src/providers.ts";
import { Store } from "../src/store/store.ts";
import { outcomes } from "./_engine.ts";
import { privatePodman, SERVE } from "./os/_podman.ts";

/** A store in a temp directory and the engine applying from the bundle or the link. */
async function node(providers: Providers) {
  const dir = await Deno.makeTempDir({ prefix: "noxad-handover-" });
  const store = Store.open(`${dir}/state`);
  const roots = [dir];
  const ctx = { store, providers, config: { managedRoots: roots }, stateDir: `${dir}/state` };
  const options = { managedRoots: roots, own: { paths: [`${dir}/state`], services: [] } };
  return {
    dir,
    store,
    async apply(source: Source, resources: unknown[], serial?: number): Promise<ApplyReport> {
      const text = JSON.stringify({
        version: 1,
        ...(serial ? { node: "n", serial } : {}),
        resources,
      });
      const declaration = source === "bundle"
        ? await parseTrustedDeclaration(text, options)
        : await parseDeclaration(text, options);
      const origin = source === "link" ? "mesh.decl.n" : `${dir}/substrate.lock`;
      return await applyDeclaration(ctx, declaration, { source, origin });
    },
    async [Symbol.asyncDispose]() {
      store.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const file = (dir: string) => ({
  type: "file",
  id: "marker",
  path: `${dir}/marker`,
  content: "raised by the bundle\n",
  mode: "0644",
  owner: "root",
  group: "root",
});

const action = (dir: string) => ({
  type: "action",
  id: "load",
  run: ["/usr/bin/touch", `${dir}/loaded`],
  verify: ["/usr/bin/test", "-f", `${dir}/loaded`],
});

Deno.test("handover: the link's first declaration of the bundle's substrate changes and removes nothing; the action is forgotten, not removed", async () => {
  await using n = await node({ fs: posixFileSystem(), commands: commandRunner() });
  const raised = await n.apply("bundle", [action(n.dir), file(n.dir)]);
  assert.equal(raised.outcome, "converged", raised.error);
  assert.deepEqual(outcomes(raised), ["load:changed", "marker:changed"]);

  const handed = await n.apply("link", [file(n.dir)], 1);
  assert.equal(handed.outcome, "converged", handed.error);
  assert.deepEqual(outcomes(handed), ["marker:unchanged", "load:forgotten"]);
  assert.deepEqual(handed.counts, {
    changed: 0,
    unchanged: 1,
    removed: 0,
    forgotten: 1,
    failed: 0,
  });
  assert.equal(n.store.lastApply()?.counts.forgotten, 1);
  assert.equal(await Deno.readTextFile(`${n.dir}/marker`), "raised by the bundle\n");

  // Still the host's own creation: a declaration that drops it removes it.
  const dropped = await n.apply("link", [], 2);
  assert.deepEqual(outcomes(dropped), ["marker:removed"]);
  assert.deepEqual(dropped.counts, {
    changed: 0,
    unchanged: 0,
    removed: 1,
    forgotten: 0,
    failed: 0,
  });
  await assert.rejects(Deno.stat(`${n.dir}/marker`), Deno.errors.NotFound);
});

Deno.test("handover: the bundle's container is the link's: the same container runs on; dropped, it is removed", async () => {
  await using p = await privatePodman();
  await using n = await node({ fs: posixFileSystem(), containers: p.runtime });
  const container = {
    type: "container",
    id: "pause",
    name: "noxad-substrate",
    image: p.image,
    args: SERVE,
    env: {},
    mounts: [],
    restart: "always",
  };
  const raised = await n.apply("bundle", [container]);
  assert.equal(raised.outcome, "converged", raised.error);
  const made = await p.podman(
    "container",
    "inspect",
    "--format",
    "{{.Id}} {{.State.StartedAt}}",
    container.name,
  );

  const handed = await n.apply("link", [container], 1);
  assert.deepEqual(outcomes(handed), ["pause:unchanged"]);
  assert.equal(
    await p.podman(
      "container",
      "inspect",
      "--format",
      "{{.Id}} {{.State.StartedAt}}",
      container.name,
    ),
    made,
  );

  const dropped = await n.apply("link", [], 2);
  assert.deepEqual(outcomes(dropped), ["pause:removed"]);
  assert.equal(await p.runtime.inspect(container.name), null);
});
