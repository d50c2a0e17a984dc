/** The command line as a real process under the development permission set: output and exit codes. */
import assert from "node:assert/strict";
import { acquireApplyLock } from "../src/lock.ts";
import { directory, exists, file, runHost, scratch } from "./_helpers.ts";

Deno.test("apply prints a line per resource and exits 0; the second apply says nothing to do", async () => {
  await using s = await scratch();
  const path = await s.declaration([
    directory("d", `${s.root}/d`),
    file("f", `${s.root}/d/f`, "x\n"),
  ]);
  const first = await runHost(["apply", path], { env: s.env });
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /changed +directory d .*\/d +\(create\)\n/);
  assert.match(first.stdout, /changed +file +f .*\/d\/f +\(create\)\n/);
  assert.match(first.stdout, /^converged: 2 changed, 0 unchanged, 0 removed, 0 failed/m);
  const second = await runHost(["apply", path], { env: s.env });
  assert.equal(second.code, 0);
  assert.match(second.stdout, /nothing to do, the machine already matched/);
  const quiet = await runHost(["apply", "--quiet", path], { env: s.env });
  assert.doesNotMatch(quiet.stdout, /unchanged +file/);
});

Deno.test("apply --json gives counts and per-resource outcomes", async () => {
  await using s = await scratch();
  const path = await s.declaration([file("f", `${s.root}/f`, "x\n")]);
  const run = await runHost(["apply", "--json", path], { env: s.env });
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  assert.equal(report.outcome, "converged");
  assert.deepEqual(report.counts, {
    changed: 1,
    unchanged: 0,
    removed: 0,
    forgotten: 0,
    failed: 0,
  });
  assert.deepEqual(report.results.map((r: { id: string; outcome: string }) => [r.id, r.outcome]), [[
    "f",
    "changed",
  ]]);
});

Deno.test("a failed apply exits 1 and names the resource and reason", async () => {
  await using s = await scratch();
  const path = await s.declaration([file("orphan", `${s.root}/none/f`, "x")]);
  const run = await runHost(["apply", path], { env: s.env });
  assert.equal(run.code, 1);
  assert.match(
    run.stdout,
    /^failed: .*\nfile "orphan" failed: the directory .*\/none does not exist/m,
  );
});

Deno.test("a refused declaration exits 2, says where, and applies nothing", async () => {
  await using s = await scratch();
  const path = await s.declaration([
    file("ok", `${s.root}/ok`, "x"),
    file("bad", "relative/path", "x"),
  ]);
  const run = await runHost(["apply", path], { env: s.env });
  assert.equal(run.code, 2);
  assert.match(run.stderr, /refused, nothing was applied:\n {2}resources\[1\]\.path: is relative/);
  assert.equal(await exists(`${s.root}/ok`), false);
  const json = await runHost(["apply", "--json", path], { env: s.env });
  assert.equal(json.code, 2);
  const body = JSON.parse(json.stdout);
  assert.equal(body.outcome, "refused");
  assert.deepEqual(body.error.problems[0].path, "resources[1].path");
});

Deno.test("apply - reads standard input", async () => {
  await using s = await scratch();
  const text = JSON.stringify({ version: 1, resources: [file("f", `${s.root}/f`, "stdin\n")] });
  const run = await runHost(["apply", "-"], { env: s.env, stdin: text });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(await Deno.readTextFile(`${s.root}/f`), "stdin\n");
});

Deno.test("apply --bundle uses the trusted parse; a plain file may not carry an action", async () => {
  await using s = await scratch();
  const action = { type: "action", id: "a", run: ["/bin/true"], verify: ["/bin/true"] };
  const path = await s.declaration([action]);
  const safe = await runHost(["apply", path], { env: s.env });
  assert.equal(safe.code, 2);
  assert.match(safe.stderr, /"action" is accepted only from the bundle/);
  const bundle = await runHost(["apply", "--bundle", path], { env: s.env });
  // Accepted by the parse; it fails only because the host's permission set (the
  // development flags) does not let it run /bin/true: the runtime refuses, not the parse.
  assert.equal(bundle.code, 1, bundle.stderr);
  assert.match(bundle.stdout, /action "a" failed: .*does not allow running \/bin\/true/);
});

Deno.test("usage errors exit 64, unreadable input 66, and every command has --help", async () => {
  await using s = await scratch();
  assert.equal((await runHost(["apply"], { env: s.env })).code, 64);
  assert.equal((await runHost(["frobnicate"], { env: s.env })).code, 64);
  assert.equal((await runHost(["apply", "--nope", "x"], { env: s.env })).code, 64);
  assert.equal((await runHost(["status", "extra"], { env: s.env })).code, 64);
  assert.equal((await runHost([], { env: s.env })).code, 64);
  const missing = await runHost(["apply", `${s.dir}/no-such.json`], { env: s.env });
  assert.equal(missing.code, 66);
  assert.match(missing.stderr, /cannot read .*no-such\.json: it does not exist/);
  for (const command of ["apply", "plan", "status", "profile", "inventory", "version"]) {
    const help = await runHost([command, "--help"], { env: s.env });
    assert.equal(help.code, 0);
    assert.match(help.stdout, new RegExp(`^Usage: nox-mesh-host ${command}`));
  }
  for (const args of [["help"], ["help", "--help"], ["help", "-h"]]) {
    const overview = await runHost(args, { env: s.env });
    assert.equal(overview.code, 0, `${args.join(" ")}: ${overview.stderr}`);
    assert.match(overview.stdout, /Commands:\n {2}apply/);
  }
  assert.equal((await runHost(["help", "frobnicate"], { env: s.env })).code, 64);
});

Deno.test("plan changes nothing and shows what would change", async () => {
  await using s = await scratch();
  const path = await s.declaration([file("f", `${s.root}/f`, "x\n")]);
  const run = await runHost(["plan", path], { env: s.env });
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /create +file +f/);
  assert.match(run.stdout, /plan: 1 to create, 0 to change/);
  assert.equal(await exists(`${s.root}/f`), false);
});

Deno.test("status shows the current declaration and last apply, also as JSON", async () => {
  await using s = await scratch();
  const path = await s.declaration([file("f", `${s.root}/f`, "x\n")], { serial: 3 });
  await runHost(["apply", path], { env: s.env });
  const run = await runHost(["status"], { env: s.env });
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^node +no identity \(not enrolled\)$/m);
  assert.match(run.stdout, /^last apply +#1 converged at .*: 1 changed/m);
  assert.match(run.stdout, /^held +1 resources$/m);
  const json = JSON.parse((await runHost(["status", "--json"], { env: s.env })).stdout);
  assert.equal(json.declaration.serial, 3);
  assert.equal(json.held, 1);
});

Deno.test("a second apply while one holds the lock exits 75 (busy) after --wait", async () => {
  await using s = await scratch();
  const path = await s.declaration([file("f", `${s.root}/f`, "x\n")]);
  const lock = await acquireApplyLock(s.stateDir);
  const run = await runHost(["apply", "--wait", "0.2", path], { env: s.env });
  lock[Symbol.dispose]();
  assert.equal(run.code, 75);
  assert.match(run.stderr, /another apply holds/);
});

Deno.test("a bad configuration file exits 78 and names the setting", async () => {
  await using s = await scratch({ managedRoots: ["relative"], colour: "blue" });
  const path = await s.declaration([]);
  const run = await runHost(["apply", path], { env: s.env });
  assert.equal(run.code, 78);
  assert.match(run.stderr, /managedRoots\.0: is relative/);
  assert.match(run.stderr, /colour: is not a known setting/);
});

Deno.test("version prints the compiled-in version and the Deno runtime it runs on", async () => {
  const run = await runHost(["version", "--json"]);
  assert.equal(run.code, 0);
  const said = JSON.parse(run.stdout);
  assert.match(said.version, /^\d+\.\d+\.\d+/);
  assert.equal(said.deno, Deno.version.deno);
  assert.equal(said.arch, Deno.build.arch);
});
