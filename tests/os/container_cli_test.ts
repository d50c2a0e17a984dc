import assert from "node:assert/strict";
import { createArgs, parseInspect } from "../../os/container-cli/mod.ts";
import { privatePodman, SERVE } from "./_podman.ts";

const spec = (image: string, name = "noxad-c1") => ({
  name,
  image,
  args: SERVE,
  env: { GREETING: "hello world" },
  mounts: [],
  restart: "no" as const,
  labels: { "nox-mesh-host.owner": "nox-mesh-host", "nox-mesh-host.digest": "sha256:abc" },
});

Deno.test("podman: inspect, create with labels and start, stop/start, remove", async () => {
  await using p = await privatePodman();
  assert.equal(await p.runtime.inspect("noxad-c1"), null);
  await p.runtime.create(spec(p.image));
  const info = await p.runtime.inspect("noxad-c1");
  assert.ok(info);
  assert.equal(info.running, true);
  assert.equal(info.status, "running");
  assert.equal(info.image, p.image);
  assert.equal(info.labels["nox-mesh-host.digest"], "sha256:abc");
  assert.equal(info.labels["nox-mesh-host.owner"], "nox-mesh-host");
  assert.match(
    await p.podman("exec", "noxad-c1", "/bin/sh", "-c", 'echo "$GREETING"'),
    /hello world/,
  );
  await p.podman("stop", "--time", "0", "noxad-c1");
  assert.equal((await p.runtime.inspect("noxad-c1"))?.running, false);
  await p.runtime.start("noxad-c1");
  assert.equal((await p.runtime.inspect("noxad-c1"))?.running, true);
  await p.runtime.remove("noxad-c1");
  assert.equal(await p.runtime.inspect("noxad-c1"), null);
});

Deno.test("podman: a failing create reports what ran and why", async () => {
  await using p = await privatePodman();
  const missing = "localhost/noxad/none@sha256:" + "0".repeat(64);
  const error = await p.runtime.create({ ...spec(missing), name: "noxad-c2" }).then(
    () => null,
    (e) => e,
  );
  assert.ok(error instanceof Error);
  assert.match(error.message, /^`podman create --name noxad-c2 .*` exited \d+: /);
});

Deno.test("createArgs: labels, env, mounts and restart before the pinned image and its args", () => {
  const image = "localhost/x@sha256:" + "a".repeat(64);
  assert.deepEqual(
    createArgs({
      ...spec(image),
      mounts: [{ source: "/srv/data", target: "/data", readOnly: true }],
      restart: "always",
    }),
    [
      "create",
      "--name",
      "noxad-c1",
      "--label",
      "nox-mesh-host.digest=sha256:abc",
      "--label",
      "nox-mesh-host.owner=nox-mesh-host",
      "--env",
      "GREETING=hello world",
      "--mount",
      "type=bind,source=/srv/data,target=/data,readonly",
      "--restart",
      "always",
      "--",
      image,
      ...SERVE,
    ],
  );
  assert.throws(() => createArgs(spec("localhost/x:latest")), /not pinned by digest/);
});

Deno.test("parseInspect reads docker's shape too (Name with a slash, Config.Image)", () => {
  const docker = JSON.stringify([{
    Name: "/registry",
    Image: "sha256:1111",
    Config: { Image: "registry@sha256:" + "b".repeat(64), Labels: { a: "b" } },
    State: { Status: "exited", Running: false },
  }]);
  assert.deepEqual(parseInspect(docker, "registry"), {
    name: "registry",
    image: "registry@sha256:" + "b".repeat(64),
    running: false,
    status: "exited",
    labels: { a: "b" },
  });
});
