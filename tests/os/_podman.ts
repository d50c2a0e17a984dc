/**
 * A real podman (with runc) on private storage in a temp directory, configured
 * as LAB-NOTES.md says works here, with one image imported from a busybox-static
 * root, so its digest is real. Nothing touches this machine's own containers.
 */
import { containerCli } from "../../os/container-cli/mod.ts";
import { mustRun } from "../../os/_run.ts";
import type { ContainerRuntime } from "../../src/providers.ts";

/** A container command that stops promptly on SIGTERM (sleep as PID 1 would ignore it). */
export const SERVE: string[] = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"];

/** A private podman; dispose to remove its containers and storage. */
export interface PrivatePodman extends AsyncDisposable {
  dir: string;
  env: Record<string, string>;
  /** `localhost/noxad/busybox@sha256:…` */
  image: string;
  runtime: ContainerRuntime;
  /** Run podman with this private configuration. */
  podman(...args: string[]): Promise<string>;
}

/** Set up a private podman and import the busybox image. */
export async function privatePodman(): Promise<PrivatePodman> {
  const dir = await Deno.makeTempDir({ prefix: "noxad-podman-" });
  const env = {
    CONTAINERS_CONF: `${dir}/containers.conf`,
    CONTAINERS_STORAGE_CONF: `${dir}/storage.conf`,
  };
  await Deno.writeTextFile(
    env.CONTAINERS_CONF,
    `[containers]
netns = "none"
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
log_driver = "k8s-file"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "${dir}/events.log"
runtime = "runc"
tmp_dir = "${dir}/tmp"
`,
  );
  await Deno.writeTextFile(
    env.CONTAINERS_STORAGE_CONF,
    `[storage]\ndriver = "vfs"\ngraphroot = "${dir}/graph"\nrunroot = "${dir}/run"\n`,
  );
  const podman = async (...args: string[]) =>
    (await mustRun(["podman", ...args], { env, timeoutMs: 120_000 })).stdout.trim();
  const root = `${dir}/rootfs`;
  await Deno.mkdir(`${root}/bin`, { recursive: true });
  await Deno.copyFile("/bin/busybox", `${root}/bin/busybox`);
  await Deno.chmod(`${root}/bin/busybox`, 0o755);
  for (const applet of ["sh", "sleep", "cat", "echo", "true"]) {
    await Deno.symlink("busybox", `${root}/bin/${applet}`);
  }
  await mustRun(["tar", "-C", root, "-cf", `${dir}/rootfs.tar`, "."]);
  await podman(
    "import",
    "--change",
    'CMD ["/bin/sleep","3600"]',
    `${dir}/rootfs.tar`,
    "localhost/noxad/busybox:1",
  );
  const digest = await podman(
    "image",
    "inspect",
    "--format",
    "{{.Digest}}",
    "localhost/noxad/busybox:1",
  );
  return {
    dir,
    env,
    image: `localhost/noxad/busybox@${digest}`,
    runtime: containerCli({ program: "podman", env, envDir: `${dir}/container-env` }),
    podman,
    async [Symbol.asyncDispose]() {
      await podman("rm", "--all", "--force", "--time", "0").catch(() => {});
      await removeWhenQuiet(dir);
    },
  };
}

/**
 * Remove the private storage once no process works in it: conmon runs
 * `podman container cleanup` by itself after a container exits, and that would
 * recreate the storage if it were removed first.
 */
async function removeWhenQuiet(dir: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (!(await someProcessUses(dir))) {
      await Deno.remove(dir, { recursive: true }).catch((e) => {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const back = await Deno.lstat(dir).then(() => true, () => false);
      if (!back && !(await someProcessUses(dir))) return;
    }
    if (Date.now() > deadline) throw new Error(`podman processes still use ${dir}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function someProcessUses(dir: string): Promise<boolean> {
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const cmdline = await Deno.readTextFile(`/proc/${entry.name}/cmdline`).catch(() => "");
    if (cmdline.includes(dir)) return true;
  }
  return false;
}
