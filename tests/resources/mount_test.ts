/**
 * The mount kind against the real mount(8), umount(8) and findfs (util-linux, and busybox's
 * applets as Alpine has them), loop devices (losetup, mkfs.ext4), tmpfs and bind mounts,
 * through the real engine, with systemd's boot records written below a scratch root
 * (`systemctl --root`, as image builders use it: no manager asked).
 *
 * ALWAYS in a private mount namespace this test makes: the file runs itself again under
 * `unshare -m --propagation private`, and only that run registers the tests below, so no
 * mount is ever made in the machine's own namespace (and every mount ends with it).
 */
import assert from "node:assert/strict";
import { parseMountInfo } from "../../os/_mount.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { mountUnitName, systemdMounts } from "../../os/systemd-mount/mod.ts";
import type { MountEntry, Providers } from "../../src/providers.ts";
import { outcomes, testEngine } from "../_engine.ts";

const NOBODY = 65534;
const INSIDE = Deno.env.get("NOX_TEST_MOUNT_NAMESPACE") === "1";
const IS_ROOT = Deno.uid() === 0;

if (!INSIDE) {
  Deno.test({
    name: IS_ROOT
      ? "mount kind: every test below, in a private mount namespace of its own (unshare -m)"
      : "mount kind (skipped: mounting needs root)",
    ignore: !IS_ROOT,
    async fn() {
      const out = await new Deno.Command("unshare", {
        args: [
          "-m",
          "--propagation",
          "private",
          Deno.execPath(),
          "test",
          "--allow-all",
          new URL(import.meta.url).pathname,
        ],
        env: { NOX_TEST_MOUNT_NAMESPACE: "1", NO_COLOR: "1" },
      }).output();
      const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, said);
      assert.match(said, /ok \| \d+ passed \| 0 failed/, said);
    },
  });
}

/** The kernel's table, as this namespace sees it. */
const table = (): MountEntry[] => parseMountInfo(Deno.readTextFileSync("/proc/self/mountinfo"));
const at = (target: string) => table().findLast((e) => e.target === target);

async function run(...argv: string[]): Promise<string> {
  const out = await new Deno.Command(argv[0], { args: argv.slice(1) }).output();
  const said = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, `${argv.join(" ")}: ${said}`);
  return new TextDecoder().decode(out.stdout).trim();
}

/** A scratch directory (root's, 0755) with a systemd root for the units, and the providers. */
interface Bench extends AsyncDisposable {
  dir: string;
  units: string;
  providers: Providers;
}

/** The mount tools: util-linux's, or busybox's applets (links named as the tools). */
type Tools = "util-linux" | "busybox";

async function bench(tools: Tools = "util-linux"): Promise<Bench> {
  const dir = await Deno.makeTempDir({ prefix: "noxmnt-" });
  await Deno.chmod(dir, 0o755);
  const units = `${dir}/sysroot/etc/systemd/system`;
  await Deno.mkdir(units, { recursive: true });
  const programs: Record<string, string> = {};
  if (tools === "busybox") {
    await Deno.mkdir(`${dir}/bb`);
    for (const tool of ["mount", "umount", "findfs"]) {
      await Deno.symlink("/bin/busybox", `${dir}/bb/${tool}`);
      programs[tool] = `${dir}/bb/${tool}`;
    }
  }
  return {
    dir,
    units,
    providers: {
      fs: posixFileSystem(),
      mounts: systemdMounts({ root: `${dir}/sysroot`, ...programs }),
    },
    async [Symbol.asyncDispose]() {
      // Deepest first; what is still mounted ends with the namespace anyway.
      for (const e of table().filter((m) => m.target.startsWith(dir)).reverse()) {
        await new Deno.Command("umount", { args: ["-l", e.target] }).output();
      }
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const directory = (id: string, path: string, mode = "0755") => ({
  type: "directory",
  id,
  path,
  mode,
  owner: "root",
  group: "root",
});
const mount = (id: string, target: string, source: string, fstype: string, options?: string[]) => ({
  type: "mount",
  id,
  target,
  source,
  fstype,
  ...(options ? { options } : {}),
});
const file = (id: string, path: string, content: string) => ({
  type: "file",
  id,
  path,
  content,
  mode: "0644",
  owner: "root",
  group: "root",
});

if (INSIDE) {
  for (const tools of ["util-linux", "busybox"] as const) {
    Deno.test(`mount kind (${tools}): a tmpfs mounted nosuid,nodev, its unit written and enabled, read back; again nothing; drift repaired`, async () => {
      await using b = await bench(tools);
      await using host = await testEngine(b.providers);
      const target = `${b.dir}/cache`;
      // The directory at the target is, once mounted, the tmpfs's root: the same mode.
      const decl = [
        directory("cache-dir", target, "0750"),
        mount("cache", target, "tmpfs", "tmpfs", ["size=1m", "mode=0750"]),
      ];
      const plan = await host.plan(decl);
      assert.deepEqual(plan.map((p) => p.status), ["create", "create"]);
      assert.equal(at(target), undefined, "a plan mounts nothing");

      const first = await host.apply(decl);
      assert.equal(first.outcome, "converged", JSON.stringify(first.results));
      const e = at(target)!;
      assert.deepEqual([e.fstype, e.source], ["tmpfs", "tmpfs"]);
      assert.deepEqual(e.options.filter((o) => /^(ro|rw|nosuid|nodev|noexec)$/.test(o)), [
        "rw",
        "nosuid",
        "nodev",
      ]);
      assert.ok(e.superOptions.includes("size=1024k") && e.superOptions.includes("mode=750"));
      const unitName = mountUnitName(target);
      const unit = await Deno.readTextFile(`${b.units}/${unitName}`);
      assert.match(unit, /^# Written by nox-mesh-host/);
      assert.match(unit, new RegExp(`^Where=${target}$`, "m"));
      assert.match(unit, /^Options=rw,nosuid,nodev,exec,size=1m,mode=0750$/m);
      assert.equal(
        (await Deno.lstat(`${b.units}/local-fs.target.wants/${unitName}`)).isSymlink,
        true,
        "enabled for local-fs.target",
      );

      const again = await host.apply(decl);
      assert.deepEqual(outcomes(again), ["cache-dir:unchanged", "cache:unchanged"]);

      // Unmounted by hand: mounted again.
      await run("umount", target);
      const remounted = await host.apply(decl);
      assert.deepEqual(remounted.results[1].changes.map((c) => c.split(" ")[0]), ["mount"]);
      assert.ok(at(target));
      // Remounted read-only and exec by hand: the flags are put back.
      await run("mount", "-o", "remount,ro,suid", target);
      const flags = await host.apply(decl);
      assert.deepEqual(flags.results[1].changes, [
        "flags ro,suid,nodev,exec → rw,nosuid,nodev,exec",
      ]);
      assert.deepEqual(at(target)!.options.slice(0, 2), ["rw", "nosuid"]);
      // The unit edited by hand, then disabled: rewritten, enabled again.
      await Deno.writeTextFile(`${b.units}/${unitName}`, unit.replace("size=1m", "size=9m"));
      await Deno.remove(`${b.units}/local-fs.target.wants/${unitName}`);
      const record = await host.apply(decl);
      assert.match(record.results[1].changes.join(), /boot record .* rewritten/);
      assert.equal(await Deno.readTextFile(`${b.units}/${unitName}`), unit);
      assert.ok((await Deno.lstat(`${b.units}/local-fs.target.wants/${unitName}`)).isSymlink);

      // The options changed in the declaration: remounted with them, read back.
      const bigger = [
        directory("cache-dir", target, "0750"),
        mount("cache", target, "tmpfs", "tmpfs", ["size=2m", "mode=0750"]),
      ];
      const grown = await host.apply(bigger);
      assert.equal(grown.outcome, "converged", JSON.stringify(grown.results));
      assert.match(
        grown.results[1].changes.join(" | "),
        /options size=1m,mode=0750 → size=2m,mode=0750/,
      );
      assert.ok(at(target)!.superOptions.includes("size=2048k"));
    });

    Deno.test(`mount kind (${tools}): dropped, what is inside is released first, then it is unmounted, then its directory`, async () => {
      await using b = await bench(tools);
      await using host = await testEngine(b.providers);
      const target = `${b.dir}/data`;
      const r = await host.apply([
        directory("data-dir", target),
        // Writable by root alone (a tmpfs is 1777 unless mode= says otherwise, and the host
        // acts in no directory everyone may write).
        mount("data", target, "tmpfs", "tmpfs", ["mode=0755"]),
        directory("sub", `${target}/sub`),
        file("f", `${target}/sub/f`, "inside\n"),
        directory("inner-dir", `${target}/inner`),
        mount("inner", `${target}/inner`, "inner", "tmpfs", ["mode=0755"]),
        file("g", `${target}/inner/g`, "deeper\n"),
      ]);
      assert.equal(r.outcome, "converged", JSON.stringify(r.results));
      // What is under the mount point stays hidden: the file is in the tmpfs.
      assert.equal(await Deno.readTextFile(`${target}/sub/f`), "inside\n");
      const dropped = await host.apply([]);
      assert.equal(dropped.outcome, "converged", JSON.stringify(dropped.results));
      assert.deepEqual(dropped.results.map((x) => x.id), [
        "g",
        "inner",
        "inner-dir",
        "f",
        "sub",
        "data",
        "data-dir",
      ]);
      assert.ok(dropped.results.every((x) => x.outcome === "removed"), JSON.stringify(dropped));
      assert.equal(at(target), undefined);
      assert.equal(at(`${target}/inner`), undefined);
      await assert.rejects(Deno.lstat(target), Deno.errors.NotFound);
      const left = [...Deno.readDirSync(b.units)].map((d) => d.name);
      assert.deepEqual(left.filter((n) => n.endsWith(".mount")), [], "units removed");
      const wants = `${b.units}/local-fs.target.wants`;
      assert.deepEqual(
        await Deno.lstat(wants).then(() => [...Deno.readDirSync(wants)], () => []),
        [],
      );
    });
  }

  Deno.test("mount kind: a mount in use is not released: the apply says why, the next one releases it", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    const target = `${b.dir}/busy`;
    await host.apply([directory("d", target), mount("m", target, "tmpfs", "tmpfs")]);
    const open = await Deno.open(`${target}/held`, { create: true, write: true });
    const refused = await host.apply([directory("d", target)]);
    assert.equal(refused.outcome, "failed");
    assert.match(refused.error!, /unmounting .*busy failed.*busy.*fuser -vm/s);
    assert.ok(at(target), "still mounted");
    open.close();
    const released = await host.apply([directory("d", target)]);
    assert.equal(released.outcome, "converged", JSON.stringify(released.results));
    assert.equal(at(target), undefined);
  });

  Deno.test("mount kind: a bind keeps ro and noexec of the mount holding its source; lifting them is refused", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    const holder = `${b.dir}/holder`;
    await Deno.mkdir(`${holder}`);
    // The source lies on a mount that says ro,noexec (as /home often says noexec).
    await run("mount", "-t", "tmpfs", "-o", "noexec,mode=0755", "holder", holder);
    await Deno.mkdir(`${holder}/www`);
    await run("mount", "-o", "remount,ro,noexec", holder);
    const target = `${b.dir}/www`;
    const decl = (options?: string[]) => [
      directory("www-dir", target),
      mount("www", target, `${holder}/www`, "bind", options),
    ];
    const r = await host.apply(decl());
    assert.equal(r.outcome, "converged", JSON.stringify(r.results));
    const e = at(target)!;
    assert.equal(e.root, "/www", "the bind shows the source directory");
    assert.equal(e.device, at(holder)!.device);
    for (const flag of ["ro", "nosuid", "nodev", "noexec"]) {
      assert.ok(e.options.includes(flag), flag);
    }
    for (
      const [option, said] of [["exec", /exec \(it is noexec\)/], [
        "rw",
        /rw \(it is ro\)/,
      ]] as const
    ) {
      const lifted = await host.apply(decl([option]));
      assert.equal(lifted.outcome, "failed");
      assert.match(lifted.error!, said);
      assert.match(lifted.error!, /must not lift it/);
    }
    assert.ok(at(target)!.options.includes("noexec"), "still noexec");
  });

  Deno.test("mount kind: suid or dev on a bind of a directory others may write is refused (nobody's directory)", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    const source = `${b.dir}/theirs`;
    await Deno.mkdir(source);
    await Deno.chown(source, NOBODY, NOBODY);
    const target = `${b.dir}/bound`;
    const r = await host.apply([
      directory("t", target),
      mount("m", target, source, "bind", ["suid"]),
    ]);
    assert.equal(r.outcome, "failed");
    assert.match(
      r.error!,
      /a bind of .*theirs with suid is refused: .*theirs belongs to uid 65534/,
    );
    assert.equal(at(target), undefined);
    // Without suid and dev it is bound, nosuid,nodev.
    const plain = await host.apply([directory("t", target), mount("m", target, source, "bind")]);
    assert.equal(plain.outcome, "converged", JSON.stringify(plain.results));
    assert.ok(at(target)!.options.includes("nosuid") && at(target)!.options.includes("nodev"));
  });

  // No race here: the refusal is decided from the owner of the directory above the target
  // (nobody's), looked at through directories only root can change, whatever is below it.
  // Races of the host's own acts run it as a process (tests/fs_race_test.ts).
  Deno.test("mount kind: a target under a directory nobody owns is refused, also when it is a link to root's directory", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    const theirs = `${b.dir}/theirs`;
    const victim = `${b.dir}/victim`;
    await Deno.mkdir(victim);
    await Deno.mkdir(`${theirs}/t`, { recursive: true });
    await Deno.chown(theirs, NOBODY, NOBODY);
    await Deno.chown(`${theirs}/t`, NOBODY, NOBODY);
    // nobody's symlink to a directory of root's, at the target's name.
    await Deno.symlink(victim, `${theirs}/evil`);
    for (const target of [`${theirs}/t`, `${theirs}/evil`]) {
      const r = await host.apply([mount("m", target, "tmpfs", "tmpfs")]);
      assert.equal(r.outcome, "failed");
      assert.match(
        r.error!,
        /the mount target .*theirs\/(t|evil) is refused: .*theirs belongs to uid 65534, so a local user could put a symlink \(to \/\) at .*theirs\/(t|evil) before mount\(8\) mounts on it/,
      );
      assert.equal(at(victim), undefined, "nothing mounted through the symlink");
      assert.equal(table().filter((e) => e.target.startsWith(theirs)).length, 0);
    }
  });

  Deno.test("mount kind: a symlink on the way to a target or a bind source, or a bind source others could swap, is refused", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    await Deno.mkdir(`${b.dir}/real/t`, { recursive: true });
    await Deno.symlink(`${b.dir}/real`, `${b.dir}/link`);
    const linked = await host.apply([mount("m", `${b.dir}/link/t`, "tmpfs", "tmpfs")]);
    assert.equal(linked.outcome, "failed");
    assert.match(
      linked.error!,
      /link \(above the mount target .*link\/t\) is a symlink, which mount\(8\) would follow/,
    );
    // A bind source in a directory nobody owns: nobody could put a link to / there.
    await Deno.mkdir(`${b.dir}/theirs/src`, { recursive: true });
    await Deno.chown(`${b.dir}/theirs`, NOBODY, NOBODY);
    const swappable = await host.apply([
      mount("m", `${b.dir}/real/t`, `${b.dir}/theirs/src`, "bind"),
    ]);
    assert.equal(swappable.outcome, "failed");
    assert.match(
      swappable.error!,
      /the bind source .*theirs\/src is refused: .*theirs belongs to uid 65534/,
    );
    assert.equal(table().filter((e) => e.target.startsWith(b.dir)).length, 0, "nothing mounted");
  });

  Deno.test("mount kind: onto root's configuration (here /srv), a bind source a user can write (theirs, or root's with an ACL naming them) is refused; the way to a source through a directory an ACL lets a user write too", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    // The target under /srv (a directory made here on this machine's disk, and removed;
    // the mount itself lives and dies in this namespace).
    const srv = await Deno.makeTempDir({ dir: "/srv", prefix: "noxmnt-" });
    try {
      await Deno.chmod(srv, 0o755);
      const target = `${srv}/t`;
      // The sources beside it (a source under /tmp or /home is refused at the parse).
      const theirs = `${srv}/src-theirs`;
      await Deno.mkdir(theirs);
      await Deno.chown(theirs, NOBODY, NOBODY);
      const refused = await host.apply([
        directory("t", target),
        mount("m", target, theirs, "bind"),
      ]);
      assert.equal(refused.outcome, "failed");
      assert.match(
        refused.error!,
        /a bind of .*src-theirs onto .*\/t \(under \/srv\) is refused: .*src-theirs belongs to uid 65534, so a local user could write what root reads from there/,
      );
      const acl = `${srv}/src-acl`;
      await Deno.mkdir(acl, { mode: 0o755 });
      await Deno.chmod(acl, 0o755);
      await run("setfacl", "-m", "u:nobody:rwx", acl);
      const viaAcl = await host.apply([directory("t", target), mount("m", target, acl, "bind")]);
      assert.match(
        viaAcl.error!,
        /src-acl onto .* is refused: .*src-acl is writable by group 0 \(or by a user or group its ACL names\)/,
      );
      // Its ACL masked (no write in the mask: no named entry writes), it is root's alone.
      await run("setfacl", "-m", "m::r-x", acl);
      const bound = await host.apply([directory("t", target), mount("m", target, acl, "bind")]);
      assert.equal(bound.outcome, "converged", JSON.stringify(bound.results));
      assert.ok(at(target), "bound");
      assert.equal((await host.apply([directory("t", target)])).outcome, "converged");
      // A source reached through a directory of root's whose ACL lets nobody write (gid 0).
      await Deno.mkdir(`${srv}/shared/src`, { recursive: true });
      await Deno.chmod(`${srv}/shared`, 0o755);
      await run("setfacl", "-m", "u:nobody:rwx", `${srv}/shared`);
      const through = await host.apply([
        directory("t", target),
        mount("m", target, `${srv}/shared/src`, "bind"),
      ]);
      assert.match(
        through.error!,
        /the bind source .*shared\/src is refused: .*shared is writable by group 0 \(and by any user or group a POSIX ACL on it names: the group bits are the ACL's mask\)/,
      );
    } finally {
      for (const e of table().filter((m) => m.target.startsWith(srv)).reverse()) {
        await new Deno.Command("umount", { args: ["-l", e.target] }).output();
      }
      await Deno.remove(srv, { recursive: true });
    }
  });

  Deno.test("mount kind: mount(8) runs no /sbin/mount.TYPE helper (-i)", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    // A helper for tmpfs, in this namespace's /sbin only: mount(8) without -i runs it.
    const marker = `${b.dir}/helper-ran`;
    await Deno.mkdir(`${b.dir}/sbin`);
    for await (const entry of Deno.readDir("/usr/sbin")) {
      await Deno.symlink(`/usr/sbin/${entry.name}`, `${b.dir}/sbin/${entry.name}`);
    }
    await Deno.writeTextFile(`${b.dir}/sbin/mount.tmpfs`, `#!/bin/sh\ntouch ${marker}\n`);
    await Deno.chmod(`${b.dir}/sbin/mount.tmpfs`, 0o755);
    await run("mount", "--bind", `${b.dir}/sbin`, "/usr/sbin");
    try {
      await Deno.mkdir(`${b.dir}/probe`);
      await new Deno.Command("mount", { args: ["-t", "tmpfs", "x", `${b.dir}/probe`] }).output();
      assert.ok(
        await Deno.lstat(marker).then(() => true, () => false),
        "the helper runs without -i",
      );
      await Deno.remove(marker);
      await Deno.mkdir(`${b.dir}/t`);
      const r = await host.apply([mount("m", `${b.dir}/t`, "tmpfs", "tmpfs")]);
      assert.equal(r.outcome, "converged", JSON.stringify(r.results));
      assert.ok(at(`${b.dir}/t`), "mounted by mount(8) itself");
      await assert.rejects(Deno.lstat(marker), Deno.errors.NotFound, "the helper did not run");
    } finally {
      await run("umount", "/usr/sbin");
    }
  });

  Deno.test("mount kind: never over a mount it did not make; one that matches is adopted, and left mounted when dropped", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    const target = `${b.dir}/theirs`;
    await Deno.mkdir(target);
    await run("mount", "-t", "tmpfs", "-o", "nosuid,nodev", "other", target);
    const occupied = await host.apply([mount("m", target, "mine", "tmpfs")]);
    assert.equal(occupied.outcome, "failed");
    assert.match(occupied.error!, /has other \(tmpfs\) mounted, not mine \(tmpfs\)/);
    assert.match(occupied.error!, /never mounts over a mount it did not make/);
    assert.equal(table().filter((e) => e.target === target).length, 1, "nothing stacked");

    const adopted = await host.apply([mount("m", target, "other", "tmpfs")]);
    assert.equal(adopted.outcome, "converged", JSON.stringify(adopted.results));
    assert.deepEqual(adopted.results[0].changes.map((c) => c.split(" ")[0]), ["boot"]);
    const dropped = await host.apply([]);
    assert.deepEqual(outcomes(dropped), ["m:forgotten"]);
    assert.match(dropped.results[0].detail!, /found mounted, not by the host: left mounted/);
    assert.ok(at(target), "still mounted");
    assert.deepEqual([...Deno.readDirSync(b.units)].filter((d) => d.name.endsWith(".mount")), []);
  });

  Deno.test("mount kind: a boot record the host did not write is neither rewritten nor removed", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    const target = `${b.dir}/x`;
    await Deno.mkdir(target);
    const name = mountUnitName(target);
    const theirs = "[Mount]\nWhat=other\nWhere=" + target + "\nType=tmpfs\n";
    await Deno.writeTextFile(`${b.units}/${name}`, theirs);
    const r = await host.apply([mount("m", target, "tmpfs", "tmpfs")]);
    assert.equal(r.outcome, "failed");
    assert.match(r.error!, /is not a boot record the host wrote/);
    assert.equal(await Deno.readTextFile(`${b.units}/${name}`), theirs);
    assert.equal(at(target), undefined, "refused before anything was mounted");
  });

  Deno.test("mount kind: a missing target names the directory resource to declare first", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    const r = await host.apply([mount("m", `${b.dir}/none`, "tmpfs", "tmpfs")]);
    assert.equal(r.outcome, "failed");
    assert.match(r.error!, /the mount target .*none does not exist.*declare it as a directory/);
  });

  Deno.test("mount kind: a device by UUID, LABEL or path (a loop device with ext4); the same filesystem twice is refused", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    const image = `${b.dir}/disk.img`;
    const uuid = crypto.randomUUID();
    const label = `nox${crypto.randomUUID().slice(0, 8)}`;
    await run("truncate", "-s", "16M", image);
    await run("mkfs.ext4", "-q", "-F", "-L", label, "-U", uuid, image);
    const device = await run("losetup", "-f", "--show", image);
    try {
      const one = `${b.dir}/one`;
      const two = `${b.dir}/two`;
      await Deno.mkdir(one);
      await Deno.mkdir(two);
      for (const source of [`UUID=${uuid}`, `LABEL=${label}`, device]) {
        for (const tools of ["util-linux", "busybox"] as const) {
          await using t = await bench(tools);
          await using h = await testEngine(t.providers);
          const decl = [mount("disk", one, source, "ext4", ["noatime"])];
          const r = await h.apply(decl);
          assert.equal(r.outcome, "converged", `${source} ${tools}: ${JSON.stringify(r.results)}`);
          const e = at(one)!;
          assert.deepEqual([e.source, e.fstype], [device, "ext4"]);
          assert.ok(e.options.includes("noatime") && e.options.includes("nosuid"));
          assert.deepEqual(outcomes(await h.apply(decl)), ["disk:unchanged"], "read back equal");
          assert.deepEqual(outcomes(await h.apply([])), ["disk:removed"]);
          assert.equal(at(one), undefined);
        }
      }
      // Mounted once by the host; the same filesystem at a second target is refused.
      const first = await host.apply([mount("a", one, `UUID=${uuid}`, "ext4")]);
      assert.equal(first.outcome, "converged", JSON.stringify(first.results));
      const twice = await host.apply([
        mount("a", one, `UUID=${uuid}`, "ext4"),
        mount("b", two, `LABEL=${label}`, "ext4"),
      ]);
      assert.equal(twice.outcome, "failed");
      assert.match(twice.error!, /its filesystem is mounted at .*one already/);
      assert.equal(at(two), undefined);
      // Under a name mount(8) does not know as that device (a node of the same device
      // elsewhere under /dev, made in this namespace only): mounted, seen, unmounted, refused.
      const [major, minor] = at(one)!.device.split(":");
      await run("mount", "-t", "tmpfs", "-o", "mode=0755", "devnet", "/dev/net");
      await run("mknod", "/dev/net/alias", "b", major, minor);
      const alias = await host.apply([
        mount("a", one, `UUID=${uuid}`, "ext4"),
        mount("b", two, "/dev/net/alias", "ext4"),
      ]);
      await run("umount", "/dev/net");
      assert.equal(alias.outcome, "failed");
      assert.match(
        alias.error!,
        /\/dev\/net\/alias .* is refused at .*two: its filesystem is mounted at .*one already/,
      );
      assert.equal(at(two), undefined, "unmounted again at once");
      assert.deepEqual(outcomes(await host.apply([])), ["a:removed"]);
    } finally {
      for (const e of table().filter((m) => m.source === device).reverse()) {
        await new Deno.Command("umount", { args: [e.target] }).output();
      }
      await run("losetup", "-d", device);
    }
  });

  Deno.test("mount kind: a device no disk carries is said as such", async () => {
    await using b = await bench();
    await using host = await testEngine(b.providers);
    await Deno.mkdir(`${b.dir}/d`);
    const r = await host.apply([mount("m", `${b.dir}/d`, `UUID=${crypto.randomUUID()}`, "ext4")]);
    assert.equal(r.outcome, "failed");
    assert.match(r.error!, /no device on this machine carries UUID=.*blkid lists/);
  });
}
