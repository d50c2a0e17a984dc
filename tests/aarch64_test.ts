// The aarch64 builds, run on this x86_64 machine under QEMU's user-mode emulation (Debian's
// qemu-user-static, with the arm64 C library of libc6-arm64-cross and libgcc-s1-arm64-cross):
// the aarch64 tarball and Arch package carry the arm64 runtime, the tarball's host answers
// `version` and `profile`, applies a declaration of files and directories and applies it
// again unchanged; the Arch package installs with pacman for aarch64 and its host answers; the
// carried image's arm64 instance runs as a podman container.
// Each emulated start of the host takes seconds: these tests are few on purpose.
//
// An aarch64 program runs here through binfmt_misc: the tests register Debian's
// qemu-aarch64 entry (/usr/lib/binfmt.d/qemu-aarch64.conf, flags OPF: the interpreter is
// opened once, so it works inside the sandbox's namespace) when it is not registered yet,
// mounting binfmt_misc if needed, and leave it registered (other runs may be using it). The
// sandbox's /usr/lib gets the arm64 loader and libraries where an aarch64 Debian has them.
import assert from "node:assert/strict";
import { join } from "node:path";
import { build, type BuildResult } from "../packaging/build.ts";
import { packageArch, packageTarball } from "../packaging/make_package.ts";
import { EMULATORS, runtimePins } from "../packaging/tarball/runtime.ts";
import { VERSION } from "../src/version.ts";
import { IMAGE_FILE, IMAGE_NAME, pauseImage } from "../packaging/image.ts";
import { privatePodman } from "./os/_podman.ts";
import {
  hideDeno,
  makeSandbox,
  place,
  removeSandbox,
  runInSandbox,
  type Sandbox,
} from "./_sandbox.ts";

const { qemu: QEMU, libs: LIBS } = EMULATORS.aarch64;
const BINFMT = "/proc/sys/fs/binfmt_misc";
const BINFMT_CONF = "/usr/lib/binfmt.d/qemu-aarch64.conf";

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

/** Why these tests cannot run here, or undefined when they can. */
async function missing(): Promise<string | undefined> {
  for (
    const [path, pkg] of [[QEMU, "qemu-user-static"], [BINFMT_CONF, "qemu-user-static"], [
      `${LIBS}/lib/ld-linux-aarch64.so.1`,
      "libc6-arm64-cross",
    ], [`${LIBS}/lib/libgcc_s.so.1`, "libgcc-s1-arm64-cross"]]
  ) {
    if (!(await exists(path))) return `no ${path} (apt-get install ${pkg})`;
  }
  if (Deno.uid() !== 0) return "not root (binfmt_misc and the sandbox need it)";
  return undefined;
}
const SKIP = Deno.build.arch === "aarch64" ? "this machine is aarch64" : await missing();
const skipped = SKIP ? ` (SKIPPED: ${SKIP})` : "";

async function sh(script: string): Promise<{ code: number; out: string }> {
  const o = await new Deno.Command("sh", { args: ["-c", script], stdin: "null" }).output();
  const d = new TextDecoder();
  return { code: o.code, out: d.decode(o.stdout) + d.decode(o.stderr) };
}

/** Registers QEMU's aarch64 entry with binfmt_misc unless it is there (see the top). */
async function ensureBinfmt(): Promise<void> {
  if (!(await exists(`${BINFMT}/register`))) {
    const m = await sh(`mount -t binfmt_misc binfmt_misc ${BINFMT}`);
    assert.equal(m.code, 0, `mount binfmt_misc: ${m.out}`);
  }
  if (!(await exists(`${BINFMT}/qemu-aarch64`))) {
    const line = (await Deno.readTextFile(BINFMT_CONF)).trim();
    // Another run may register it at the same moment: then it exists all the same.
    await Deno.writeTextFile(`${BINFMT}/register`, line).catch(() => {});
  }
  const state = await Deno.readTextFile(`${BINFMT}/qemu-aarch64`);
  assert.match(state, /^enabled$/m, state);
}

/**
 * The sandbox as an aarch64 Debian lays out its C library (/lib is /usr/lib here), and
 * no deno anywhere: whiteouts hide this machine's.
 */
async function aarch64Sandbox(): Promise<Sandbox> {
  const s = await makeSandbox();
  await Deno.mkdir(s.upper("/usr/lib"), { recursive: true });
  await Deno.symlink(
    `${LIBS}/lib/ld-linux-aarch64.so.1`,
    s.upper("/usr/lib/ld-linux-aarch64.so.1"),
  );
  await Deno.symlink(`${LIBS}/lib`, s.upper("/usr/lib/aarch64-linux-gnu"));
  await hideDeno(s);
  return s;
}

/** The e_machine of an ELF file. */
async function elfMachine(path: string): Promise<number> {
  const head = (await Deno.readFile(path)).subarray(0, 20);
  return new DataView(head.buffer, head.byteOffset).getUint16(18, true);
}

async function sha256(path: string): Promise<string> {
  const hash = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
}

const EM_AARCH64 = 183;

Deno.test({
  name:
    `aarch64 tarball under QEMU: it carries the arm64 runtime; unpacked where no deno exists, the host says version and profile (aarch64) and applies files and directories: converged, then unchanged${skipped}`,
  ignore: SKIP !== undefined,
  async fn() {
    await ensureBinfmt();
    const dir = await Deno.makeTempDir({ prefix: "noxpk-arm64-" });
    const s = await aarch64Sandbox();
    try {
      const b = await build({
        os: "tarball",
        form: "bundled",
        arch: "aarch64",
        out: join(dir, "t"),
      });
      assert.equal(b.arch, "aarch64");
      assert.equal(b.runtime, (await runtimePins()).version);
      assert.equal(await elfMachine(join(b.dir, "deno")), EM_AARCH64, "an arm64 runtime");
      const tarball = await packageTarball(b);
      assert.equal(tarball.split("/").pop(), `nox-mesh-host-${VERSION}-aarch64.tar.gz`);
      const declaration = JSON.stringify({
        version: 1,
        resources: [
          {
            type: "directory",
            id: "d",
            path: "/srv/arm",
            mode: "0750",
            owner: "root",
            group: "root",
          },
          {
            type: "file",
            id: "f",
            path: "/srv/arm/hello.txt",
            content: "hello from aarch64\n",
            mode: "0640",
            owner: "root",
            group: "root",
          },
          {
            type: "file",
            id: "g",
            path: "/etc/arm64-check.conf",
            content: "x = 1\n",
            mode: "0644",
            owner: "root",
            group: "0",
          },
        ],
      });
      await place(s, "/srv/noxpk-decl.json", declaration);
      const script = `set -eu
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        if command -v deno >/dev/null; then echo "a deno is on PATH" >&2; exit 1; fi
        tar -xz -C /usr/local < '${tarball}'
        nox-mesh-host version --json
        nox-mesh-host profile --json
        nox-mesh-host apply --json - < /srv/noxpk-decl.json
        nox-mesh-host apply --json - < /srv/noxpk-decl.json
        cat /srv/arm/hello.txt
        stat -c '%a %U %G' /srv/arm /srv/arm/hello.txt`;
      const r = await runInSandbox(s, ["sh", "-c", script]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const lines = r.stdout.trim().split("\n");
      const [version, profile, first, second] = lines.slice(0, 4).map((l) => JSON.parse(l));
      assert.equal(version.version, VERSION);
      assert.equal(version.arch, "aarch64", "the aarch64 runtime runs it");
      assert.equal(version.deno, (await runtimePins()).version);
      assert.equal(profile.architecture, "aarch64");
      assert.equal(first.outcome, "converged", JSON.stringify(first));
      assert.deepEqual(first.counts, {
        changed: 3,
        unchanged: 0,
        removed: 0,
        forgotten: 0,
        failed: 0,
      });
      assert.equal(second.outcome, "converged", JSON.stringify(second));
      assert.deepEqual(second.counts, {
        changed: 0,
        unchanged: 3,
        removed: 0,
        forgotten: 0,
        failed: 0,
      });
      assert.deepEqual(lines.slice(4), ["hello from aarch64", "750 root root", "640 root root"]);
    } finally {
      await removeSandbox(s);
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    `aarch64 Arch package under QEMU: makepkg builds it for aarch64 with the arm64 runtime and no deno dependency; pacman for aarch64 installs it and its host answers${skipped}`,
  ignore: SKIP !== undefined,
  async fn() {
    await ensureBinfmt();
    const dir = await Deno.makeTempDir({ prefix: "noxpk-arm64-" });
    await Deno.chmod(dir, 0o755); // makepkg runs as nobody
    const s = await aarch64Sandbox();
    try {
      const b = await build({ os: "arch", form: "bundled", arch: "aarch64", out: join(dir, "a") });
      const pkg = await packageArch(b, 1);
      assert.equal(pkg.split("/").pop(), `nox-mesh-host-${VERSION}-1-aarch64.pkg.tar.gz`);
      const script = `set -eu
        mkdir -p /var/lib/pacman
        pacman --arch aarch64 --noconfirm -U '${pkg}' >&2
        pacman -Qi nox-mesh-host | grep -E '^(Architecture|Depends On)'
        od -An -tu2 -j18 -N2 /usr/lib/nox-mesh-host/deno
        /usr/bin/nox-mesh-host version --json`;
      const r = await runInSandbox(s, ["sh", "-c", script]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const lines = r.stdout.trim().split("\n").map((l) => l.replace(/ +/g, " ").trim());
      assert.deepEqual(lines.slice(0, 3), [
        "Architecture : aarch64",
        "Depends On : None",
        String(EM_AARCH64),
      ]);
      const version = JSON.parse(lines[3]);
      assert.equal(version.arch, "aarch64");
      assert.equal(version.deno, (await runtimePins()).version);
    } finally {
      await removeSandbox(s);
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    `aarch64 substrate image under QEMU: podman choosing arm64 from the carried archive stores the arm64 instance, which answers to the digest the bundles pin, and its container runs and stops on SIGTERM with 0${skipped}`,
  ignore: SKIP !== undefined,
  async fn() {
    await ensureBinfmt();
    await using pm = await privatePodman();
    const image = await pauseImage();
    const archive = join(pm.dir, IMAGE_FILE);
    await Deno.writeFile(archive, image.archive);
    // `podman load` takes the machine's platform; an aarch64 machine's choice, made here.
    await pm.podman("pull", "--arch", "arm64", `oci-archive:${archive}`);
    const pinned = `${IMAGE_NAME}@${image.digest}`;
    assert.equal(
      await pm.podman("image", "inspect", "--format", "{{.Architecture}}", pinned),
      "arm64",
    );
    const digests = await pm.podman("image", "inspect", "--format", "{{.RepoDigests}}", pinned);
    assert.ok(digests.includes(`${IMAGE_NAME}@${image.manifests.aarch64}`), digests);
    await pm.podman("run", "--detach", "--name", "pause-arm64", pinned);
    assert.equal(
      await pm.podman("container", "inspect", "--format", "{{.State.Running}}", "pause-arm64"),
      "true",
    );
    await pm.podman("stop", "--time", "60", "pause-arm64");
    assert.equal(
      await pm.podman("container", "inspect", "--format", "{{.State.ExitCode}}", "pause-arm64"),
      "0",
      "stopped by its SIGTERM handler, not killed (137)",
    );
  },
});

Deno.test("release: the tarballs of both architectures in one directory, one SHA256SUMS over both (signed with minisign); each architecture's tarball is reproducible", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-release-" });
  try {
    const key = join(dir, "release.key");
    const pub = join(dir, "release.pub");
    const gen = await sh(`minisign -G -W -p '${pub}' -s '${key}' >/dev/null`);
    assert.equal(gen.code, 0, gen.out);
    const release = join(dir, "release");
    const built: BuildResult[] = [];
    for (const arch of ["x86_64", "aarch64"] as const) {
      const b = await build({ os: "tarball", form: "bundled", arch, out: join(dir, arch) });
      built.push(b);
      await packageTarball(b, undefined, {
        into: release,
        minisign: { secretKey: key, publicKey: pub },
      });
    }
    const names = ["x86_64", "aarch64"].map((a) => `nox-mesh-host-${VERSION}-${a}.tar.gz`);
    const sums = await Deno.readTextFile(join(release, "SHA256SUMS"));
    assert.deepEqual(sums.trim().split("\n").map((l) => l.split("  ")[1]), [...names].sort());
    const check = await sh(
      `cd '${release}' && minisign -Vm SHA256SUMS -p '${pub}' && sha256sum -c SHA256SUMS`,
    );
    assert.equal(check.code, 0, check.out);
    for (const name of names) assert.match(check.out, new RegExp(`${name}: OK`));
    // Built again from the same checkout: the same bytes, per architecture.
    const again = await build({
      os: "tarball",
      form: "bundled",
      arch: "aarch64",
      out: join(dir, "again"),
    });
    const second = await packageTarball(again);
    assert.equal(await sha256(second), await sha256(join(release, names[1])));
    assert.notEqual(
      await sha256(join(release, names[0])),
      await sha256(join(release, names[1])),
      "each architecture its own tarball",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
