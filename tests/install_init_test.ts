/**
 * packaging/tarball/nox-mesh-host-install-init as a program (issue 21), run as root
 * against a scratch --root: it never writes through a name planted where it puts
 * its temporary file, and it refuses a root (or any directory on the way) that
 * another user can change, where a planted or swapped name would make it write
 * elsewhere as root. The script and its init files are laid out as the tarball
 * lays them (bin/, lib/nox-mesh-host/init/), from this checkout.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { tarballConfd, tarballInitd, tarballUnit } from "../packaging/tarball/init_files.ts";
const REPO = new URL("..", import.meta.url).pathname;

const NOBODY = 65534;

async function run(argv: string[], user?: number) {
  const args = user === undefined
    ? argv
    : ["setpriv", `--reuid=${user}`, `--regid=${user}`, "--clear-groups", "--", ...argv];
  const out = await new Deno.Command(args[0], { args: args.slice(1), stdin: "null" }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

/** A prefix holding the script and its init files; returns the script's path. */
async function prefix(dir: string): Promise<string> {
  const bin = join(dir, "prefix", "bin");
  const init = join(dir, "prefix", "lib", "nox-mesh-host", "init");
  await Deno.mkdir(bin, { recursive: true });
  await Deno.mkdir(init, { recursive: true });
  const script = join(bin, "nox-mesh-host-install-init");
  await Deno.copyFile(join(REPO, "packaging/tarball/nox-mesh-host-install-init"), script);
  await Deno.chmod(script, 0o755);
  const read = (p: string) => Deno.readTextFile(join(REPO, p));
  await Deno.writeTextFile(
    join(init, "nox-mesh-host.service"),
    tarballUnit(await read("packaging/arch/nox-mesh-host.service")),
  );
  await Deno.writeTextFile(
    join(init, "nox-mesh-host.initd"),
    tarballInitd(await read("packaging/alpine/nox-mesh-host.initd")),
  );
  await Deno.writeTextFile(
    join(init, "nox-mesh-host.confd"),
    tarballConfd(await read("packaging/alpine/nox-mesh-host.confd")),
  );
  return script;
}

/** A scratch directory (0755, root's, under /tmp) removed afterwards. */
async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-init-" });
  await Deno.chmod(dir, 0o755);
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A root-only file outside the --root, as /etc/shadow would be. */
async function victim(dir: string): Promise<string> {
  const path = join(dir, "victim");
  await Deno.writeTextFile(path, "root's secret\n", { mode: 0o600 });
  await Deno.chmod(path, 0o600);
  return path;
}

async function untouched(path: string): Promise<void> {
  assert.equal(await Deno.readTextFile(path), "root's secret\n");
  assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);
}

Deno.test("install-init never writes through a name planted where its temporary file went (NAME.new-$$)", async () => {
  await withDir(async (dir) => {
    const script = await prefix(dir);
    const target = await victim(dir);
    for (const init of ["systemd", "openrc"] as const) {
      const root = join(dir, `root-${init}`);
      const place = init === "systemd" ? "etc/systemd/system" : "etc/init.d";
      const file = init === "systemd" ? "nox-mesh-host.service" : "nox-mesh-host";
      await Deno.mkdir(join(root, place), { recursive: true });
      // In a PID namespace of its own the script is PID 1, so `$$` is foreseeable there;
      // a name beside the target waits for it, and for a few other PIDs.
      for (const pid of [1, 2, 3]) {
        await Deno.symlink(target, join(root, place, `${file}.new-${pid}`));
      }
      const r = await run([
        "unshare",
        "--pid",
        "--fork",
        "--",
        "sh",
        script,
        "--init",
        init,
        "--root",
        root,
      ]);
      await untouched(target);
      assert.equal(r.code, 0, r.stderr);
      const installed = await Deno.lstat(join(root, place, file));
      assert.ok(installed.isFile, `${init}: a file of its own`);
      assert.equal(installed.mode! & 0o777, init === "systemd" ? 0o644 : 0o755);
      assert.match(await Deno.readTextFile(join(root, place, file)), /nox-mesh-host-launch/);
      // Nothing left behind but the planted links (never followed, never removed).
      const left = [...Deno.readDirSync(join(root, place))].map((e) => e.name).sort();
      assert.deepEqual(
        left.filter((n) => n.startsWith(".") || n.includes(".new-")),
        [1, 2, 3].map((p) => `${file}.new-${p}`),
      );
    }
  });
});

Deno.test("install-init refuses a root another user can change: a link that user plants there is never written through", async () => {
  await withDir(async (dir) => {
    const script = await prefix(dir);
    const target = await victim(dir);
    const root = join(dir, "root");
    await Deno.mkdir(root);
    await Deno.chown(root, NOBODY, NOBODY);
    // The user prepares the image: its directories, and links where the script writes.
    const mk = await run(["mkdir", "-p", join(root, "etc/systemd/system")], NOBODY);
    assert.equal(mk.code, 0, mk.stderr);
    for (const pid of [1, 2, 3]) {
      const ln = await run(
        ["ln", "-s", target, join(root, `etc/systemd/system/nox-mesh-host.service.new-${pid}`)],
        NOBODY,
      );
      assert.equal(ln.code, 0, ln.stderr);
    }
    const r = await run([
      "unshare",
      "--pid",
      "--fork",
      "--",
      "sh",
      script,
      "--init",
      "systemd",
      "--root",
      root,
    ]);
    await untouched(target);
    assert.equal(r.code, 73, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `${root} can be changed by another user than root .* make it root's and not group- or world-writable`,
      ),
    );
    assert.deepEqual(
      [...Deno.readDirSync(join(root, "etc/systemd/system"))].map((e) => e.name).sort(),
      [1, 2, 3].map((p) => `nox-mesh-host.service.new-${p}`),
      "nothing written",
    );

    // The same for a directory on the way that others may write (root's, mode 0777),
    // and for one that is a symbolic link to elsewhere.
    await Deno.chown(root, 0, 0);
    await Deno.chown(join(root, "etc"), 0, 0);
    await Deno.chmod(join(root, "etc"), 0o777);
    const open = await run(["sh", script, "--init", "systemd", "--root", root]);
    assert.equal(open.code, 73, open.stderr);
    assert.match(open.stderr, new RegExp(`${root}/etc can be changed by another user than root`));
    await Deno.chmod(join(root, "etc"), 0o755);
    await Deno.chown(join(root, "etc/systemd"), 0, 0);
    await Deno.remove(join(root, "etc/systemd"), { recursive: true });
    await Deno.mkdir(join(dir, "elsewhere"));
    await Deno.symlink(join(dir, "elsewhere"), join(root, "etc/systemd"));
    const linked = await run(["sh", script, "--init", "systemd", "--root", root]);
    assert.equal(linked.code, 73, linked.stderr);
    assert.match(linked.stderr, /etc\/systemd is not a directory \(a symbolic link/);
    assert.deepEqual([...Deno.readDirSync(join(dir, "elsewhere"))], []);

    // Made root's and not writable by others: installed, under /tmp (sticky) too.
    await Deno.remove(join(root, "etc/systemd"));
    const ok = await run(["sh", script, "--init", "systemd", "--root", root]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.ok((await Deno.lstat(join(root, "etc/systemd/system/nox-mesh-host.service"))).isFile);
  });
});
