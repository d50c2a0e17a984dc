/**
 * The parse's rules for users and groups (issue 26): names and ids the tools would read
 * otherwise (options, colons, newlines, too long) or that are the OS's own (root, ids
 * below 100, nobody) refused; a file or directory owned by a declared user or group, or a
 * user whose group is declared, must come after it (both ids named); the account files
 * as `file` resources beside users and groups refused (one owner per fact).
 */
import assert from "node:assert/strict";
import { DeclarationRefused } from "../src/declaration/envelope.ts";
import type { ParseOptions } from "../src/declaration/options.ts";
import { parseDeclaration, parseTrustedDeclaration } from "../src/engine/parse.ts";

const options: ParseOptions = {
  managedRoots: ["/etc", "/srv", "/var/lib"],
  own: { paths: [], services: [] },
};
const doc = (resources: unknown[]) => JSON.stringify({ version: 1, resources });
const group = { type: "group", id: "app-group", name: "app" };
const user = { type: "user", id: "app-user", name: "app", group: "app" };
const conf = {
  type: "file",
  id: "app-conf",
  path: "/etc/app.conf",
  content: "x",
  mode: "0640",
  owner: "app",
  group: "app",
};

async function problems(resources: unknown[]): Promise<string[]> {
  try {
    await parseDeclaration(doc(resources), options);
  } catch (error) {
    if (error instanceof DeclarationRefused) {
      return error.problems.map((p) => `${p.path}: ${p.message}`);
    }
    throw error;
  }
  return [];
}

Deno.test("accounts parse: in order (group, user, what they own), accepted", async () => {
  assert.deepEqual(await problems([group, user, conf]), []);
  // A numeric owner needs no account, and an owner that is not declared is the machine's.
  assert.deepEqual(await problems([{ ...conf, owner: "1500", group: "www-data" }, group]), []);
});

Deno.test("accounts parse: a file owned by a user declared after it is refused, naming both", async () => {
  const found = await problems([group, conf, user]);
  assert.equal(found.length, 1);
  assert.match(
    found[0],
    /^resources\[1\]\.owner: names the user "app", declared by resources\[2\] \("app-user"\) after this one \("app-conf"\): declare "app-user" first/,
  );
  const dir = {
    type: "directory",
    id: "d",
    path: "/var/lib/app",
    mode: "0750",
    owner: "root",
    group: "app",
  };
  assert.match(
    (await problems([dir, group]))[0],
    /^resources\[0\]\.group: names the group "app", declared by resources\[1\] \("app-group"\)/,
  );
  assert.match(
    (await problems([{ ...user, groups: ["web"] }, group, { ...group, id: "web", name: "web" }]))
      .join("\n"),
    /resources\[0\]\.group: names the group "app".*\n.*resources\[0\]\.groups\[0\]: names the group "web", declared by resources\[2\] \("web"\)/,
  );
});

Deno.test("accounts parse: the account files as file resources beside users and groups are refused", async () => {
  for (const path of ["/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow"]) {
    const file = { ...conf, id: "f", path, owner: "root", group: "root" };
    const found = await problems([group, file]);
    assert.equal(found.length, 1, path);
    assert.match(
      found[0],
      new RegExp(
        `^resources\\[1\\]: manages ${path}, which the group resources of this declaration change \\(resources\\[0\\], "app-group"\\): one owner per fact`,
      ),
    );
    // Alone (no account resource), the file is a file like any other.
    assert.deepEqual(await problems([file]), []);
  }
});

Deno.test("accounts parse: names and ids a tool would misread, or the OS's own, are refused", async () => {
  const refusedUser = async (fields: Record<string, unknown>, at: string, message: RegExp) => {
    const found = await problems([{ ...user, ...fields }]);
    assert.ok(
      found.some((p) => p.startsWith(`resources[0].${at}: `) && message.test(p)),
      `${JSON.stringify(fields)}: ${found}`,
    );
  };
  const name = /is a name of lowercase letters, digits, _ and -/;
  await refusedUser({ name: "-oops" }, "name", name);
  await refusedUser({ name: "--prefix=/tmp" }, "name", name);
  await refusedUser({ name: "a:b" }, "name", name);
  await refusedUser({ name: "app\nroot:x:0:0::/:/bin/sh" }, "name", name);
  await refusedUser({ name: "a".repeat(33) }, "name", name);
  await refusedUser({ name: "App" }, "name", name);
  await refusedUser({ group: "-g0" }, "group", name);
  await refusedUser({ groups: ["wheel", "x,y"] }, "groups[1]", name);
  await refusedUser({ groups: ["web", "web"] }, "groups", /names a group twice/);
  await refusedUser({ name: "root" }, "name", /is the OS's own/);
  await refusedUser(
    { group: "root" },
    "group",
    /is the OS's own .* nor gives an account root's group/,
  );
  await refusedUser({ name: "nobody" }, "name", /is the OS's own/);
  await refusedUser({ uid: 0 }, "uid", /0 is root's/);
  await refusedUser({ uid: 42 }, "uid", /ids below 100 belong to the OS's own accounts/);
  await refusedUser({ uid: 65534 }, "uid", /"nobody"/);
  await refusedUser({ uid: 4294967295 }, "uid", /at most 4294967294/);
  await refusedUser({ uid: 1.5 }, "uid", /integer/);
  await refusedUser({ home: "/srv/a:b" }, "home", /no colon/);
  await refusedUser({ home: "srv/app" }, "home", /relative/);
  await refusedUser({ shell: "/bin/sh\n" }, "shell", /./);
  await refusedUser({ shell: "/bin/../bin/sh" }, "shell", /\.\./);
  await refusedUser(
    { password: "$6$salt$hash" },
    "password",
    /"locked".*the host never sets a password/,
  );
  const found = await problems([{ ...group, gid: 0 }, {
    ...group,
    id: "g2",
    name: "daemon",
    gid: 1,
  }]);
  assert.match(found.join("\n"), /resources\[0\]\.gid: gid 0: 0 is root's/);
  assert.match(found.join("\n"), /resources\[1\]\.gid: gid 1: ids below 100/);
});

Deno.test("accounts parse: two users with one uid, two groups with one gid, one name twice: refused", async () => {
  const found = await problems([
    { ...group, gid: 1500 },
    { ...group, id: "g2", name: "web", gid: 1500 },
    { ...user, uid: 1500 },
    { ...user, id: "u2", name: "api", uid: 1500 },
    { ...user, id: "u3" },
  ]);
  assert.match(found.join("\n"), /resources\[1\]\.gid: gid 1500 is also resources\[0\]'s/);
  assert.match(found.join("\n"), /resources\[3\]\.uid: uid 1500 is also resources\[2\]'s/);
  assert.match(
    found.join("\n"),
    /resources\[4\]: conflicts with resources\[2\]: both manage user app/,
  );
});

Deno.test("accounts parse: a user given a group that confers root or reads secrets is refused over the link, naming the field and the rule; the bundle may, and host.json may permit it", async () => {
  for (
    const [name, why] of [
      ["sudo", /sudo gives its members root/],
      ["wheel", /su and sudo/],
      ["shadow", /password hash/],
      ["docker", /containers as root/],
      ["disk", /every disk/],
      ["adm", /logs/],
      ["systemd-journal", /journal/],
    ] as const
  ) {
    const asGroup = await problems([{ ...user, group: name }]);
    assert.equal(asGroup.length, 1, asGroup.join("; "));
    assert.match(asGroup[0], new RegExp(`^resources\\[0\\]\\.group: group "${name}" is refused: `));
    assert.match(asGroup[0], why);
    assert.match(
      asGroup[0],
      new RegExp(
        `declare it in the bundle the host carries, or name "${name}" in the permit\\.groups of this machine's host\\.json$`,
      ),
    );
    const asMember = await problems([group, { ...user, groups: ["web", name] }]);
    assert.match(
      asMember.join("\n"),
      new RegExp(`resources\\[1\\]\\.groups\\[1\\]: group "${name}" is refused`),
    );
    // The bundle may; so may a machine that names it.
    await parseTrustedDeclaration(doc([{ ...user, group: name }]), options);
    await parseDeclaration(doc([{ ...user, group: name }]), {
      ...options,
      permit: { sysctls: [], services: [], groups: [name], users: [] },
    });
  }
  // root's own is never given (the account name's own rule).
  assert.match(
    (await problems([{ ...user, groups: ["root"] }]))[0],
    /never manages it, nor gives an account root's group/,
  );
});
