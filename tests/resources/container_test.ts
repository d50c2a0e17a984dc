import assert from "node:assert/strict";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { digestOf } from "../../src/declaration/canonical.ts";
import {
  CONTAINER_LABELS,
  containerDigest,
  type ContainerResource,
} from "../../src/resources/container.ts";
import { outcomes, testEngine } from "../_engine.ts";
import { applyText, type Engine, openEngine, planText } from "../../src/engine/mod.ts";
import { scratch } from "../_helpers.ts";
import { privatePodman, SERVE } from "../os/_podman.ts";
import { asNobody, NOBODY } from "../_nobody.ts";

const NAME = "noxad-web";
const resource = (image: string, args: string[] = SERVE) => ({
  type: "container",
  id: "web",
  name: NAME,
  image,
  args,
  env: { MODE: "test" },
  mounts: [],
  restart: "no",
});

Deno.test("container: created with the host's labels, read back, then unchanged", async () => {
  await using p = await privatePodman();
  await using engine = await testEngine({ fs: posixFileSystem(), containers: p.runtime });
  const r = resource(p.image);
  const first = await engine.apply([r]);
  assert.equal(first.outcome, "converged", first.error);
  assert.deepEqual(outcomes(first), ["web:changed"]);
  const info = await p.runtime.inspect(NAME);
  assert.equal(info?.running, true);
  assert.equal(info?.labels[CONTAINER_LABELS.owner], "nox-mesh-host");
  assert.equal(
    info?.labels[CONTAINER_LABELS.digest],
    await containerDigest({ ...r, type: "container" } as ContainerResource),
  );
  assert.equal(info?.labels[CONTAINER_LABELS.resource], "web");
  assert.deepEqual(outcomes(await engine.apply([r])), ["web:unchanged"]);
});

Deno.test("container: drift is repaired (removed by hand → created; stopped → started)", async () => {
  await using p = await privatePodman();
  await using engine = await testEngine({ fs: posixFileSystem(), containers: p.runtime });
  const r = resource(p.image);
  await engine.apply([r]);
  await p.podman("rm", "--force", "--time", "0", NAME);
  const recreated = await engine.apply([r]);
  assert.deepEqual(recreated.results[0].changes, ["create"]);
  assert.equal((await p.runtime.inspect(NAME))?.running, true);
  await p.podman("stop", "--time", "0", NAME);
  const id = await p.podman("container", "inspect", "--format", "{{.Id}}", NAME);
  const restarted = await engine.apply([r]);
  assert.match(restarted.results[0].changes[0], /^start \(it is (exited|stopped)\)$/);
  assert.equal((await p.runtime.inspect(NAME))?.running, true);
  assert.equal(await p.podman("container", "inspect", "--format", "{{.Id}}", NAME), id);
});

Deno.test("container: a changed digest label (by hand) or a changed declaration replaces it", async () => {
  await using p = await privatePodman();
  await using engine = await testEngine({ fs: posixFileSystem(), containers: p.runtime });
  await engine.apply([resource(p.image)]);
  // A person recreates it with our marker but another digest: drift, and ours, so replaced.
  await p.podman("rm", "--force", "--time", "0", NAME);
  await p.podman(
    "create",
    "--name",
    NAME,
    "--label",
    `${CONTAINER_LABELS.owner}=nox-mesh-host`,
    "--label",
    `${CONTAINER_LABELS.digest}=sha256:${"0".repeat(64)}`,
    p.image,
    ...SERVE,
  );
  const relabelled = await engine.apply([resource(p.image)]);
  assert.deepEqual(relabelled.results[0].changes, ["replace (the declaration changed)"]);
  const before = await p.podman("container", "inspect", "--format", "{{.Id}}", NAME);
  const changed = resource(p.image, [
    "/bin/sh",
    "-c",
    "trap 'exit 0' TERM; while :; do sleep 2; done",
  ]);
  const replaced = await engine.apply([changed]);
  assert.equal(replaced.outcome, "converged", replaced.error);
  assert.deepEqual(replaced.results[0].changes, ["replace (the declaration changed)"]);
  const info = await p.runtime.inspect(NAME);
  assert.notEqual(await p.podman("container", "inspect", "--format", "{{.Id}}", NAME), before);
  assert.equal(
    info?.labels[CONTAINER_LABELS.digest],
    await containerDigest({ ...changed, type: "container" } as ContainerResource),
  );
});

Deno.test("container: another id or a restartOn makes no other container; one labelled as earlier hosts did is kept", async () => {
  await using p = await privatePodman();
  await using engine = await testEngine({ fs: posixFileSystem(), containers: p.runtime });
  const dir = await Deno.makeTempDir({ prefix: "noxad-conf-" });
  const conf = {
    type: "file",
    id: "conf",
    path: `${dir}/web.conf`,
    content: "port 80\n",
    mode: "0644",
    owner: "root",
    group: "root",
  };
  const first = await engine.apply([conf, resource(p.image)]);
  assert.equal(first.outcome, "converged", first.error);
  const made = await p.podman(
    "container",
    "inspect",
    "--format",
    "{{.Id}} {{.State.StartedAt}}",
    NAME,
  );
  const renamed = { ...resource(p.image), id: "substrate-web", restartOn: ["conf"] };
  const again = await engine.apply([conf, renamed]);
  await Deno.remove(dir, { recursive: true });
  assert.deepEqual(outcomes(again), ["conf:unchanged", "substrate-web:unchanged"]);
  assert.equal(
    await p.podman("container", "inspect", "--format", "{{.Id}} {{.State.StartedAt}}", NAME),
    made,
  );

  // Labelled with the digest of the whole resource (id included), as hosts did before.
  await p.podman("rm", "--force", "--time", "0", NAME);
  const whole = await digestOf({ ...resource(p.image), type: "container" });
  await p.podman(
    "run",
    "--detach",
    "--name",
    NAME,
    "--label",
    `${CONTAINER_LABELS.owner}=nox-mesh-host`,
    "--label",
    `${CONTAINER_LABELS.digest}=${whole}`,
    p.image,
    ...SERVE,
  );
  const legacy = await p.podman("container", "inspect", "--format", "{{.Id}}", NAME);
  // (The file conf, no longer declared and already gone with its directory, is released.)
  assert.deepEqual(outcomes(await engine.apply([resource(p.image)])), [
    "web:unchanged",
    "conf:removed",
  ]);
  assert.equal(await p.podman("container", "inspect", "--format", "{{.Id}}", NAME), legacy);
});

Deno.test("container: one of that name without the host's label is never touched; the apply fails", async () => {
  await using p = await privatePodman();
  await using engine = await testEngine({ fs: posixFileSystem(), containers: p.runtime });
  await p.podman("run", "--detach", "--name", NAME, p.image, ...SERVE);
  const id = await p.podman("container", "inspect", "--format", "{{.Id}}", NAME);
  const report = await engine.apply([resource(p.image)]);
  assert.equal(report.outcome, "failed");
  assert.match(report.error ?? "", /was not created by this host .* the host never touches it/);
  const info = await p.runtime.inspect(NAME);
  assert.equal(info?.running, true);
  assert.equal(await p.podman("container", "inspect", "--format", "{{.Id}}", NAME), id);
  assert.equal(engine.store.managed().length, 0);
});

Deno.test("container: no longer declared is removed — only while it carries the host's label", async () => {
  await using p = await privatePodman();
  await using engine = await testEngine({ fs: posixFileSystem(), containers: p.runtime });
  await engine.apply([resource(p.image)]);
  const dropped = await engine.apply([]);
  assert.deepEqual(outcomes(dropped), ["web:removed"]);
  assert.equal(await p.runtime.inspect(NAME), null);

  await engine.apply([resource(p.image)]);
  // A person swaps in an unlabelled container of the same name: left alone on release.
  await p.podman("rm", "--force", "--time", "0", NAME);
  await p.podman("run", "--detach", "--name", NAME, p.image, ...SERVE);
  const released = await engine.apply([]);
  assert.deepEqual(outcomes(released), ["web:forgotten"]);
  assert.match(released.results[0].detail ?? "", /no longer carries the host's label/);
  assert.equal((await p.runtime.inspect(NAME))?.running, true);
});

Deno.test("container: without a runtime the apply fails with NoProviderError's sentence", async () => {
  await using engine = await testEngine({ fs: posixFileSystem() });
  const report = await engine.apply([resource("localhost/x@sha256:" + "a".repeat(64))]);
  assert.equal(report.outcome, "failed");
  assert.match(
    report.results[0].detail ?? "",
    /no provider on this machine for container resources/,
  );
});

// ---------------------------------------------------------------------------------------------
// Mount sources: the runtime resolves a source by name at create and at every start, so the
// host cannot hold it for the runtime; a source someone but root could swap is refused.
// (Moved from tests/fs_race_test.ts, which races the file system's own acts as processes.)

/** As nobody: move `name` aside and put a symlink to `target` in its place. */
const swapForSymlink = (name: string, target: string) =>
  asNobody('mv -- "$1" "$1.moved" && ln -s -- "$2" "$1"', name, target);

/** A scratch machine with nobody's home in the managed root. */
async function world() {
  const s = await scratch();
  await Deno.chmod(s.dir, 0o755);
  await Deno.chmod(s.root, 0o755);
  const home = `${s.root}/home`;
  await Deno.mkdir(home);
  await Deno.chown(home, NOBODY, NOBODY);
  return { s, home };
}

const owned = { owner: "nobody", group: "nogroup" };
const text = (resources: unknown[]) => JSON.stringify({ version: 1, resources });
const apply = (host: Engine, resources: unknown[]) =>
  applyText(host, text(resources), { source: "file", origin: "test" });

Deno.test("container mounts (podman): a source in a directory a user owns is refused, naming it; swapped for a link to root's directory it is never mounted; a source only root can replace is mounted", async () => {
  await using p = await privatePodman();
  const { s, home } = await world();
  await using _ = s;
  const victim = `${s.dir}/root-data`;
  await Deno.mkdir(victim, { mode: 0o700 });
  await Deno.chmod(victim, 0o700);
  await Deno.writeTextFile(`${victim}/secret`, "root's secret\n", { mode: 0o600 });
  await asNobody('mkdir -- "$1/data" && printf "nobody\'s\\n" > "$1/data/file"', home);
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: () => Promise.resolve({ fs: posixFileSystem(), containers: p.runtime }),
  });
  const box = (name: string, source: string) => ({
    type: "container",
    id: name,
    name,
    image: p.image,
    args: SERVE,
    env: {},
    mounts: [{ source, target: "/data", readOnly: true }],
    restart: "no",
  });
  // The attack: nobody puts a link to root's directory where the source is.
  await swapForSymlink(`${home}/data`, victim);
  const swapped = await apply(host, [box("noxfr-swapped", `${home}/data`)]);
  const seen = await p.podman("exec", "noxfr-swapped", "cat", "/data/secret").catch(() => "");
  assert.equal(seen, "", "root's directory was mounted into the container");
  assert.equal(swapped.outcome, "failed");
  assert.match(
    swapped.error!,
    /mount source .*\/home\/data is refused: .*\/home belongs to uid 65534/,
  );
  assert.equal(await p.runtime.inspect("noxfr-swapped"), null);
  // The same source as a real directory: still refused, since nobody could swap it later
  // (the runtime resolves it again at every start); the message names whose directory it is.
  await asNobody('rm -- "$1/data" && mv -- "$1/data.moved" "$1/data"', home);
  const theirs = await apply(host, [box("noxfr-owned", `${home}/data`)]);
  assert.equal(theirs.outcome, "failed");
  assert.match(
    theirs.error!,
    /the mount source .*\/home\/data is refused: .*\/home belongs to uid 65534, so a local user could put a symlink \(to \/\) at .*\/home\/data/,
  );
  const plan = await planText(host, text([box("noxfr-owned", `${home}/data`)]), {
    source: "file",
    origin: "test",
  });
  assert.match(plan[0].detail!, /\/home belongs to uid 65534/);
  assert.equal(await p.runtime.inspect("noxfr-owned"), null);
  // Where only root can replace each step (the source itself may be nobody's), it is mounted.
  await Deno.mkdir(`${s.root}/srv`, { mode: 0o755 });
  await Deno.chmod(`${s.root}/srv`, 0o755);
  await Deno.mkdir(`${s.root}/srv/data`);
  await Deno.chown(`${s.root}/srv/data`, NOBODY, NOBODY);
  await Deno.writeTextFile(`${s.root}/srv/data/file`, "served\n");
  const good = await apply(host, [box("noxfr-good", `${s.root}/srv/data`)]);
  assert.equal(good.outcome, "converged", good.error);
  assert.equal(await p.podman("exec", "noxfr-good", "cat", "/data/file"), "served");
  // A source still missing: where only root could make it, a directory declared before the
  // container makes it (plan says create); where nobody could make it first, refused.
  const made = { type: "directory", id: "made", path: `${s.root}/srv/made`, mode: "0755" };
  const planned = await planText(
    host,
    text([{ ...made, ...owned }, box("noxfr-made", `${s.root}/srv/made`)]),
    { source: "file", origin: "test" },
  );
  assert.deepEqual(
    planned.slice(0, 2).map((e) => e.status),
    ["create", "create"],
    planned[1].detail,
  );
  const missing = await apply(host, [box("noxfr-missing", `${home}/later`)]);
  assert.match(missing.error!, /\/home belongs to uid 65534, so a local user could put a symlink/);
});
