/**
 * Log lines a person can filter (issue 13): `run` as a real process. With
 * JOURNAL_STREAM set (systemd's journal is the output) every line starts with
 * its syslog priority; a failed apply is <3>, a refusal <4>, the rest <6>.
 * Without it, lines are plain.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { runHost, scratch } from "./_helpers.ts";
import { fileResource, spawnHost } from "./_mesh.ts";
import { logLine } from "../src/log.ts";

Deno.test("run under the journal prefixes each line with its level: a failed apply is <3>", async () => {
  await using s = await scratch();
  await Deno.writeTextFile(`${s.root}/plain`, "not a directory\n");
  const declaration = await s.declaration([fileResource("f", `${s.root}/plain/f`, "x\n")]);
  assert.equal((await runHost(["apply", declaration], { env: s.env })).code, 1);

  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], {
    ...s.env,
    JOURNAL_STREAM: "8:123456",
  });
  await host.waitLog(
    /<3>apply \(start, file\): failed: 0 changed, 0 unchanged, 0 removed, 1 failed in \d+ ms: /,
  );
  assert.equal(await host.stop("SIGTERM"), 0);
  const lines = host.log().trimEnd().split("\n");
  assert.ok(lines.length >= 3);
  for (const line of lines) assert.match(line, /^<[3467]>\S/, `every line has a level: ${line}`);
  assert.match(host.log(), /^<6>run: [^\n]* starting;/m);
});

Deno.test("run under the journal: a refusal is <4>; outside the journal lines are plain", async () => {
  await using s = await scratch({ bundle: "/nonexistent-dir/substrate.lock" });
  const bundle = posix.join(s.dir, "substrate.lock");
  await Deno.writeTextFile(
    s.configPath,
    JSON.stringify({ managedRoots: [s.root], bundle }),
  );
  await Deno.writeTextFile(bundle, `{"version": 1, "resources": [{"type": "nonsense"}]}`);
  {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], {
      ...s.env,
      JOURNAL_STREAM: "8:123456",
    });
    await host.waitLog(/<4>apply \(start\): .*refused, nothing was applied/);
    assert.equal(await host.stop("SIGTERM"), 0);
  }
  await using plain = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await plain.waitLog(
    /\napply \(start\): .*refused, nothing was applied|^apply \(start\): .*refused/m,
  );
  assert.equal(await plain.stop("SIGTERM"), 0);
  assert.doesNotMatch(plain.log(), /^<\d>/m, "no prefixes without the journal");
});

Deno.test("logLine: each line of a multi-line text carries the level", () => {
  assert.equal(logLine("a\nb", "warning", true), "<4>a\n<4>b\n");
  assert.equal(logLine("a", "debug", true), "<7>a\n");
  assert.equal(logLine("a", undefined, true), "<6>a\n");
  assert.equal(logLine("a", "error", false), "a\n");
});
