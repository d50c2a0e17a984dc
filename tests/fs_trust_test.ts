/**
 * Who acts on a path (DESIGN.md §18, docs/trust.md), with the host run as a process under the
 * development permission set (`deno task host`: tests/_helpers.ts runHost), never in-process:
 * as root where only root can change every directory above a path; as the user who alone can
 * change the first directory that root does not hold (its own program, started as that user);
 * refused, before anything is done, where that user could not do what is asked, and where a
 * group, everyone, or a user a POSIX ACL names could swap names. The races themselves are in
 * tests/fs_race_test.ts.
 */
import assert from "node:assert/strict";
import { modeOf, runHost, type Scratch, scratch } from "./_helpers.ts";
import { NOBODY, nobodyExit } from "./_nobody.ts";

const SHIM = new URL("../packaging/dev/nox-mesh-host", import.meta.url).pathname;

/** A scratch machine nobody can reach, with nobody's home in the managed root. */
async function world(): Promise<Scratch & { home: string }> {
  const s = await scratch();
  await Deno.chmod(s.dir, 0o755);
  await Deno.chmod(s.root, 0o755);
  const home = `${s.root}/home`;
  await Deno.mkdir(home, { mode: 0o755 });
  await Deno.chown(home, NOBODY, NOBODY);
  return Object.assign(s, { home });
}

/** Apply `resources` with the host as a process; its JSON report. */
async function apply(s: Scratch, resources: unknown[]) {
  const run = await runHost(["apply", "--json", await s.declaration(resources)], { env: s.env });
  try {
    return JSON.parse(run.stdout);
  } catch {
    throw new Error(`no report (exit ${run.code}): ${run.stdout}${run.stderr}`);
  }
}

const nobody = { owner: "nobody", group: "nogroup" };
const root = { owner: "root", group: "root" };

Deno.test("trust: below a directory a user owns, the host acts as that user: what it makes there is theirs, and it converges again", async () => {
  await using s = await world();
  const resources = [
    { type: "directory", id: "ssh", path: `${s.home}/.ssh`, mode: "0700", ...nobody },
    {
      type: "file",
      id: "keys",
      path: `${s.home}/.ssh/authorized_keys`,
      content: "ssh-ed25519 AAAA nobody@host\n",
      mode: "0600",
      ...nobody,
    },
    // The user's home itself lies in a directory only root can change: root sets it.
    { type: "directory", id: "home", path: s.home, mode: "0750", ...nobody },
    { type: "directory", id: "etc", path: `${s.root}/etc`, mode: "0755", ...root },
    {
      type: "file",
      id: "conf",
      path: `${s.root}/etc/app.conf`,
      content: "x\n",
      mode: "0644",
      ...root,
    },
  ];
  const first = await apply(s, resources);
  assert.equal(first.outcome, "converged", JSON.stringify(first));
  for (
    const [path, uid, mode] of [
      [`${s.home}/.ssh`, NOBODY, "0700"],
      [`${s.home}/.ssh/authorized_keys`, NOBODY, "0600"],
      [s.home, NOBODY, "0750"],
      [`${s.root}/etc/app.conf`, 0, "0644"],
    ] as const
  ) {
    assert.equal((await Deno.lstat(path)).uid, uid, path);
    assert.equal(await modeOf(path), mode, path);
  }
  assert.deepEqual([...Deno.readDirSync(`${s.home}/.ssh`)].map((e) => e.name), ["authorized_keys"]);
  const again = await apply(s, resources);
  assert.equal(again.outcome, "converged");
  assert.ok(again.results.every((r: { outcome: string }) => r.outcome === "unchanged"));
  // Dropped: what it made there is removed, as that user.
  const dropped = await apply(s, resources.filter((r) => r.id === "home"));
  assert.equal(dropped.outcome, "converged", JSON.stringify(dropped));
  assert.deepEqual([...Deno.readDirSync(s.home)], []);
});

Deno.test("trust: below a user's directory, what that user could not do is refused before anything is done, naming the directory and its owner", async () => {
  await using s = await world();
  const cases = [
    {
      resource: {
        type: "file",
        id: "f",
        path: `${s.home}/authorized_keys`,
        content: "x\n",
        mode: "0600",
        ...root,
      },
      says:
        /home belongs to nobody \(uid 65534\), who alone can swap names in it, so the host acts below it as nobody \(uid 65534\), who cannot make a file owned by root \(uid 0\); nothing was done/,
    },
    {
      resource: { type: "directory", id: "d", path: `${s.home}/bin`, mode: "0755", ...root },
      says: /who cannot make a directory owned by root \(uid 0\)/,
    },
    {
      resource: {
        type: "file",
        id: "g",
        path: `${s.home}/shared`,
        content: "x\n",
        mode: "0640",
        owner: "nobody",
        group: "root",
      },
      says: /who is not in the group root \(gid 0\)/,
    },
  ];
  for (const c of cases) {
    const report = await apply(s, [c.resource]);
    assert.equal(report.outcome, "failed", JSON.stringify(report));
    assert.match(report.error, c.says);
    assert.match(report.error, /declare owner "nobody" and a group that user is in/);
    assert.deepEqual([...Deno.readDirSync(s.home)], [], "nothing was made, not even a temporary");
  }
});

Deno.test("trust: a directory above that a group or everyone may write is refused, naming it, its owner and its mode; the sticky /tmp rule", async () => {
  await using s = await world();
  const shared = `${s.root}/shared`;
  await Deno.mkdir(shared, { mode: 0o775 });
  await Deno.chmod(shared, 0o775);
  const file = (path: string, owner = root) => ({
    type: "file",
    id: "f",
    path,
    content: "x\n",
    mode: "0644",
    ...owner,
  });
  const groupWritable = await apply(s, [file(`${shared}/conf`)]);
  assert.match(
    groupWritable.error,
    /shared \(above .*shared\/conf\) belongs to root \(uid 0\) with mode 0775: group 0 may write it \(or a user or group its ACL names\), so a local user could swap names there/,
  );
  const sticky = `${s.root}/tmp`;
  await Deno.mkdir(sticky);
  await Deno.chmod(sticky, 0o1777);
  // An entry root made there stays root's: below it, root acts.
  await Deno.mkdir(`${sticky}/root-made`, { mode: 0o755 });
  const below = await apply(s, [file(`${sticky}/root-made/conf`)]);
  assert.equal(below.outcome, "converged", JSON.stringify(below));
  // A name anyone may make first, or an entry nobody may rename: refused.
  const missing = await apply(s, [
    { type: "directory", id: "later", path: `${sticky}/later`, mode: "0755", ...root },
  ]);
  assert.match(
    missing.error,
    /tmp \(above .*tmp\/later\) belongs to root \(uid 0\) with mode 1777: anyone who may write there could make .*tmp\/later first/,
  );
  // Below a name that is not there, the path is not there either.
  const below2 = await apply(s, [file(`${sticky}/later/conf`)]);
  assert.match(below2.error, /the directory .*tmp\/later does not exist/);
  assert.equal(await nobodyExit('mkdir -- "$1"', `${sticky}/theirs`), 0);
  const theirs = await apply(s, [file(`${sticky}/theirs/conf`, nobody)]);
  assert.match(theirs.error, /tmp\/theirs belongs to nobody \(uid 65534\), who may rename it/);
});

Deno.test("trust: a POSIX ACL that lets a user write a directory of root's shows in its mode's group bits (the ACL's mask), so the host refuses it; masked, root acts there", async () => {
  await using s = await world();
  const dir = `${s.root}/acl`;
  await Deno.mkdir(dir, { mode: 0o755 });
  await Deno.chmod(dir, 0o755);
  const setfacl = async (...args: string[]) => {
    const out = await new Deno.Command("setfacl", { args, stderr: "piped" }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  };
  // A named user entry that grants write: the mask becomes rwx, and the mode's group bits
  // are the mask.
  await setfacl("-m", "u:nobody:rwx", dir);
  assert.equal(await modeOf(dir), "0775", "the ACL's mask is the mode's group bits");
  assert.equal(await nobodyExit('touch -- "$1/planted"', dir), 0, "nobody may write there");
  await Deno.remove(`${dir}/planted`);
  const resource = {
    type: "file",
    id: "f",
    path: `${dir}/conf`,
    content: "x\n",
    mode: "0644",
    ...root,
  };
  const refused = await apply(s, [resource]);
  assert.equal(refused.outcome, "failed");
  assert.match(
    refused.error,
    /acl \(above .*acl\/conf\) belongs to root \(uid 0\) with mode 0775: group 0 may write it \(or a user or group its ACL names\)/,
  );
  // The mask without write bounds every named entry: nobody may no longer write, the group
  // bits say so, and root acts there.
  await setfacl("-m", "m::r-x", dir);
  assert.equal(await modeOf(dir), "0755");
  assert.notEqual(
    await nobodyExit('touch -- "$1/planted"', dir),
    0,
    "the mask bounds nobody's entry",
  );
  const applied = await apply(s, [resource]);
  assert.equal(applied.outcome, "converged", JSON.stringify(applied));
  assert.equal((await Deno.lstat(`${dir}/conf`)).uid, 0);
});

Deno.test("trust: owner and mode set on a descriptor stay under the permission set: a readable, unwritable directory is refused", async () => {
  // /var/tmp: readable under the development flags (`deno task host`), not writable.
  const dir = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "nox-fsfd-" });
  try {
    await using s = await scratch({ managedRoots: [dir] });
    await Deno.mkdir(`${dir}/d`, { mode: 0o700 });
    await Deno.chmod(`${dir}/d`, 0o700);
    const decl = await s.declaration([
      { type: "directory", id: "d", path: `${dir}/d`, mode: "0755", ...root },
    ]);
    const run = await runHost(["apply", "--json", decl], { env: s.env });
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stdout, /Requires write access to \\"[^"]*\/d\\"/);
    assert.equal(
      await modeOf(`${dir}/d`),
      "0700",
      "the mode was not changed through a read descriptor",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** The host's own program as an owner's helper, started as the host starts it. */
function helper(uid: number, gid: number, told: [number, number]) {
  return new Deno.Command(SHIM, {
    args: ["__as-owner", String(told[0]), String(told[1])],
    uid,
    gid,
    cwd: "/",
    clearEnv: true,
    env: { PATH: "/usr/bin:/usr/sbin:/bin:/sbin", NOX_MESH_HOST_DENO: Deno.execPath() },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

async function session(child: Deno.ChildProcess, input: string) {
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(input));
  await writer.close();
  const out = await child.output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

Deno.test("trust: the host's helper never acts as root, nor as another user than it was told, and takes nothing but the protocol", async () => {
  await using s = await world();
  const asRoot = await session(helper(0, 0, [0, 0]), "");
  assert.equal(asRoot.code, 77, asRoot.stderr);
  assert.match(asRoot.stderr, /refusing to act as an owner: this process runs as uid 0/);
  const told = await session(helper(NOBODY, NOBODY, [1000, 1000]), "");
  assert.equal(told.code, 77);
  assert.match(told.stderr, /runs as uid 65534 gid 65534, and was told uid 1000 gid 1000/);
  // As nobody: a greeting, an answer about nobody's own directory, and garbage ends it.
  const lstat = JSON.stringify({ id: 1, verb: "lstat", path: `${s.home}/x`, from: s.home });
  const good = await session(helper(NOBODY, NOBODY, [NOBODY, NOBODY]), `${lstat}\n`);
  assert.equal(good.code, 0, good.stderr);
  assert.deepEqual(good.stdout.trim().split("\n").map((l) => JSON.parse(l)), [
    { id: 0, ok: { uid: NOBODY, gid: NOBODY } },
    { id: 1, ok: null },
  ]);
  const bad = await session(
    helper(NOBODY, NOBODY, [NOBODY, NOBODY]),
    '{"id":1,"verb":"rm -rf /"}\n',
  );
  assert.equal(bad.code, 65, bad.stderr);
  // Asked to give a file to root, it refuses too (the host refuses before asking).
  const create = JSON.stringify({
    id: 2,
    verb: "create",
    path: `${s.home}/f`,
    from: s.home,
    mode: 0o644,
    uid: 0,
    gid: 0,
  });
  const refused = await session(helper(NOBODY, NOBODY, [NOBODY, NOBODY]), `${create}\n`);
  assert.match(refused.stdout, /cannot give a file to uid 0/);
  assert.deepEqual([...Deno.readDirSync(s.home)], []);
});

const REPO = new URL("..", import.meta.url).pathname;

/**
 * The processes now serving as an owner's helper for a host run from this checkout (its
 * program with `__as-owner`; a packaged host elsewhere on the machine is not counted).
 */
function helpers(): number {
  let count = 0;
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const argv = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).split("\0");
      // The deno process the shim becomes (not the shell, nor a subshell of its own).
      const deno = argv[0].endsWith("deno");
      if (deno && argv.includes("__as-owner") && argv.some((a) => a.startsWith(REPO))) count++;
    } catch { /* ended meanwhile */ }
  }
  return count;
}

Deno.test("trust: acting for more users than the helpers it keeps alive (4), the host ends the one idle longest: every file is made as its owner, and never more than 4 run at once", async () => {
  await using s = await world();
  // The OS's own accounts (Debian's base-passwd), each owning a directory of its own.
  const users = [
    ["daemon", "daemon"],
    ["bin", "bin"],
    ["sys", "sys"],
    ["games", "games"],
    ["man", "man"],
    ["lp", "lp"],
  ] as const;
  const resources = [];
  for (const [user, group] of users) {
    const dir = `${s.root}/home-${user}`;
    await Deno.mkdir(dir, { mode: 0o755 });
    const out = await new Deno.Command("chown", { args: [`${user}:${group}`, dir] }).output();
    assert.ok(out.success, `chown ${user}`);
    resources.push({
      type: "file",
      id: `f-${user}`,
      path: `${dir}/conf`,
      content: `${user}\n`,
      mode: "0640",
      owner: user,
      group,
    });
  }
  let most = 0;
  let running = true;
  const watch = (async () => {
    while (running) {
      most = Math.max(most, helpers());
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  let report;
  try {
    report = await apply(s, resources);
  } finally {
    running = false;
    await watch;
  }
  assert.equal(report.outcome, "converged", JSON.stringify(report));
  for (const [user] of users) {
    const info = await Deno.lstat(`${s.root}/home-${user}/conf`);
    const uid = Number(
      new TextDecoder().decode(
        (await new Deno.Command("id", { args: ["-u", user], stdout: "piped" }).output()).stdout,
      ),
    );
    assert.equal(info.uid, uid, user);
  }
  assert.ok(most >= 1, "the helpers were seen (the count below counts them)");
  assert.ok(most <= 4, `at most 4 helpers at once (seen ${most})`);
  assert.equal(helpers(), 0, "none left once the apply ended");
});
