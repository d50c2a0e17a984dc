/**
 * A busybox with its account applets (adduser, addgroup, deluser, delgroup, passwd), as
 * Alpine builds them: Debian's busybox and busybox-static leave them out. Built once from
 * Debian's own source of busybox (apt-get source, from a private deb-src list: the
 * machine's apt configuration is not changed) with Alpine's settings for them (shadow
 * passwords, names checked, system ids 100–999), statically, and its own passwd/group
 * reading (a static glibc cannot load NSS in a chroot). Cached under
 * /var/cache/nox-mesh-host-tests; needs gcc, make, bzip2, libc6-dev and libcrypt-dev
 * (.ci/run installs them).
 */

const CACHE = Deno.env.get("NOX_TEST_CACHE") ?? "/var/cache/nox-mesh-host-tests";
const DIR = `${CACHE}/busybox-accounts`;
const BINARY = `${DIR}/busybox`;

/** Alpine's settings for the applets the account kinds use (aports main/busybox). */
const ENABLE = [
  "STATIC",
  "LONG_OPTS",
  "SHOW_USAGE",
  "ADDUSER",
  "ADDGROUP",
  "DELUSER",
  "DELGROUP",
  "FEATURE_ADDUSER_TO_GROUP",
  "FEATURE_DEL_USER_FROM_GROUP",
  "FEATURE_CHECK_NAMES",
  "FEATURE_SHADOWPASSWDS",
  "USE_BB_PWD_GRP",
  "USE_BB_SHADOW",
  "PASSWD",
];
const VALUES = { LAST_ID: "256000", FIRST_SYSTEM_ID: "100", LAST_SYSTEM_ID: "999" };

async function sh(script: string, cwd: string): Promise<void> {
  const out = await new Deno.Command("sh", {
    args: ["-eu", "-c", script],
    cwd,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    const said = new TextDecoder().decode(out.stderr).split("\n").slice(-15).join("\n");
    throw new Error(`building busybox with its account applets failed:\n${said}`);
  }
}

/** The path of the built busybox (building it on first use, a minute or so). */
export async function busyboxWithAccounts(): Promise<string> {
  try {
    await Deno.stat(BINARY);
    return BINARY;
  } catch {
    // build below
  }
  await Deno.mkdir(DIR, { recursive: true });
  const lock = await Deno.open(`${DIR}.lock`, { create: true, write: true });
  try {
    await lock.lock(true);
    try {
      await Deno.stat(BINARY);
      return BINARY;
    } catch {
      // still to build
    }
    const work = await Deno.makeTempDir({ prefix: "noxbb-" });
    try {
      const enable = ENABLE.map((o) => `-e 's/^# CONFIG_${o} is not set/CONFIG_${o}=y/'`).join(" ");
      const values = Object.entries(VALUES)
        .map(([k, v]) => `-e 's/^CONFIG_${k}=.*/CONFIG_${k}=${v}/'`).join(" ");
      await sh(
        [
          "mkdir -p apt/etc apt/lists/partial apt/cache/archives/partial src",
          "printf '%s\\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' " +
          "'Suites: bookworm' 'Components: main' " +
          "'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' > apt/etc/src.sources",
          'O="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$PWD/apt/etc ' +
          '-o Dir::State::Lists=$PWD/apt/lists -o Dir::Cache=$PWD/apt/cache"',
          "apt-get -qq $O update",
          "cd src && apt-get -qq $O source --download-only busybox",
          "tar xjf busybox_*.orig.tar.bz2 && cd busybox-*/",
          "make allnoconfig >/dev/null",
          `sed -i ${enable} ${values} .config`,
          'yes "" | make oldconfig >/dev/null',
          "make -j2 >/dev/null 2>&1 || make",
          `install -m 0755 busybox '${BINARY}.new' && mv '${BINARY}.new' '${BINARY}'`,
        ].join("\n"),
        work,
      );
    } finally {
      await Deno.remove(work, { recursive: true });
    }
    return BINARY;
  } finally {
    lock.close();
  }
}
