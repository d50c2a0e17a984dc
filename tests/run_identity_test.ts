/**
 * Enrolled again while the service runs (`enrol --replace`): the control plane
 * admits the new key only, so the running link's old key is useless. The
 * service notices at its next heartbeat tick and exits 10 (a restart the
 * launcher does not count); the next process links with the new key and takes
 * declarations again.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { runHost, scratch } from "./_helpers.ts";
import { fileResource, spawnHost, startMesh, until } from "./_mesh.ts";

Deno.test("enrol --replace while the service runs: it exits 10 and the next run links with the new key", async () => {
  await using mesh = await startMesh();
  const pkg = await Deno.makeTempDir({ prefix: "noxln-pkg-" });
  await using _pkg = {
    [Symbol.asyncDispose]: () => Deno.remove(pkg, { recursive: true }).catch(() => {}),
  };
  await using s = await scratch({ bundle: posix.join(pkg, "substrate.lock") });
  const enrol = async (...extra: string[]) => {
    const r = await runHost(["enrol", "--token", "-", ...extra], {
      env: s.env,
      stdin: await mesh.control.mintToken("node-r"),
    });
    assert.equal(r.code, 0, r.stderr);
    const status = await runHost(["status", "--json"], { env: s.env });
    return JSON.parse(status.stdout).identity.publicKey as string;
  };
  const first = await enrol();

  const f = `${s.root}/f`;
  {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
    await mesh.control.declare("node-r", { version: 1, resources: [fileResource("f", f, "1\n")] });
    await until(
      "the first declaration applied",
      async () => (await Deno.readTextFile(f).catch(() => "")) === "1\n" || undefined,
    );

    const second = await enrol("--replace");
    assert.notEqual(second, first, "a new key");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const code = await Promise.race([
      host.exited,
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve("still running after 90 s"), 90_000);
      }),
    ]);
    clearTimeout(timer);
    assert.equal(code, 10, host.log());
    assert.match(
      host.log(),
      new RegExp(`run: the node was enrolled again as "node-r" \\(key ${second}\\); exiting 10`),
    );
    const status = await runHost(["status", "--json"], { env: s.env });
    assert.equal(
      JSON.parse(status.stdout).service.phase,
      "exited for a restart (enrolled again)",
    );
  }

  // What the launcher does next: start it again. It links with the new key.
  await using again = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await mesh.control.declare("node-r", { version: 1, resources: [fileResource("f", f, "2\n")] });
  await until(
    "the declaration after the new enrolment applied",
    async () => (await Deno.readTextFile(f).catch(() => "")) === "2\n" || undefined,
  );
  assert.doesNotMatch(again.log(), /enrolled again/);
});
