/**
 * Load per command (issue 28): the bundled program is one entry and the parts its commands
 * load when they run them (packaging/build.ts). The link (the NATS client, its keys,
 * node:crypto, node's module loader for the client's CommonJS) lies only in parts that
 * `version`, `plan FILE` and `apply FILE` never load: with those parts removed from the
 * installed set, the three still work as packaged, while `status`, which uses the link,
 * no longer can (so the removal is real). A part that is not there cannot have been loaded.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { build, type BuildResult } from "../packaging/build.ts";

/** What only the link's code holds: its npm packages, and the built-ins only it imports. */
const LINK_MARKS = [
  "// node_modules/.deno/@nats-io+",
  'from "node:crypto"',
  'from "node:module"',
  'from "node:net"',
  'from "node:tls"',
];

/** The parts that hold the link, and every part that imports one of them statically. */
async function linkParts(b: BuildResult): Promise<Set<string>> {
  const texts = new Map<string, string>();
  for (const name of b.bundle!) texts.set(name, await Deno.readTextFile(join(b.dir, name)));
  const link = new Set(
    [...texts].filter(([, t]) => LINK_MARKS.some((m) => t.includes(m))).map(([n]) => n),
  );
  const imports = (text: string, part: string) =>
    new RegExp(`^(import|export)[^;]*"\\./${part.replaceAll(".", "\\.")}";`, "m").test(text);
  for (let grew = true; grew;) {
    grew = false;
    for (const [name, text] of texts) {
      if (link.has(name) || ![...link].some((part) => imports(text, part))) continue;
      link.add(name);
      grew = true;
    }
  }
  return link;
}

let built: Promise<{ dir: string; b: BuildResult }> | undefined;
function tarballBuild() {
  built ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "noxpk-parts-" });
    const b = await build({ os: "tarball", form: "bundled", out: join(dir, "tarball") });
    return { dir, b };
  })();
  return built;
}

async function run(argv: string[], env: Record<string, string>) {
  const out = await new Deno.Command(argv[0], {
    args: argv.slice(1),
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

Deno.test("program parts: the link lies in parts of its own, apart from the entry; the parts that import it are known", async () => {
  const { b } = await tarballBuild();
  assert.equal(b.bundle![0], "nox-mesh-host.js");
  const link = await linkParts(b);
  const texts = await Promise.all(b.bundle!.map((f) => Deno.readTextFile(join(b.dir, f))));
  assert.ok(
    b.bundle!.some((name, i) => link.has(name) && texts[i].includes("@nats-io+nats-core")),
    "a part holds the NATS client",
  );
  assert.ok(!link.has("nox-mesh-host.js"), "the entry holds or imports none of the link");
  assert.ok(link.size < b.bundle!.length - 2, `most parts are not the link's: ${[...link]}`);
});

Deno.test("program parts: version, plan FILE and apply FILE run as packaged with the link's parts removed; status then cannot", async () => {
  const { dir, b } = await tarballBuild();
  // The installed set without the link's parts, beside a copy of the whole set.
  const without = join(dir, "without-link");
  await Deno.mkdir(without);
  const link = await linkParts(b);
  const removed: string[] = [];
  for (const name of b.bundle!) {
    if (link.has(name)) removed.push(name);
    else await Deno.copyFile(join(b.dir, name), join(without, name));
  }
  assert.ok(removed.length > 0);
  // Run as the tarball's shim runs it (its flags), on this Deno (the version it carries).
  const program = (bundle: string) => [
    Deno.execPath(),
    ...b.command.slice(b.command.indexOf("run"), -1),
    bundle,
  ];
  const host = program(join(without, "nox-mesh-host.js"));
  const whole = program(join(b.dir, "nox-mesh-host.js"));
  // The tarball's set writes only its managed roots: the scratch lives under /var/lib.
  const scratch = await Deno.makeTempDir({ dir: "/var/lib", prefix: "noxpk-parts-" });
  try {
    const root = join(scratch, "root");
    await Deno.mkdir(root);
    await Deno.writeTextFile(join(scratch, "host.json"), JSON.stringify({ managedRoots: [root] }));
    const env = {
      NOX_MESH_HOST_STATE_DIR: join(scratch, "state"),
      NOX_MESH_HOST_CONFIG: join(scratch, "host.json"),
    };
    const declaration = join(scratch, "declaration.json");
    await Deno.writeTextFile(
      declaration,
      JSON.stringify({
        version: 1,
        resources: [
          {
            type: "directory",
            id: "d",
            path: `${root}/d`,
            mode: "0755",
            owner: "root",
            group: "root",
          },
          {
            type: "file",
            id: "f",
            path: `${root}/d/f.conf`,
            content: "parts\n",
            mode: "0644",
            owner: "root",
            group: "root",
          },
        ],
      }),
    );

    const version = await run([...host, "version"], env);
    assert.equal(version.code, 0, version.stderr);
    assert.match(version.stdout, /^nox-mesh-host \d/);
    const plan = await run([...host, "plan", declaration], env);
    assert.equal(plan.code, 0, plan.stderr);
    assert.match(plan.stdout, /create/);
    const apply = await run([...host, "apply", declaration], env);
    assert.equal(apply.code, 0, apply.stderr);
    assert.match(apply.stdout, /converged: 2 changed/);
    assert.equal(await Deno.readTextFile(`${root}/d/f.conf`), "parts\n");
    const again = await run([...host, "apply", "--json", declaration], env);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout).counts.unchanged, 2);

    // The removal bites: the command that uses the link cannot load it…
    const status = await run([...host, "status"], env);
    assert.notEqual(status.code, 0, "status ran without the link's parts");
    assert.match(status.stderr, /Module not found[^\n]*(\n|.)*/);
    assert.ok(removed.some((name) => status.stderr.includes(name)), status.stderr);
    // …and with the whole set it can.
    const whole_status = await run([...whole, "status", "--json"], env);
    assert.equal(whole_status.code, 0, whole_status.stderr);
    assert.equal(JSON.parse(whole_status.stdout).held, 2);
  } finally {
    await Deno.remove(scratch, { recursive: true });
  }
});

Deno.test("program parts: (the shared build's directory is removed)", async () => {
  if (!built) return;
  const { dir } = await built;
  await Deno.remove(dir, { recursive: true });
});
