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
  assert.equal(logLine("a\n  b", "warning", true), "<4>a\n<4>  b\n");
  assert.equal(logLine("a", "debug", true), "<7>a\n");
  assert.equal(logLine("a", undefined, true), "<6>a\n");
  assert.equal(logLine("a", "error", false), "a\n");
});

Deno.test("logLine: control characters from tools and brokers are escaped; a line they start is indented", () => {
  const hostile = "x\u001b]0;pwned\u0007\r\u001b[2Kevil\u0000\u007f\u009b31m\u202egnp.exe\tend";
  const plain = logLine(`apply failed: ${hostile}`, "error", false);
  assert.equal(
    plain,
    "apply failed: x\\x1b]0;pwned\\x07\\r\\x1b[2Kevil\\x00\\x7f\\u009b31m\\u202egnp.exe\tend\n",
  );
  assert.equal(logLine(hostile, "warning", true), `<4>${plain.slice(14)}`);
  // A newline in someone else's text cannot start a line that looks like the host's own.
  assert.equal(
    logLine("link: refused: Authorization\nrun: stopped (signal: SIGTERM)", "info", false),
    "link: refused: Authorization\n  run: stopped (signal: SIGTERM)\n",
  );
  assert.equal(logLine("a:\n  b\n\tc", "info", true), "<6>a:\n<6>  b\n<6>\tc\n");
});

Deno.test("run outside the journal (the OpenRC log): a tool's hostile output reaches the log escaped", async () => {
  await using s = await scratch({ bundle: "/nonexistent-dir/substrate.lock" });
  const bundle = posix.join(s.dir, "substrate.lock");
  await Deno.writeTextFile(s.configPath, JSON.stringify({ managedRoots: [s.root], bundle }));
  // ip(8) names the device it did not find as it was given: raw escape sequences, BEL, CR.
  const device = "x\u001b]0;pwned\u0007\r\u001b[2Kevil";
  // ip as the development permission set's `--allow-run=ip` resolves it: the first on PATH
  // (/usr/sbin/ip where /usr/sbin comes first, /usr/bin/ip where /usr/bin does).
  const onPath = (Deno.env.get("PATH") ?? "").split(":").filter(Boolean).map((d) => `${d}/ip`)
    .find((p) => {
      try {
        return Deno.statSync(p).isFile;
      } catch {
        return false;
      }
    });
  const ip = [onPath ?? "/usr/sbin/ip", "link", "show", "dev", device];
  await Deno.writeTextFile(
    bundle,
    JSON.stringify({
      version: 1,
      resources: [{ type: "action", id: "hostile", run: ip, verify: ip }],
    }),
  );
  for (const env of [s.env, { ...s.env, JOURNAL_STREAM: "8:123456" }]) {
    await using host = await spawnHost(["run", "--heartbeat-interval", "1"], env);
    const [line] = await host.waitLog(/^.*apply \(start, bundle\): failed:.*$/m);
    assert.equal(await host.stop("SIGTERM"), 0);
    assert.match(line, /Device "x\\x1b\]0;pwned\\x07\\r\\x1b\[2Kevil" does not exist/);
    // deno-lint-ignore no-control-regex
    assert.doesNotMatch(host.log(), /[\x00-\x08\x0b-\x1f\x7f]/, "no raw control character");
  }
});
