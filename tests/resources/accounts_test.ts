/**
 * The user and group kinds for real: shadow's tools (useradd, usermod, userdel, groupadd,
 * groupdel) on a private root with `--prefix`, and busybox's applets (adduser, addgroup,
 * deluser, delgroup, passwd) in a chroot; never the machine's own /etc. Everything is read
 * back from the root's passwd, group and shadow.
 */
import assert from "node:assert/strict";
import { outcomes, testEngine } from "../_engine.ts";
import { type AccountRoot, busyboxRoot, shadowRoot } from "./_accounts.ts";

const group = (name: string, extra: Record<string, unknown> = {}) => ({
  type: "group",
  id: `g-${name}`,
  name,
  ...extra,
});
const user = (name: string, extra: Record<string, unknown> = {}) => ({
  type: "user",
  id: `u-${name}`,
  name,
  group: name,
  ...extra,
});
const APP = user("app", {
  system: true,
  groups: ["web"],
  home: "/var/lib/app",
  shell: "/usr/sbin/nologin",
  password: "locked",
});

/** The machine's own databases, to prove the tests never touch them. */
async function machineAccounts(): Promise<string> {
  return (await Promise.all(
    ["/etc/passwd", "/etc/group", "/etc/shadow"].map((p) => Deno.readTextFile(p)),
  )).join("\n");
}

const uidOf = async (w: AccountRoot, name: string) =>
  Number((await w.line("passwd", name))?.split(":")[2]);

for (const [tools, makeRoot] of [["shadow", shadowRoot], ["busybox", busyboxRoot]] as const) {
  Deno.test(`accounts (${tools}): a user and its groups created, read back, a file owned by it; a second apply changes nothing`, async () => {
    const before = await machineAccounts();
    await using w = await makeRoot();
    await using e = await testEngine(w.providers);
    const conf = `${w.root}/app.conf`;
    const declaration = [
      group("app", { system: true }),
      group("web", { gid: 1500 }),
      APP,
      {
        type: "file",
        id: "conf",
        path: conf,
        content: "x\n",
        mode: "0640",
        owner: "app",
        group: "app",
      },
    ];
    const planned = await e.plan(declaration);
    assert.deepEqual(planned.map((p) => p.status), ["create", "create", "create", "create"]);
    const r = await e.apply(declaration);
    assert.equal(r.outcome, "converged", r.error);
    const [name, , uid, gid, , home, shell] = (await w.line("passwd", "app"))!.split(":");
    assert.deepEqual([name, home, shell], ["app", "/var/lib/app", "/usr/sbin/nologin"]);
    assert.ok(Number(uid) >= 100 && Number(uid) < 1000, `a system uid, got ${uid}`);
    assert.equal((await w.line("group", "app"))!.split(":")[2], gid);
    assert.match((await w.line("group", "web"))!, /^web:x:1500:app$/);
    assert.match((await w.line("shadow", "app"))!, /^app:!/);
    const stat = await Deno.stat(conf);
    assert.equal(stat.uid, Number(uid));
    assert.equal(stat.gid, Number(gid));
    // No home directory was made.
    assert.equal(await Deno.stat(`${w.root}/var/lib/app`).catch(() => null), null);

    assert.deepEqual(outcomes(await e.apply(declaration)), [
      "g-app:unchanged",
      "g-web:unchanged",
      "u-app:unchanged",
      "conf:unchanged",
    ]);
    assert.equal(await machineAccounts(), before);
  });

  Deno.test(`accounts (${tools}): a user deleted by hand comes back with the uid the host recorded; groups and lock repaired`, async () => {
    await using w = await makeRoot();
    await using e = await testEngine(w.providers);
    const declaration = [
      group("app"),
      group("web"),
      user("app", { groups: ["web"], password: "locked" }),
    ];
    assert.equal((await e.apply(declaration)).outcome, "converged");
    const uid = await uidOf(w, "app");
    // Another account takes the next id, then "app" goes: a new add without the record would
    // take the next free id (busybox: the first free one above; shadow: the highest plus one).
    await w.byHand(
      tools === "shadow"
        ? ["useradd", "--no-create-home", "--gid", "web", "--", "other"]
        : ["adduser", "-D", "-H", "-G", "web", "other"],
    );
    await w.byHand(tools === "shadow" ? ["userdel", "--", "app"] : ["deluser", "app"]);
    assert.equal(await w.line("passwd", "app"), undefined);
    if (tools === "busybox") {
      // deluser also dropped the group of its name: the declared group comes back too.
      assert.equal(await w.line("group", "app"), undefined);
    }
    const r = await e.apply(declaration);
    assert.equal(r.outcome, "converged", r.error);
    assert.equal(await uidOf(w, "app"), uid);
    assert.match((await w.line("group", "web"))!, /:app(,|$)|,app(,|$)/);

    // Membership and lock changed by hand: repaired.
    await w.byHand(
      tools === "shadow" ? ["usermod", "-G", "", "--", "app"] : ["delgroup", "app", "web"],
    );
    const shadowLine = (await w.line("shadow", "app"))!.split(":");
    shadowLine[1] = "$6$salt$abcdefghijklmnop";
    const shadowText = (await Deno.readTextFile(`${w.root}/etc/shadow`)).replace(
      /^app:.*$/m,
      shadowLine.join(":"),
    );
    await Deno.writeTextFile(`${w.root}/etc/shadow`, shadowText);
    const plan = (await e.plan(declaration))[2];
    assert.deepEqual(plan.changes, ["groups (none) → web", "password → locked"]);
    assert.equal((await e.apply(declaration)).outcome, "converged");
    assert.match((await w.line("shadow", "app"))!, /^app:!\$6\$salt/);
    assert.deepEqual(outcomes(await e.apply(declaration)).at(-1), "u-app:unchanged");
    // Declared out of its supplementary groups: taken out.
    const fewer = [group("app"), group("web"), user("app", { groups: [], password: "locked" })];
    assert.equal((await e.apply(fewer)).outcome, "converged");
    assert.doesNotMatch((await w.line("group", "web"))!, /[:,]app(,|$)/);
  });

  Deno.test(`accounts (${tools}): dropped, what the host created is removed (its files and same-named group kept), what it found is only forgotten`, async () => {
    await using w = await makeRoot();
    await using e = await testEngine(w.providers);
    // Found before the first apply: adopted.
    await w.byHand(
      tools === "shadow"
        ? ["groupadd", "--gid", "1200", "--", "found"]
        : ["addgroup", "-g", "1200", "found"],
    );
    await w.byHand(
      tools === "shadow"
        ? ["useradd", "--no-create-home", "--gid", "found", "--", "found"]
        : ["adduser", "-D", "-H", "-G", "found", "found"],
    );
    const foundUid = await uidOf(w, "found");
    const declaration = [
      group("found"),
      user("found"),
      group("app"),
      user("app", { home: "/srv/app" }),
    ];
    const first = await e.apply(declaration);
    assert.equal(first.outcome, "converged", first.error);
    // The found ones: their ids recorded, nothing else changed.
    assert.deepEqual(first.results.slice(0, 2).map((r) => r.changes), [
      ["gid 1200 recorded (kept from now on)"],
      [`uid ${foundUid} recorded (kept from now on)`],
    ]);
    const gid = (await w.line("group", "app"))!.split(":")[2];
    // A file the user owns, in its home: the release keeps both.
    await Deno.mkdir(`${w.root}/srv/app`, { recursive: true });
    await Deno.writeTextFile(`${w.root}/srv/app/data`, "kept");
    await Deno.chown(`${w.root}/srv/app/data`, await uidOf(w, "app"), Number(gid));

    // The user goes, its group stays declared: userdel/deluser would drop it with the user.
    const dropUser = await e.apply([group("found"), user("found"), group("app")]);
    assert.equal(dropUser.outcome, "converged", dropUser.error);
    assert.deepEqual(outcomes(dropUser).at(-1), "u-app:removed");
    assert.equal(dropUser.results.at(-1)?.detail, "its home and the files it owns are kept");
    assert.equal(await w.line("passwd", "app"), undefined);
    assert.equal((await w.line("group", "app"))?.split(":")[2], gid);
    assert.equal(await Deno.readTextFile(`${w.root}/srv/app/data`), "kept");

    const dropAll = await e.apply([]);
    assert.equal(dropAll.outcome, "converged", dropAll.error);
    assert.deepEqual(outcomes(dropAll).sort(), [
      "g-app:removed",
      "g-found:forgotten",
      "u-found:forgotten",
    ]);
    assert.ok(await w.line("passwd", "found"));
    assert.ok(await w.line("group", "found"));
    assert.equal(await w.line("group", "app"), undefined);
  });

  Deno.test(`accounts (${tools}): the OS's own accounts and another id than declared are refused, nothing changed`, async () => {
    await using w = await makeRoot();
    await using e = await testEngine(w.providers);
    const os = await e.apply([group("daemon")]);
    assert.equal(os.outcome, "failed");
    assert.match(
      os.error!,
      /group "daemon" exists with gid 1: ids below 100 belong to the OS's own/,
    );
    assert.equal((await e.apply([group("app", { gid: 1300 })])).outcome, "converged");
    const other = await e.apply([group("app", { gid: 1301 })]);
    assert.equal(other.outcome, "failed");
    assert.match(
      other.error!,
      /has gid 1300, but the declaration says 1301: the host never changes/,
    );
    assert.match((await w.line("group", "app"))!, /^app:x:1300:/);
  });
}

for (const [tools, makeRoot] of [["shadow", shadowRoot], ["busybox", busyboxRoot]] as const) {
  Deno.test(`accounts (${tools}), over the link: a group that confers root by its gid here, root's gid, and adopting a system account are refused unless host.json permits them; nothing changed`, async () => {
    await using w = await makeRoot();
    // The machine as a person left it: sudo, a group sharing its gid, one sharing root's,
    // and a system account (below UID_MIN: the root's login.defs, or 1000 without one).
    const add = async (file: string, lines: string) =>
      await Deno.writeTextFile(`${w.root}/etc/${file}`, lines, { append: true });
    await add("group", "sudo:x:27:\nwheelish:x:27:\nrootish:x:0:\npostgres:x:105:\napp:x:1500:\n");
    await add("passwd", "postgres:x:105:105::/var/lib/postgresql:/bin/sh\n");
    await add("shadow", "postgres:*:19000:0:99999:7:::\n");
    const before = await Deno.readTextFile(`${w.root}/etc/passwd`);
    const link = await testEngine(w.providers, { trusted: false });
    try {
      const sameGid = await link.apply([user("app", { groups: ["wheelish"] })]);
      assert.equal(sameGid.outcome, "failed");
      assert.match(
        sameGid.error!,
        /group "wheelish" \(gid 27 here, that of "sudo"\) is refused: sudo gives its members root; a declaration from the link or a file may not give an account a group that confers root or reads secrets: declare it in the bundle the host carries, or name "wheelish" in the permit\.groups of this machine's host\.json/,
      );
      const rootGid = await link.apply([user("app", { group: "rootish" })]);
      assert.match(rootGid.error!, /group "rootish" has gid 0 here, which is root's group/);
      const adopt = await link.apply([user("postgres")]);
      assert.equal(adopt.outcome, "failed");
      assert.match(
        adopt.error!,
        /user "postgres" exists with uid 105, below UID_MIN 1000 \(.*login\.defs.*\): a system account; a declaration from the link or a file may not adopt one/,
      );
      assert.match(
        adopt.error!,
        /name "postgres" in the permit\.users of this machine's host\.json/,
      );
      assert.equal(await Deno.readTextFile(`${w.root}/etc/passwd`), before, "nothing changed");
    } finally {
      await link[Symbol.asyncDispose]();
    }
    // Permitted by name on this machine: accepted.
    await using permitted = await testEngine(w.providers, {
      trusted: false,
      permit: { sysctls: [], services: [], groups: ["wheelish"], users: ["postgres"] },
    });
    const ok = await permitted.apply([user("app", { groups: ["wheelish"] }), user("postgres")]);
    assert.equal(ok.outcome, "converged", ok.error);
    assert.match((await w.line("group", "wheelish"))!, /^wheelish:x:27:app$/);
  });
}

Deno.test("accounts (shadow): a shell changed by hand is repaired with usermod", async () => {
  await using w = await shadowRoot();
  await using e = await testEngine(w.providers);
  const declaration = [group("app"), user("app", { shell: "/usr/sbin/nologin", home: "/srv/app" })];
  assert.equal((await e.apply(declaration)).outcome, "converged");
  await w.byHand(["usermod", "--shell", "/bin/bash", "--home", "/tmp", "--", "app"]);
  const r = await e.apply(declaration);
  assert.equal(r.outcome, "converged", r.error);
  assert.deepEqual(r.results[1].changes, [
    "home /tmp → /srv/app",
    "shell /bin/bash → /usr/sbin/nologin",
  ]);
  assert.match((await w.line("passwd", "app"))!, /:\/srv\/app:\/usr\/sbin\/nologin$/);
});

Deno.test("accounts (busybox): a shell changed by hand cannot be repaired without usermod, and says what to do", async () => {
  await using w = await busyboxRoot();
  await using e = await testEngine(w.providers);
  const declaration = [group("app"), user("app", { shell: "/sbin/nologin" })];
  assert.equal((await e.apply(declaration)).outcome, "converged");
  const text = (await Deno.readTextFile(`${w.root}/etc/passwd`)).replace(
    /^(app:.*:)\/sbin\/nologin$/m,
    "$1/bin/sh",
  );
  await Deno.writeTextFile(`${w.root}/etc/passwd`, text);
  const r = await e.apply(declaration);
  assert.equal(r.outcome, "failed");
  assert.match(r.error!, /busybox cannot change the shell of the existing user "app"/);
  assert.match(r.results[1].detail!, /apk add shadow/);
});

Deno.test("accounts: the profile finds shadow's tools on this Debian machine by using useradd -D", async () => {
  const { detectAccounts } = await import("../../os/detect/accounts.ts");
  const found = await detectAccounts();
  assert.equal(found.state, "working");
  assert.equal(found.provider, "shadow");
  assert.match(found.evidence.join(" "), /useradd -D/);
});

Deno.test("accounts: the adapters refuse a name or id a tool would misread before running anything", async () => {
  const { shadowAccounts } = await import("../../os/shadow-accounts/mod.ts");
  const { busyboxAccounts } = await import("../../os/busybox-accounts/mod.ts");
  // A via that fails loudly if anything were run.
  const via = ["/nonexistent/never-run"];
  for (const tools of [shadowAccounts({ via }), busyboxAccounts({ via })]) {
    for (const name of ["-r", "--prefix=/", "a:b", "a\nb", "root x", "a".repeat(33)]) {
      await assert.rejects(
        tools.removeUser(name),
        TypeError,
        `${tools.name}: ${JSON.stringify(name)}`,
      );
      await assert.rejects(tools.addGroup({ name, system: false }), TypeError);
    }
    await assert.rejects(
      tools.addUser({ name: "app", group: "app", groups: ["--all"], system: false }),
      TypeError,
    );
    await assert.rejects(tools.addGroup({ name: "app", gid: 0, system: false }), TypeError);
  }
});
