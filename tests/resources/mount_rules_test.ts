/**
 * What the parse refuses of a mount resource, with its JSON path and what to do: where it
 * may be mounted (never a root, /, /proc, the host's own paths or a directory above them;
 * no character a boot record cannot carry), what may be mounted (a device, never through a
 * directory others write; a tmpfs; a bind of a managed directory, never of / or the host's
 * state), which options (never one that lets users mount, mounts a file, binds recursively
 * or decides the boot; suid or dev never on a tmpfs everyone may write), and in which order
 * (nothing declared before the mount it lies in).
 */
import assert from "node:assert/strict";
import { loadConfig } from "../../src/config.ts";
import { DeclarationRefused } from "../../src/declaration/envelope.ts";
import type { ParseOptions } from "../../src/declaration/options.ts";
import { parseDeclaration } from "../../src/engine/parse.ts";
import { ALL_OWN_PATHS } from "../../packaging/own_paths_by_os.ts";

const options: ParseOptions = {
  managedRoots: ["/etc", "/srv", "/opt", "/var/lib", "/var/log", "/usr/local", "/home"],
  own: (await loadConfig({ env: () => undefined, ownPaths: ALL_OWN_PATHS })).own,
  origin: "test.json",
};

const doc = (resources: unknown[]) => JSON.stringify({ version: 1, resources });
const mount = (fields: Record<string, unknown> = {}) => ({
  type: "mount",
  id: "m",
  target: "/srv/data",
  source: "tmpfs",
  fstype: "tmpfs",
  ...fields,
});

async function refused(resources: unknown[], path: string, message: RegExp) {
  let error: unknown;
  try {
    await parseDeclaration(doc(resources), options);
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof DeclarationRefused, `expected a refusal, got ${error}`);
  const found = error.problems.find((p) => p.path === path && message.test(p.message));
  assert.ok(found, `no problem at ${path} matching ${message}; got:\n${error.message}`);
}

Deno.test("mount rules: accepted: a device, a tmpfs, a bind, with flags and options", async () => {
  const d = await parseDeclaration(
    doc([
      mount({
        source: "UUID=3b1d2c7e-11",
        fstype: "ext4",
        options: ["noatime", "errors=remount-ro"],
      }),
      mount({ id: "t", target: "/srv/data/tmp", options: ["size=64m", "mode=0755", "suid"] }),
      mount({ id: "l", target: "/opt/disk", source: "LABEL=data_1", fstype: "xfs" }),
      mount({
        id: "p",
        target: "/opt/vdb",
        source: "/dev/vdb1",
        fstype: "btrfs",
        options: ["subvol=/@x"],
      }),
      mount({
        id: "b",
        target: "/srv/www",
        source: "/srv/data/www",
        fstype: "bind",
        options: ["ro"],
      }),
    ]),
    options,
  );
  assert.equal(d.resources.length, 5);
});

Deno.test("mount rules: never at /, a root, outside the roots, or the host's own paths and above them", async () => {
  const where = [
    ["/", /root directory/],
    ["/srv", /managed root itself/],
    ["/proc/x", /outside the managed roots/],
    ["/run/x", /outside the managed roots/],
    ["/dev/x", /outside the managed roots/],
    ["/var", /outside the managed roots/],
    ["/var/lib/mesh-host", /belongs to the host itself/],
    ["/var/lib/mesh-host/x", /belongs to the host itself/],
    ["/etc/systemd", /contains the host's own/],
    ["/etc/mesh-host", /belongs to the host itself/],
  ] as const;
  for (const [target, message] of where) {
    await refused([mount({ target })], "resources[0].target", message);
  }
  for (const target of ["/srv/a b", "/srv/a\\b", "/srv/a%i", "/srv/it's", '/srv/a"b']) {
    await refused([mount({ target })], "resources[0].target", /cannot carry as written/);
  }
});

Deno.test("mount rules: a bind never of /, a root, the host's state or a directory above it, nor below its target", async () => {
  const bind = (source: string, target = "/srv/x") => mount({ source, target, fstype: "bind" });
  await refused([bind("/")], "resources[0].source", /root directory/);
  await refused([bind("/etc")], "resources[0].source", /managed root itself/);
  await refused([bind("/var/lib/mesh-host")], "resources[0].source", /belongs to the host/);
  await refused([bind("/var/lib")], "resources[0].source", /managed root itself/);
  await refused([bind("/etc/systemd")], "resources[0].source", /contains the host's own/);
  await refused([bind("/root")], "resources[0].source", /outside the managed roots/);
  await refused([bind("/srv/x/y")], "resources[0].source", /at or below the target/);
  await refused([bind("/srv/a b")], "resources[0].source", /cannot carry/);
  await refused([bind("srv/x")], "resources[0].source", /relative/);
});

Deno.test("mount rules: a bind of where users keep what they write, onto root's configuration (/etc, /usr, /boot, /root, /var/lib, /srv), is refused", async () => {
  const bind = (source: string, target: string) => mount({ source, target, fstype: "bind" });
  for (const target of ["/etc/sudoers.d", "/var/lib/app", "/srv/www", "/usr/local/bin"]) {
    await refused(
      [bind("/home/alice", target)],
      "resources[0].source",
      new RegExp(
        `a bind of /home/alice \\(under /home, where users keep what they write\\) onto ` +
          `${target.replaceAll("/", "\\/")} \\(under /(etc|var/lib|srv|usr)\\) is refused: it ` +
          "would make a user's files root's configuration",
      ),
    );
  }
  // Elsewhere it may (what the source's owner can write is theirs to show there); a source
  // of root's under /srv onto /etc is checked on the machine (tests/resources/mount_test.ts).
  assert.ok(await parseDeclaration(doc([bind("/home/alice/www", "/opt/www")]), options));
  assert.ok(await parseDeclaration(doc([bind("/srv/conf", "/etc/app")]), options));
});

Deno.test("mount rules: a device by UUID=, LABEL= or /dev, never where others write, and only a kernel filesystem", async () => {
  const device = (source: string) => mount({ source, fstype: "ext4" });
  for (const source of ["/dev/shm/disk.img", "/dev/mqueue/x", "/dev/pts/3", "/dev/fd/3"]) {
    await refused([device(source)], "resources[0].source", /others may put a file/);
  }
  await refused([device("sda1")], "resources[0].source", /names no device/);
  await refused([device("LABEL=a b")], "resources[0].source", /names no device/);
  await refused([device("UUID=../x")], "resources[0].source", /names no device/);
  await refused([device("/dev/../etc/x")], "resources[0].source", /contains "\.\."/);
  await refused([device("/dev/a,b")], "resources[0].source", /no device name has/);
  await refused([mount({ source: "-o" })], "resources[0].source", /a tmpfs's source is its name/);
  for (const fstype of ["fuse.sshfs", "nfs", "cifs", "overlay", "proc", "none"]) {
    await refused([mount({ fstype })], "resources[0].fstype", /fstype is one of bind, tmpfs, ext2/);
  }
});

Deno.test("mount rules: options that let users mount, mount a file, bind recursively or decide the boot are refused", async () => {
  const cases = [
    ["user", /lets users other than root mount/],
    ["users", /lets users other than root mount/],
    ["owner", /lets users other than root mount/],
    ["loop", /mounts a file as a device/],
    ["offset=0", /mounts a file as a device/],
    ["rbind", /recursive bind carries every mount below/],
    ["bind", /declared with "fstype": "bind"/],
    ["remount", /remounts when the declaration changes/],
    ["nofail", /boot record the host writes decides/],
    ["defaults", /boot record the host writes decides/],
    ["shared", /propagation is left/],
    ["x-systemd.automount", /not an option this host passes on/],
    ["X-mount.mkdir", /not an option this host passes on/],
    ["a,b", /not an option this host passes on/],
    ["size=1 m", /not an option this host passes on/],
    ["norelatime", /say one of noatime, relatime, strictatime/],
    ["suid=1", /a flag takes no value/],
  ] as const;
  for (const [option, message] of cases) {
    await refused([mount({ options: [option] })], "resources[0].options[0]", message);
  }
  await refused([mount({ options: ["ro", "rw"] })], "resources[0].options", /both ro and rw/);
  await refused([mount({ options: ["noatime", "relatime"] })], "resources[0].options", /both/);
  await refused([mount({ options: ["ro", "ro"] })], "resources[0].options[1]", /given twice/);
  await refused(
    [mount({ fstype: "bind", source: "/srv/src", options: ["size=1m"] })],
    "resources[0].options[0]",
    /a bind takes only flags/,
  );
  await refused(
    [mount({ options: Array.from({ length: 33 }, (_, i) => `o${i}`) })],
    "resources[0].options",
    /at most 32/,
  );
});

Deno.test("mount rules: suid or dev on a tmpfs everyone may write is refused (its mode is 1777 unless said)", async () => {
  await refused([mount({ options: ["suid"] })], "resources[0].options", /suid on a tmpfs everyone/);
  await refused(
    [mount({ options: ["dev", "mode=0775"] })],
    "resources[0].options",
    /dev on a tmpfs/,
  );
  await parseDeclaration(doc([mount({ options: ["suid", "dev", "mode=0700"] })]), options);
});

Deno.test("mount rules: nothing is declared before the mount it lies in", async () => {
  const dir = (id: string, path: string) => ({
    type: "directory",
    id,
    path,
    mode: "0755",
    owner: "root",
    group: "root",
  });
  await refused(
    [dir("d", "/srv/data"), dir("in", "/srv/data/x"), mount()],
    "resources[1]",
    /\/srv\/data\/x lies inside the mount at \/srv\/data \(resources\[2\]\), declared after it/,
  );
  await refused(
    [mount({ id: "b", target: "/srv/www", source: "/srv/data/www", fstype: "bind" }), mount()],
    "resources[0]",
    /\/srv\/data\/www lies in the mount at \/srv\/data \(resources\[1\]\), declared after this one/,
  );
  await refused(
    [mount({ id: "inner", target: "/srv/data/inner" }), mount()],
    "resources[0]",
    /lies inside the mount at \/srv\/data/,
  );
  // The directory at the target is declared before its mount (it is the mount point).
  await parseDeclaration(
    doc([dir("d", "/srv/data"), mount(), dir("in", "/srv/data/x")]),
    options,
  );
  await refused([mount(), mount({ id: "n" })], "resources[1]", /both manage mount \/srv\/data/);
});
