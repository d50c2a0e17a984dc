import { createHash } from "node:crypto";
import { join } from "node:path";
import { LabError } from "./errors.ts";
import { exists, run, tail } from "./_process.ts";
import { labKeys } from "./keys.ts";
import { APT_HOST } from "./net.ts";
import { COMPONENT, SUITE } from "../../packaging/debian/recipe.ts";

/** The three kinds of lab machine. */
export type Flavour = "systemd" | "openrc" | "plain";

/** How a base image is made: everything here goes into its cache key. */
export interface BaseRecipe {
  flavour: Flavour;
  suite: string;
  mirror: string;
  variant: string;
  include: readonly string[];
  /** Shell commands run by mmdebstrap after the install; "$1" is the root directory. */
  customize: readonly string[];
  /**
   * Debian's name of a foreign architecture (mmdebstrap --architectures), whose programs run
   * here under QEMU's user-mode emulation (binfmt_misc); absent for this host's own.
   */
  arch?: "arm64";
}

/** The architecture of a machine: this host's own, or aarch64 under QEMU (see {@link BINFMT_AARCH64}). */
export type MachineArch = "native" | "aarch64";

const MIRROR = "http://deb.debian.org/debian";

/**
 * pacman.conf of systemd machines: only the lab's local repository, mounted at /lab/repo,
 * checked as Arch checks its own: every package must carry a valid signature of a trusted
 * key (the lab packager key, added with pacman-key when the image is made), the database
 * may be unsigned; a package file installed by hand is checked when its .sig lies beside it.
 */
const PACMAN_CONF = `[options]
Architecture = auto
SigLevel = Required DatabaseOptional
LocalFileSigLevel = Optional

[noxlab]
Server = file:///lab/repo
`;

/**
 * podman in systemd machines (runc; the API/auto-update units masked): host
 * namespace networking, cgroupfs, no pids limit (machines raised with
 * `containers: true` get a cgroup2-only hierarchy whose controllers live on the
 * host's v1 side), vfs storage (overlay on the machine's overlay root is refused).
 */
const CONTAINERS_CONF = `[containers]
netns = "none"
pids_limit = 0
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
`;
const STORAGE_CONF = `[storage]
driver = "vfs"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
`;

const COMMON = [
  'printf "%s\\n" lab > "$1/etc/hostname"',
  'rm -f "$1/etc/resolv.conf" && : > "$1/etc/resolv.conf"',
];

/** The recipe of each flavour's base image. */
export const RECIPES: Readonly<Record<Flavour, BaseRecipe>> = {
  systemd: {
    flavour: "systemd",
    suite: "bookworm",
    mirror: MIRROR,
    variant: "minbase",
    include: [
      "systemd",
      "systemd-sysv",
      "dbus",
      "iproute2",
      "ca-certificates",
      "pacman-package-manager",
      "man-db",
      "podman",
      "runc",
      // The overlay, firewall and sysctl kinds' tools, and busybox for ping/nc in scenarios.
      "wireguard-tools",
      "wireguard-go",
      "nftables",
      "procps",
      "busybox",
      // The README's tarball install line fetches with curl (scenario tarball-floor).
      "curl",
    ],
    customize: [
      ...COMMON,
      // Stand-in for Arch, where every tool lives in /usr/bin (the arch permission set's spelling).
      'ln -sf /usr/sbin/nft "$1/usr/bin/nft" && ln -sf /usr/sbin/sysctl "$1/usr/bin/sysctl"',
      'for t in useradd usermod userdel groupadd groupdel; do ln -sf "/usr/sbin/$t" "$1/usr/bin/$t"; done',
      `printf '%s' '${PACMAN_CONF}' > "$1/etc/pacman.conf"`,
      'mkdir -p "$1/var/lib/pacman" "$1/var/cache/pacman/pkg" "$1/lab"',
      // Units that only cost boot time in a lab machine (no ttys, no remote clock, no apt).
      "for u in console-getty.service getty@tty1.service systemd-timesyncd.service " +
      "apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer " +
      'fstrim.timer systemd-networkd-wait-online.service; do ln -sf /dev/null "$1/etc/systemd/system/$u"; done',
      "for u in podman.service podman.socket podman-auto-update.service podman-auto-update.timer " +
      'podman-restart.service; do ln -sf /dev/null "$1/etc/systemd/system/$u"; done',
      `mkdir -p "$1/etc/containers" && printf '%s' '${CONTAINERS_CONF}' > "$1/etc/containers/containers.conf"`,
      `printf '%s' '${STORAGE_CONF}' > "$1/etc/containers/storage.conf"`,
    ],
  },
  openrc: {
    flavour: "openrc",
    suite: "bookworm",
    mirror: MIRROR,
    variant: "minbase",
    include: ["openrc", "iproute2", "procps", "minisign", "curl"],
    customize: [
      ...COMMON,
      // rc_sys="docker": never touch the host's cgroups, skip hardware set-up.
      "printf '%s\\n' 'rc_sys=\"docker\"' 'rc_cgroup_mode=\"none\"' 'rc_controller_cgroups=\"NO\"' >> \"$1/etc/rc.conf\"",
      'mkdir -p "$1/lab"',
    ],
  },
  plain: {
    flavour: "plain",
    suite: "bookworm",
    mirror: MIRROR,
    variant: "minbase",
    include: ["iproute2"],
    customize: [...COMMON, 'mkdir -p "$1/lab"'],
  },
};

/** Where a Debian machine keeps the lab key, trusted for the lab repository only. */
export const APT_KEYRING = "/etc/apt/keyrings/noxlab.gpg";

/** A Debian machine's only apt source: the lab repository over HTTP, checked against the lab key. */
export const APT_SOURCE =
  `deb [signed-by=${APT_KEYRING}] http://${APT_HOST}/ ${SUITE} ${COMPONENT}\n`;

/**
 * A Debian 12 machine as a Debian user has one (scenarios debian-*): systemd, podman and the
 * tools of the systemd flavour, no pacman and no Arch-like links (the Debian permission set
 * names programs where Debian has them); apt's only source is the lab repository, served
 * in the lab network (lib/lab.ts aptRepo) and trusted with the lab key for it alone
 * ({@link withAptKeyring} puts the key in). The host comes from its .deb (`hostFrom: "deb"`).
 */
export const DEBIAN_RECIPE: BaseRecipe = {
  flavour: "systemd",
  suite: "bookworm",
  mirror: MIRROR,
  variant: "minbase",
  include: RECIPES.systemd.include.filter((p) => p !== "pacman-package-manager"),
  customize: [
    ...COMMON,
    `printf '%s' '${APT_SOURCE}' > "$1/etc/apt/sources.list.d/noxlab.list"`,
    // Debian's archive is not reachable from a lab machine: only the lab repository.
    ': > "$1/etc/apt/sources.list" && rm -rf "$1"/var/lib/apt/lists/*_Packages',
    'mkdir -p "$1/etc/apt/keyrings" "$1/lab"',
    ...RECIPES.systemd.customize.filter((c) => /^for u in |containers/.test(c)),
  ],
};

/** The lab key as apt's signed-by wants it (a binary keyring), made once; returns its path. */
export async function aptKeyring(log: (line: string) => void = () => {}): Promise<string> {
  const keys = await labKeys(log);
  const file = join(CACHE_DIR, `apt-keyring-${keys.fingerprint.slice(-16)}.gpg`);
  if (await exists(file)) return file;
  const temp = `${file}.${crypto.randomUUID()}`;
  await Deno.mkdir(CACHE_DIR, { recursive: true });
  await Deno.writeFile(temp, dearmor(await Deno.readTextFile(keys.gpgPublic)));
  await Deno.rename(temp, file);
  return file;
}

/** The bytes of an ASCII-armored OpenPGP block (RFC 4880 §6.2): its base64 body, decoded. */
export function dearmor(armored: string): Uint8Array {
  const lines = armored.split(/\r?\n/);
  const start = lines.findIndex((l) => l.startsWith("-----BEGIN PGP "));
  const blank = lines.indexOf("", start);
  const body = lines.slice(blank + 1).filter((l) => /^[A-Za-z0-9+/=]+$/.test(l));
  const end = body.findIndex((l) => l.startsWith("="));
  const base64 = (end === -1 ? body : body.slice(0, end)).join("");
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

/** The Debian recipe with the lab key in apt's keyring for the lab repository. */
async function withAptKeyring(
  recipe: BaseRecipe,
  log: (line: string) => void,
): Promise<BaseRecipe> {
  const keyring = await aptKeyring(log);
  return { ...recipe, customize: [...recipe.customize, `cp '${keyring}' "$1${APT_KEYRING}"`] };
}

/** systemd units that only cost boot time in a lab machine (no ttys, no remote clock, no apt). */
const IDLE_UNITS = "console-getty.service getty@tty1.service systemd-timesyncd.service " +
  "apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer " +
  "fstrim.timer systemd-networkd-wait-online.service";

/**
 * Recipes of arm64 machines (scenario arm64-tarball): Debian for arm64, its programs run by
 * QEMU through binfmt_misc, also inside the machine (the entry's F flag: the interpreter was
 * opened when it was registered). Only what the tarball floor needs (curl for the README's
 * line): every package's maintainer scripts run emulated, so the image is kept small.
 */
export const ARM64_RECIPES: Readonly<Partial<Record<Flavour, BaseRecipe>>> = {
  systemd: {
    flavour: "systemd",
    arch: "arm64",
    suite: "bookworm",
    mirror: MIRROR,
    variant: "minbase",
    include: ["systemd", "systemd-sysv", "dbus", "iproute2", "procps", "ca-certificates", "curl"],
    customize: [
      ...COMMON,
      'mkdir -p "$1/lab"',
      `for u in ${IDLE_UNITS}; do ln -sf /dev/null "$1/etc/systemd/system/$u"; done`,
    ],
  },
};

/** Where binfmt_misc registers QEMU's aarch64 interpreter (Debian's qemu-user-static). */
export const BINFMT_AARCH64 = "/proc/sys/fs/binfmt_misc/qemu-aarch64";

/**
 * Why aarch64 machines cannot run on this host, or undefined when they can: this host is
 * not aarch64 itself and binfmt_misc has no enabled qemu-aarch64 entry with the F flag
 * (lab/setup.sh registers Debian's when qemu-user-static is installed).
 */
export async function aarch64Missing(): Promise<string | undefined> {
  if (Deno.build.arch === "aarch64") return undefined;
  return binfmtProblem(await Deno.readTextFile(BINFMT_AARCH64).catch(() => undefined));
}

/** What is wrong with binfmt_misc's qemu-aarch64 entry (its text; undefined: none), if anything. */
export function binfmtProblem(entry: string | undefined): string | undefined {
  if (entry === undefined) {
    return `binfmt_misc has no qemu-aarch64 entry (${BINFMT_AARCH64}); install qemu-user-static ` +
      "and run sh lab/setup.sh, which registers it";
  }
  if (!/^enabled$/m.test(entry)) return `${BINFMT_AARCH64} is disabled (echo 1 > it)`;
  if (!/^flags: \S*F/m.test(entry)) {
    return `${BINFMT_AARCH64} lacks the F flag: its interpreter cannot be found inside a machine`;
  }
  return undefined;
}

/**
 * The systemd recipe plus the pacman keyring that trusts the lab packager key, made with
 * pacman-key (--init, --add, --lsign-key) and copied to the image's /etc/pacman.d/gnupg.
 * It is made in a short temporary directory (gpg-agent's socket path must be short) whose
 * agent is stopped afterwards. The key's fingerprint is part of the recipe, hence of the
 * cache key.
 */
async function withKeyring(recipe: BaseRecipe, log: (line: string) => void): Promise<BaseRecipe> {
  const keys = await labKeys(log);
  const keyring = [
    "set -e",
    "k=$(mktemp -d /tmp/noxkr.XXXXXX)",
    `trap 'gpgconf --homedir "$k" --kill all; rm -rf "$k"' EXIT`,
    'pacman-key --gpgdir "$k" --init',
    `pacman-key --gpgdir "$k" --add '${keys.gpgPublic}'`,
    `pacman-key --gpgdir "$k" --lsign-key ${keys.fingerprint}`,
    'gpgconf --homedir "$k" --kill all',
    'mkdir -p "$1/etc/pacman.d"',
    'cp -a "$k" "$1/etc/pacman.d/gnupg"',
    'rm -f "$1"/etc/pacman.d/gnupg/S.*',
  ].join("; ");
  return { ...recipe, customize: [...recipe.customize, keyring] };
}

/** Where base images are cached (outside the repository; survives runs). */
export const CACHE_DIR: string = Deno.env.get("NOXLAB_CACHE_DIR") ??
  "/var/cache/nox-mesh-host-lab";

/** The cache key of a recipe: flavour plus a hash of everything that shapes the image. */
export function recipeKey(recipe: BaseRecipe | NoGlibcRecipe): string {
  const hash = createHash("sha256").update(JSON.stringify(recipe)).digest("hex");
  if ("libc" in recipe) return `${recipe.flavour}-${recipe.libc}-${hash.slice(0, 16)}`;
  return `${recipe.arch ? `${recipe.arch}-` : ""}${recipe.flavour}-${hash.slice(0, 16)}`;
}

/** A ready base image. */
export interface BaseImage {
  key: string;
  rootfs: string;
  /** True when this call built it (a cold start). */
  built: boolean;
  buildMs: number;
}

/**
 * A root with no glibc at all (scenario no-glibc): Debian's busybox-static (a static
 * program: its applets as links, /bin/sh among them) and musl's dynamic loader, as Alpine
 * names it, copied from this host; no package manager, no init but the lab's plain one.
 * The packages' versions are part of the recipe, hence of the cache key.
 */
export interface NoGlibcRecipe {
  flavour: "plain";
  libc: "musl";
  /** Debian's busybox-static and musl versions on this host. */
  busybox: string;
  musl: string;
  /** The machine architecture (Debian's name) whose musl loader it carries. */
  arch: string;
}

/** Where musl's loader lies in Debian's musl package, and its name in an Alpine root. */
const MUSL: Record<string, { from: string; loader: string }> = {
  amd64: { from: "/usr/lib/x86_64-linux-musl/libc.so", loader: "ld-musl-x86_64.so.1" },
  arm64: { from: "/usr/lib/aarch64-linux-musl/libc.so", loader: "ld-musl-aarch64.so.1" },
};

/** The recipe of this host's no-glibc root (the installed busybox-static and musl). */
export async function noGlibcRecipe(): Promise<NoGlibcRecipe> {
  const query = async (what: string, format: string) => {
    const r = await run(["dpkg-query", "-W", "-f", format, what], {
      check: false,
      what: "dpkg-query",
    });
    if (r.code !== 0 || r.stdout.trim() === "") {
      throw new LabError(
        "missing-tool",
        `a machine with no glibc is made from Debian's busybox-static and musl; ${what} is not ` +
          "installed (sh lab/setup.sh)",
      );
    }
    return r.stdout.trim();
  };
  return {
    flavour: "plain",
    libc: "musl",
    busybox: await query("busybox-static", "${Version}"),
    musl: await query("musl", "${Version}"),
    arch: await query("musl", "${Architecture}"),
  };
}

/**
 * Builds the no-glibc root in `rootfs`: busybox (checked to be static: no program
 * interpreter) and `busybox --install -s` run inside it, musl's loader as Alpine names
 * it (with Alpine's libc.musl link), root's passwd/group/shadow, an os-release saying
 * what it is, and the directories a machine needs. Then it checks that no glibc is there.
 */
async function buildNoGlibc(recipe: NoGlibcRecipe, rootfs: string): Promise<void> {
  const musl = MUSL[recipe.arch];
  if (!musl) throw new LabError("usage", `no musl loader known for ${recipe.arch}`);
  const dirs = ["bin", "sbin", "usr/bin", "usr/sbin", "usr/local", "lib", "etc", "proc", "sys"];
  dirs.push("dev", "run", "tmp", "root", "srv", "lab", "var/lib", "var/log");
  for (const d of dirs) await Deno.mkdir(join(rootfs, d), { recursive: true });
  await Deno.chmod(join(rootfs, "tmp"), 0o1777);
  const busybox = await Deno.realPath("/bin/busybox");
  if (!isStaticElf(await Deno.readFile(busybox))) {
    throw new LabError(
      "missing-tool",
      `${busybox} is not a static program (Debian's busybox, not busybox-static?): a root with ` +
        "no glibc needs busybox-static (sh lab/setup.sh)",
    );
  }
  await Deno.copyFile(busybox, join(rootfs, "bin/busybox"));
  await Deno.chmod(join(rootfs, "bin/busybox"), 0o755);
  await run(["/usr/sbin/chroot", rootfs, "/bin/busybox", "--install", "-s"], {
    what: "busybox --install",
  });
  await Deno.copyFile(musl.from, join(rootfs, "lib", musl.loader));
  await Deno.chmod(join(rootfs, "lib", musl.loader), 0o755);
  await Deno.symlink(
    musl.loader,
    join(rootfs, "lib", musl.loader.replace(/^ld-musl/, "libc.musl")),
  );
  const files: Record<string, string> = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n",
    "etc/group": "root:x:0:root\nnogroup:x:65534:\n",
    "etc/shadow": "root:*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n",
    "etc/os-release": 'ID=lab-musl\nNAME="lab root: busybox-static and musl, no glibc"\n',
    "etc/hostname": "lab\n",
    "etc/resolv.conf": "",
  };
  for (const [path, text] of Object.entries(files)) {
    await Deno.writeTextFile(join(rootfs, path), text);
  }
  await Deno.chmod(join(rootfs, "etc/shadow"), 0o600);
  const glibc = await run(["find", rootfs, "-name", "libc.so.6", "-o", "-name", "ld-linux-*"], {
    what: "find",
  });
  if (glibc.stdout.trim() !== "") {
    throw new LabError("base-build-failed", `the no-glibc root holds glibc: ${glibc.stdout}`);
  }
}

/** Whether a 64-bit ELF file has no program interpreter (PT_INTERP): a static program. */
function isStaticElf(bytes: Uint8Array): boolean {
  if (bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[4] !== 2) return false;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const phoff = Number(view.getBigUint64(32, true));
  const phentsize = view.getUint16(54, true);
  const phnum = view.getUint16(56, true);
  for (let i = 0; i < phnum; i++) {
    if (view.getUint32(phoff + i * phentsize, true) === 3) return false;
  }
  return true;
}

/**
 * Returns the base image of a flavour, building it with mmdebstrap when it is not
 * cached (the no-glibc root, `glibc: false`, by copying: {@link buildNoGlibc}). A lock
 * file makes concurrent callers wait for one build.
 */
export async function ensureBase(
  flavour: Flavour,
  log: (line: string) => void = () => {},
  arch: MachineArch = "native",
  { glibc = true, debian = false }: { glibc?: boolean; debian?: boolean } = {},
): Promise<BaseImage> {
  if (!glibc && (flavour !== "plain" || arch !== "native")) {
    throw new LabError("usage", "a machine with no glibc is a plain machine of this host's arch");
  }
  if (debian && (flavour !== "systemd" || arch !== "native")) {
    throw new LabError(
      "usage",
      "a Debian machine (its .deb) is a systemd machine of this host's arch",
    );
  }
  const recipe = !glibc
    ? await noGlibcRecipe()
    : debian
    ? await withAptKeyring(DEBIAN_RECIPE, log)
    : arch === "native"
    ? flavour === "systemd" ? await withKeyring(RECIPES.systemd, log) : RECIPES[flavour]
    : ARM64_RECIPES[flavour];
  if (!recipe) {
    throw new LabError("usage", `no ${arch} recipe for ${flavour} machines (lab/lib/base.ts)`);
  }
  if (arch === "aarch64") {
    const missing = await aarch64Missing();
    if (missing) throw new LabError("missing-tool", `cannot raise an aarch64 machine: ${missing}`);
  }
  const key = recipeKey(recipe);
  const dir = join(CACHE_DIR, key);
  const rootfs = join(dir, "rootfs");
  if (await exists(join(dir, "ready"))) return { key, rootfs, built: false, buildMs: 0 };
  await Deno.mkdir(CACHE_DIR, { recursive: true });
  const lock = await Deno.open(join(CACHE_DIR, `${key}.lock`), { create: true, write: true });
  try {
    await lock.lock(true);
    if (await exists(join(dir, "ready"))) return { key, rootfs, built: false, buildMs: 0 };
    const started = Date.now();
    if ("libc" in recipe) {
      log(`building base image ${key}: busybox-static and musl, no glibc (once; ${CACHE_DIR})`);
      await buildCopied(recipe, dir);
    } else {
      log(`building base image ${key} with mmdebstrap (once; cached in ${CACHE_DIR})`);
      await build(recipe, dir);
    }
    return { key, rootfs, built: true, buildMs: Date.now() - started };
  } finally {
    lock.close();
  }
}

/** Builds the no-glibc root into `dir` (as {@link build} does an mmdebstrap one). */
async function buildCopied(recipe: NoGlibcRecipe, dir: string): Promise<void> {
  const temp = `${dir}.building`;
  await Deno.remove(temp, { recursive: true }).catch(() => {});
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(join(temp, "rootfs"), { recursive: true });
  try {
    await buildNoGlibc(recipe, join(temp, "rootfs"));
  } catch (error) {
    await Deno.remove(temp, { recursive: true }).catch(() => {});
    throw error;
  }
  await Deno.writeTextFile(join(temp, "recipe.json"), JSON.stringify(recipe, null, 2) + "\n");
  await Deno.writeTextFile(join(temp, "ready"), new Date().toISOString() + "\n");
  await Deno.rename(temp, dir);
}

async function build(recipe: BaseRecipe, dir: string): Promise<void> {
  const temp = `${dir}.building`;
  await Deno.remove(temp, { recursive: true }).catch(() => {});
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(temp, { recursive: true });
  const argv = [
    "mmdebstrap",
    "--mode=root",
    "--format=directory",
    `--variant=${recipe.variant}`,
    "--skip=output/mknod",
    ...(recipe.arch ? [`--architectures=${recipe.arch}`] : []),
    `--include=${recipe.include.join(",")}`,
    ...recipe.customize.map((hook) => `--customize-hook=${hook}`),
    recipe.suite,
    join(temp, "rootfs"),
    recipe.mirror,
  ];
  const result = await run(argv, { check: false, what: "mmdebstrap" });
  if (result.code !== 0) {
    await Deno.remove(temp, { recursive: true }).catch(() => {});
    throw new LabError(
      "base-build-failed",
      `building the ${
        recipe.arch ? `${recipe.arch} ` : ""
      }${recipe.flavour} base image failed (mmdebstrap exit ${result.code}); ` +
        `check that ${recipe.mirror} is reachable and mmdebstrap is installed (sh lab/setup.sh):\n` +
        tail(result.stderr),
    );
  }
  await Deno.writeTextFile(join(temp, "recipe.json"), JSON.stringify(recipe, null, 2) + "\n");
  await Deno.writeTextFile(join(temp, "ready"), new Date().toISOString() + "\n");
  await Deno.rename(temp, dir);
}
