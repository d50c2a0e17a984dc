import assert from "node:assert/strict";
import { containerCli, createArgs, parseInspect } from "../../os/container-cli/mod.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { outcomes, testEngine } from "../_engine.ts";
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

Deno.test("podman: env values reach the container through a 0600 file, never podman's argv; the file is gone after", async () => {
  await using p = await privatePodman();
  // A wrapper in front of the real podman records, for every run, the argv podman
  // got and the mode and contents of any --env-file at that moment.
  const seen = `${p.dir}/seen`;
  const wrapper = `${p.dir}/podman-wrapper`;
  await Deno.writeTextFile(
    wrapper,
    `#!/bin/sh
set -eu
printf 'argv:' >> '${seen}'
for a in "$@"; do printf ' %s' "$a" >> '${seen}'; done
printf '\\n' >> '${seen}'
prev=
for a in "$@"; do
  if [ "$prev" = --env-file ]; then
    printf 'file: %s %s\\n' "$(stat -c '%a %U' "$a")" "$(cat "$a")" >> '${seen}'
  fi
  prev=$a
done
exec podman "$@"
`,
  );
  await Deno.chmod(wrapper, 0o755);
  const envDir = `${p.dir}/container-env`;
  const runtime = containerCli({ program: wrapper, env: p.env, envDir });
  const secret = "s3cr3t value=with spaces";
  await runtime.create({ ...spec(p.image, "noxad-c3"), env: { TOKEN: secret, GREETING: "hi" } });

  const lines = (await Deno.readTextFile(seen)).trim().split("\n");
  const argvs = lines.filter((l) => l.startsWith("argv:"));
  assert.ok(argvs.some((l) => / create --name noxad-c3 .*--env-file /.test(l)), argvs.join("\n"));
  for (const l of argvs) assert.ok(!l.includes("s3cr3t"), `the secret is on a command line: ${l}`);
  const at = lines.findIndex((l) => l.startsWith("file:"));
  assert.equal(lines[at], `file: 600 root TOKEN=${secret}`);
  assert.equal(lines[at + 1], "GREETING=hi");
  assert.match(
    await p.podman("exec", "noxad-c3", "/bin/sh", "-c", 'echo "[$TOKEN] [$GREETING]"'),
    /\[s3cr3t value=with spaces\] \[hi\]/,
  );
  // Gone afterwards: the private directory is empty, and 0700.
  assert.deepEqual([...Deno.readDirSync(envDir)], []);
  assert.equal((await Deno.lstat(envDir)).mode! & 0o777, 0o700);
  await runtime.remove("noxad-c3");
});

Deno.test("container env: a symlink in place of the private directory, or a value a file cannot carry, is refused", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxad-envdir-" });
  try {
    const victim = `${dir}/victim`;
    await Deno.mkdir(victim, { mode: 0o755 });
    await Deno.symlink(victim, `${dir}/container-env`);
    const runtime = containerCli({ program: "podman", envDir: `${dir}/container-env` });
    const image = "localhost/x@sha256:" + "a".repeat(64);
    await assert.rejects(
      runtime.create({ ...spec(image, "noxad-c4"), env: { A: "b" } }),
      /container-env is not a directory/,
    );
    assert.deepEqual([...Deno.readDirSync(victim)], []);
    assert.equal((await Deno.lstat(victim)).mode! & 0o777, 0o755);
    const plain = containerCli({ program: "podman", envDir: `${dir}/env` });
    await assert.rejects(
      plain.create({ ...spec(image, "noxad-c4"), env: { A: "line\nB=injected" } }),
      /env A holds a line break or NUL/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
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
    }, "/x/create.env"),
    [
      "create",
      "--name",
      "noxad-c1",
      "--label",
      "nox-mesh-host.digest=sha256:abc",
      "--label",
      "nox-mesh-host.owner=nox-mesh-host",
      "--env-file",
      "/x/create.env",
      "--mount",
      "type=bind,source=/srv/data,target=/data,readonly",
      "--restart",
      "always",
      "--",
      image,
      ...SERVE,
    ],
  );
  assert.throws(() => createArgs(spec("localhost/x:latest"), "/x/e"), /not pinned by digest/);
  assert.throws(() => createArgs(spec(image)), /never on the command line/);
});

Deno.test("parseInspect reads docker's shape too (Name with a slash, Config.Image)", () => {
  const docker = JSON.stringify([{
    Name: "/registry",
    Image: "sha256:1111",
    Config: { Image: "registry@sha256:" + "b".repeat(64), Labels: { a: "b" } },
    State: { Status: "exited", Running: false, StartedAt: "2026-01-02T03:04:05.6Z" },
  }]);
  assert.deepEqual(parseInspect(docker, "registry"), {
    name: "registry",
    image: "registry@sha256:" + "b".repeat(64),
    running: false,
    status: "exited",
    labels: { a: "b" },
    startedAt: "2026-01-02T03:04:05.6Z",
  });
});

Deno.test("restart on change (podman): a container whose mounted file changed is restarted, a new StartedAt; plan says why; unchanged restarts nothing", async () => {
  await using p = await privatePodman();
  await using engine = await testEngine({ fs: posixFileSystem(), containers: p.runtime });
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "noxad-mnt-" });
  try {
    const file = (content: string) => ({
      type: "file",
      id: "conf",
      path: `${dir}/app.conf`,
      content,
      mode: "0644",
      owner: "root",
      group: "root",
    });
    const box = {
      type: "container",
      id: "box",
      name: "noxad-box",
      image: p.image,
      args: SERVE,
      env: {},
      mounts: [{ source: dir, target: "/conf", readOnly: true }],
      restart: "no",
      restartOn: ["conf"],
    };
    const first = await engine.apply([file("a\n"), box]);
    assert.equal(first.outcome, "converged", first.error);
    assert.deepEqual(first.results[1].changes, ["create"], "created, never restarted on top");
    const started = (await p.runtime.inspect("noxad-box"))?.startedAt ?? "";
    assert.notEqual(started, "");
    assert.deepEqual(outcomes(await engine.apply([file("a\n"), box])), [
      "conf:unchanged",
      "box:unchanged",
    ]);
    assert.equal((await p.runtime.inspect("noxad-box"))?.startedAt, started);
    const plan = await engine.plan([file("b\n"), box]);
    assert.deepEqual(plan.map((e) => [e.id, e.status, e.changes]), [
      ["conf", "change", ["content"]],
      ["box", "change", ["restart (conf changed)"]],
    ]);
    const r = await engine.apply([file("b\n"), box]);
    assert.equal(r.outcome, "converged", r.error);
    assert.deepEqual(r.results[1].changes, ["restart (conf changed)"]);
    const after = await p.runtime.inspect("noxad-box");
    assert.equal(after?.running, true);
    assert.notEqual(after?.startedAt, started, "a new run");
    assert.match(await p.podman("exec", "noxad-box", "/bin/sh", "-c", "cat /conf/app.conf"), /b/);
  } finally {
    await p.runtime.remove("noxad-box").catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
