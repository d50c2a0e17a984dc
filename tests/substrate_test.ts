// The shipped substrate bundles (packaging/<os>/substrate.lock) and the image they
// carry (packaging/image.ts): made the same on every build, pinned by the bundles,
// loaded by their action into a real podman, and run as a real container.
import assert from "node:assert/strict";
import { join } from "node:path";
import { build, checkImagePins, defaultBundle } from "../packaging/build.ts";
import { IMAGE_DIR, IMAGE_FILE, IMAGE_NAME, pauseElf, pauseImage } from "../packaging/image.ts";
import { actionPrograms, loadPermissionSet } from "../packaging/permissions.ts";
import { containerSpec } from "../src/resources/container.ts";
import type { ContainerResource } from "../src/resources/container.ts";
import { privatePodman, SERVE } from "./os/_podman.ts";
import { pacmanRoot, TEST_PACKAGE } from "./os/_pacman_root.ts";
import { applyText, openEngine } from "../src/engine/mod.ts";
import { posixFileSystem } from "../os/posix-fs/mod.ts";
import { scratch } from "./_helpers.ts";

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;

interface Bundle {
  version: number;
  resources: Array<Record<string, unknown> & { type: string; id: string }>;
}

async function shipped(os: "arch" | "alpine"): Promise<{ text: string; bundle: Bundle }> {
  const text = await Deno.readTextFile(repo(`packaging/${os}/substrate.lock`));
  return { text, bundle: JSON.parse(text) };
}

/**
 * Runs a /pause program (argv), waits until it sleeps in `sleepCall` (the system call
 * number /proc/PID/syscall shows: its handlers are installed by then), sends SIGTERM;
 * returns its exit status.
 */
async function pauseThenTerm(argv: string[], sleepCall: number): Promise<Deno.CommandStatus> {
  const child = new Deno.Command(argv[0], { args: argv.slice(1), stdin: "null" }).spawn();
  for (let i = 0; i < 600; i++) {
    const call = await Deno.readTextFile(`/proc/${child.pid}/syscall`).catch(() => "");
    if (call.split(" ")[0] === String(sleepCall)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGTERM");
  return await child.status;
}

Deno.test("substrate image: the same bytes on every build; its digest is its index's, one manifest per architecture; each /pause is its architecture's code and exits 0 on SIGTERM (aarch64's under QEMU)", async () => {
  const a = await pauseImage();
  const b = await pauseImage();
  assert.deepEqual(a.archive, b.archive);
  assert.equal(a.digest, b.digest);
  assert.match(a.digest, /^sha256:[a-f0-9]{64}$/);
  // The archive as tar reads it: the index blob's name is the digest the bundles pin.
  const dir = await Deno.makeTempDir({ prefix: "noxsub-img-" });
  try {
    await Deno.writeFile(join(dir, "x.tar"), a.archive);
    const list = await new Deno.Command("tar", { args: ["-tvf", join(dir, "x.tar")] }).output();
    assert.ok(list.success);
    const listing = new TextDecoder().decode(list.stdout);
    assert.match(listing, new RegExp(`blobs/sha256/${a.digest.slice(7)}\\n`));
    for (const line of listing.trim().split("\n")) assert.match(line, /root\/root .* 1970-01-01/);
    const unpacked = join(dir, "x");
    await Deno.mkdir(unpacked);
    const x = await new Deno.Command("tar", { args: ["-xf", join(dir, "x.tar"), "-C", unpacked] })
      .output();
    assert.ok(x.success);
    const blob = (d: string) => join(unpacked, "blobs/sha256", d.slice(7));
    const read = async (d: string) => JSON.parse(await Deno.readTextFile(blob(d)));
    const top = JSON.parse(await Deno.readTextFile(join(unpacked, "index.json")));
    assert.equal(top.manifests.length, 1);
    assert.equal(top.manifests[0].digest, a.digest);
    const index = await read(a.digest);
    assert.equal(index.mediaType, "application/vnd.oci.image.index.v1+json");
    assert.deepEqual(
      index.manifests.map((m: { platform: { architecture: string }; digest: string }) => [
        m.platform.architecture,
        m.digest,
      ]),
      [["amd64", a.manifests.x86_64], ["arm64", a.manifests.aarch64]],
    );
    // Each manifest's config says its platform and its one layer holds that arch's /pause.
    for (
      const [arch, machine, platform] of [[
        "x86_64",
        62,
        "amd64",
      ], ["aarch64", 183, "arm64"]] as const
    ) {
      const manifest = await read(a.manifests[arch]);
      assert.equal((await read(manifest.config.digest)).architecture, platform);
      const layer = await Deno.readFile(blob(manifest.layers[0].digest));
      assert.deepEqual(layer.subarray(512, 512 + pauseElf(arch).length), pauseElf(arch), arch);
      assert.equal(new DataView(pauseElf(arch).buffer).getUint16(18, true), machine, arch);
    }
    for (const arch of ["x86_64", "aarch64"] as const) {
      const pause = join(dir, `pause-${arch}`);
      await Deno.writeFile(pause, pauseElf(arch), { mode: 0o755 });
      const qemu = `/usr/bin/qemu-${arch}-static`;
      const here = arch === Deno.build.arch;
      const emulated = !here && await Deno.stat(qemu).then(() => true, () => false);
      if (!here && !emulated) {
        console.log(`(${arch} /pause not run: ${qemu} is not installed)`);
        continue;
      }
      // Native: pause(2) on x86-64 (34), ppoll on aarch64 (73); under QEMU on this x86-64
      // machine the guest's ppoll is the host's (271).
      const sleepCall = here ? (arch === "x86_64" ? 34 : 73) : 271;
      const status = await pauseThenTerm(here ? [pause] : [qemu, pause], sleepCall);
      assert.equal(status.code, 0, `${arch}: SIGTERM makes it exit 0 (a container stops at once)`);
      assert.equal(status.signal, null, arch);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("substrate bundles: Arch and Alpine pass the trusted parse, raise podman, its service, the carried image and a container; their programs are already in their set", async () => {
  const { digest } = await pauseImage();
  const pinned = `${IMAGE_NAME}@${digest}`;
  for (const [os, service] of [["arch", "podman.socket"], ["alpine", "podman"]] as const) {
    const { text, bundle } = await shipped(os);
    assert.equal(await defaultBundle(os), repo(`packaging/${os}/substrate.lock`));
    checkImagePins(text, digest, os); // throws on a stale pin
    const programs = await actionPrograms(text, os); // the host's own trusted parse
    const set = await loadPermissionSet(os);
    for (const p of programs) assert.ok(set.allowRun.includes(p), `${os}: ${p} already allowed`);
    const r = bundle.resources;
    assert.deepEqual(r.map((x) => x.type), ["package", "service", "action", "container"], os);
    assert.equal(r[0].name, "podman");
    assert.deepEqual([r[1].name, r[1].enabled, r[1].running], [service, true, true], os);
    assert.deepEqual(r[2].verify, ["/usr/bin/podman", "image", "exists", pinned]);
    assert.deepEqual(r[2].run, [
      "/usr/bin/podman",
      "load",
      "--quiet",
      "--input",
      `${IMAGE_DIR}/${IMAGE_FILE}`,
    ]);
    assert.equal(r[3].image, pinned);
  }
  // The tarball (either init) ships the empty one.
  assert.equal(await defaultBundle("tarball"), repo("packaging/substrate.lock"));
});

Deno.test("substrate bundles: a bundle pinning the carried image at another digest fails the build", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxsub-build-" });
  try {
    const { text } = await shipped("arch");
    const stale = text.replaceAll(/pause@sha256:[a-f0-9]{64}/g, `pause@sha256:${"1".repeat(64)}`);
    assert.notEqual(stale, text);
    const lock = join(dir, "substrate.lock");
    await Deno.writeTextFile(lock, stale);
    await assert.rejects(
      () => build({ os: "arch", form: "bundled", out: join(dir, "arch"), bundleFile: lock }),
      /pins localhost\/nox-mesh-host\/pause@sha256:1{64}, but the image this build carries is sha256:/,
    );
    await assert.rejects(() => Deno.stat(join(dir, "arch")), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("substrate bundles: the action's verify fails, its run loads the carried archive into a real podman, then its verify passes; the container runs from the pinned name and stops on SIGTERM", async () => {
  await using pm = await privatePodman();
  const { bundle } = await shipped("arch");
  const action = bundle.resources.find((x) => x.type === "action")!;
  const verify = action.verify as string[];
  const load = action.run as string[];
  const archive = join(pm.dir, IMAGE_FILE);
  await Deno.writeFile(archive, (await pauseImage()).archive);
  const podman = (argv: string[]) =>
    new Deno.Command(argv[0], { args: argv.slice(1), env: pm.env, stdin: "null" }).output();
  assert.equal((await podman(verify)).code, 1, "not loaded yet: verify says run");
  const loaded = await podman([...load.slice(0, -1), archive]); // the installed path, here
  assert.equal(loaded.code, 0, new TextDecoder().decode(loaded.stderr));
  assert.equal((await podman(verify)).code, 0, "after the load the pinned name resolves");
  // The bundle's container, through the host's own spec and container adapter.
  const resource = bundle.resources.find((x) => x.type === "container") as ContainerResource;
  await pm.runtime.create(await containerSpec(resource));
  await pm.runtime.start(resource.name);
  const info = await pm.runtime.inspect(resource.name);
  assert.equal(info?.running, true);
  assert.equal(
    await pm.podman("container", "inspect", "--format", "{{.Config.Cmd}}", resource.name),
    "[/pause]",
  );
  await pm.podman("stop", "--time", "60", resource.name);
  assert.equal(
    await pm.podman("container", "inspect", "--format", "{{.State.ExitCode}}", resource.name),
    "0",
    "stopped by its SIGTERM handler, not killed (137)",
  );
});

Deno.test("substrate: a container after the package that brings its runtime: the apply detects the adapters again and runs it (a fresh machine without podman)", async () => {
  await using s = await scratch();
  await using r = await pacmanRoot();
  await r.pacman.upgradeAll(); // a machine whose sync database is current
  await using pm = await privatePodman();
  // The machine's own detection: the runtime is there once the package is installed
  // (the test package stands in for podman; the private podman is the runtime it brings).
  let detections = 0;
  using host = await openEngine({
    stateDir: s.stateDir,
    configPath: s.configPath,
    providers: async (scope) => {
      if (scope === "files") return { fs: posixFileSystem() };
      detections++;
      const installed = await r.pacman.installed(TEST_PACKAGE.name);
      return {
        fs: posixFileSystem(),
        packages: r.pacman,
        ...(installed ? { containers: pm.runtime } : {}),
      };
    },
  });
  const declaration = JSON.stringify({
    version: 1,
    resources: [
      { type: "package", id: "runtime", name: TEST_PACKAGE.name },
      {
        type: "container",
        id: "c",
        name: "noxsub-after-package",
        image: pm.image,
        args: SERVE,
        env: {},
        mounts: [],
        restart: "no",
      },
    ],
  });
  const report = await applyText(host, declaration, { source: "bundle", origin: "test" });
  assert.equal(report.outcome, "converged", report.error);
  assert.deepEqual(report.results.map((x) => `${x.id}:${x.outcome}`), [
    "runtime:changed",
    "c:changed",
  ]);
  assert.equal(detections, 2, "detected once at the start, once after the package");
  assert.equal((await pm.runtime.inspect("noxsub-after-package"))?.running, true);
  // Nothing installed this time: no second detection, nothing changed.
  const again = await applyText(host, declaration, { source: "bundle", origin: "test" });
  assert.equal(again.counts.changed, 0, again.error);
  assert.equal(detections, 2);
});
